//go:build windows && winetest

package app

// Built only by .ci/test-windows (tag winetest, -ldflags=-checklinkname=0): under wine,
// detected at run time, os.RemoveAll takes Go's own fallback delete (store/storetest/wine).

import _ "github.com/smarter-compact/smarter-compact/store/storetest/wine"
