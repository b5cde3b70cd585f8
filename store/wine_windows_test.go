//go:build windows && winetest

package store

// Built only by .ci/test-windows (tag winetest): underWine lets the tests allow for wine's
// slower file system. The delete fallback wine needs comes from store/storetest/wine, which
// wine_fallback_windows_test.go (package store_test, in the same test binary) imports: this
// package's own files import nothing of ours (TestImportsNothingOfOurs).

import "golang.org/x/sys/windows"

// Under wine, ntdll exports wine_get_version; Windows' does not.
func init() {
	underWine = windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}
