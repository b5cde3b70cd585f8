package assets_test

import (
	"bytes"
	"image"
	"image/png"
	"testing"

	"github.com/smarter-compact/smarter-compact/assets"
)

// TestTrayTemplate: the macOS menu-bar templates are PNGs of TrayTemplateSize square, black
// with alpha only (macOS tints a template by its alpha and ignores its colours), with
// transparent corners, an opaque rim, the sign cut out, an anti-aliased edge, and a
// different shape per state.
func TestTrayTemplate(t *testing.T) {
	n := assets.TrayTemplateSize
	// A point inside each state's sign, in pixels of the 32-unit drawing at n pixels.
	sign := map[assets.TrayState]image.Point{
		assets.TrayActive: {12 * n / 32, 10 * n / 32},
		assets.TrayPaused: {12 * n / 32, 16 * n / 32},
		assets.TrayError:  {16 * n / 32, 12 * n / 32},
	}
	seen := map[string]assets.TrayState{}
	for _, s := range []assets.TrayState{assets.TrayActive, assets.TrayPaused, assets.TrayError} {
		b := assets.Tray(s).Template
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%v: template is not a PNG: %v", s, err)
		}
		if r := img.Bounds(); r.Dx() != n || r.Dy() != n {
			t.Fatalf("%v: template is %v, want %d square", s, r, n)
		}
		alpha := func(x, y int) uint32 { _, _, _, a := img.At(x, y).RGBA(); return a >> 8 }
		partial := 0
		for y := range n {
			for x := range n {
				nr, ng, nb, a := img.At(x, y).RGBA()
				if nr != 0 || ng != 0 || nb != 0 {
					t.Fatalf("%v: pixel (%d,%d) has colour %v: a template is black with alpha only", s, x, y, img.At(x, y))
				}
				if a>>8 != 0 && a>>8 != 0xff {
					partial++
				}
			}
		}
		if partial == 0 {
			t.Errorf("%v: no partly transparent pixel: the edge is not anti-aliased", s)
		}
		for _, p := range []image.Point{{0, 0}, {n - 1, 0}, {0, n - 1}, {n - 1, n - 1}} {
			if a := alpha(p.X, p.Y); a != 0 {
				t.Errorf("%v: corner %v has alpha %d, want 0", s, p, a)
			}
		}
		if a := alpha(n/2, 2*n/32); a != 0xff {
			t.Errorf("%v: the disc's rim at (%d,%d) has alpha %d, want 255", s, n/2, 2*n/32, a)
		}
		if p := sign[s]; alpha(p.X, p.Y) != 0 {
			t.Errorf("%v: the sign at %v is not cut out (alpha %d)", s, p, alpha(p.X, p.Y))
		}
		if other, dup := seen[string(b)]; dup {
			t.Errorf("%v: the same template as %v", s, other)
		}
		seen[string(b)] = s
	}
	if a, b := assets.Tray(assets.TrayActive).Template, assets.Tray(assets.TrayActive).Template; &a[0] == &b[0] {
		t.Error("Tray returns the same template slice twice: callers could change each other's bytes")
	}
}
