//go:build windows && winetest

package store

// Built only by .ci/test-windows (tag winetest, -ldflags=-checklinkname=0): under wine,
// detected at run time, os.RemoveAll takes Go's own fallback delete (store/storetest/wine),
// and underWine lets the tests allow for wine's slower file system.

import "github.com/smarter-compact/smarter-compact/store/storetest/wine"

func init() { underWine = wine.Detected() }
