//go:build windows && winetest

package app

// Built only by .ci/test-windows (tag winetest, -ldflags=-checklinkname=0), for the run
// under wine: wine 8 answers NOT_IMPLEMENTED to FileDispositionInformationEx, which Go's
// os.RemoveAll falls back from only on the codes Windows itself uses, so every RemoveAll
// (t.TempDir's cleanup too) fails with "Invalid function". Under wine, detected at run time,
// this switches on Go's own fallback (FileDispositionInfo, what Windows before 10 1607
// gets). Real Windows is left alone.

import (
	"fmt"
	"os"
	"unsafe" // go:linkname, and wine_get_version's string

	"golang.org/x/sys/windows"
)

//go:linkname deleteatFallback internal/syscall/windows.TestDeleteatFallback
var deleteatFallback bool

func init() {
	if v := wineVersion(); v != "" {
		deleteatFallback = true
		fmt.Fprintf(os.Stderr, "wine %s: os.RemoveAll uses Go's fallback delete (wine lacks FileDispositionInformationEx)\n", v)
	}
}

// wineVersion is wine's version (ntdll's wine_get_version), "" on Windows.
func wineVersion() string {
	p := windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version")
	if p.Find() != nil {
		return ""
	}
	r, _, _ := p.Call()
	return windows.BytePtrToString(*(**byte)(unsafe.Pointer(&r))) // a C string in ntdll
}
