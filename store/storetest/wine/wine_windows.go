//go:build windows && winetest

package wine

import (
	"fmt"
	"os"
	"unsafe" // go:linkname, and wine_get_version's string

	"golang.org/x/sys/windows"
)

//go:linkname deleteatFallback internal/syscall/windows.TestDeleteatFallback
var deleteatFallback bool

// version is wine's version, "" on Windows.
var version = wineVersion()

func init() {
	if version != "" {
		deleteatFallback = true
		fmt.Fprintf(os.Stderr, "wine %s: os.RemoveAll uses Go's fallback delete (wine lacks FileDispositionInformationEx)\n", version)
	}
}

// Detected reports whether the process runs under wine rather than on Windows.
func Detected() bool { return version != "" }

// wineVersion is wine's version (ntdll's wine_get_version), "" on Windows.
func wineVersion() string {
	p := windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version")
	if p.Find() != nil {
		return ""
	}
	r, _, _ := p.Call()
	return windows.BytePtrToString(*(**byte)(unsafe.Pointer(&r))) // a C string in ntdll
}
