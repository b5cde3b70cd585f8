// Package wine lets the Windows test binaries that .ci/test-windows runs under wine remove
// files. Built only for windows with the winetest tag (and -ldflags=-checklinkname=0): wine 8
// answers NOT_IMPLEMENTED to FileDispositionInformationEx, which Go's os.RemoveAll falls back
// from only on the codes Windows itself uses, so every RemoveAll (t.TempDir's cleanup too)
// fails with "Invalid function". Importing this package detects wine at run time and then
// switches on Go's own fallback (FileDispositionInfo, what Windows before 10 1607 gets).
// Real Windows is left alone. Test files import it; the product never does.
package wine
