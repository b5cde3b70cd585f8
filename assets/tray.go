package assets

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"math"
	"strconv"
	"sync"
)

// TrayState selects the tray icon (DESIGN.md §9: the icon shows on, paused or error).
type TrayState int

const (
	TrayActive TrayState = iota // trimming is on for at least one agent: green, three lines of falling length
	TrayPaused                  // paused, or every agent off: grey, a pause sign
	TrayError                   // a recent fail-open or a config error: red, an exclamation mark
)

func (s TrayState) String() string {
	switch s {
	case TrayActive:
		return "active"
	case TrayPaused:
		return "paused"
	case TrayError:
		return "error"
	}
	return "TrayState(" + strconv.Itoa(int(s)) + ")"
}

// TrayIcon is one tray icon in the encodings fyne.io/systray takes:
//
//   - PNG, for the StatusNotifierItem on Linux (and macOS): TrayPNGSize square, its edge
//     fully opaque or fully transparent. fyne.io/systray v1.12.2 turns the image into the
//     item's ARGB pixmap from the premultiplied 16-bit channels' low bytes, which garbles
//     every partly transparent pixel; at twice the usual size the tray host's own scaling
//     smooths the edge instead. Inside the disc the sign is anti-aliased as usual.
//   - ICO, for Windows, whose systray.SetIcon loads the bytes as an .ico file: TrayICOSize
//     square, anti-aliased, as one 32-bit DIB with its AND mask, which every Windows
//     version loads (PNG inside an ICO needs Vista's loader, and small PNG entries are
//     handled unevenly).
//   - Template, for the macOS menu bar (systray.SetTemplateIcon): a PNG of
//     TrayTemplateSize square, black (R = G = B = 0) with only the alpha channel drawn, so
//     that macOS tints it for a light or dark menu bar and for a highlighted item. It is
//     the disc with the sign cut out, anti-aliased: a template has no colours, so the
//     three states differ by their sign only.
type TrayIcon struct {
	PNG      []byte
	ICO      []byte
	Template []byte
}

// Sizes of the tray icons in pixels; tray hosts scale them.
const (
	TrayPNGSize = 64
	TrayICOSize = 32
	// TrayTemplateSize: fyne.io/systray v1.12.2 shows the menu-bar image at 16×16 points,
	// which is 32 pixels on a Retina display.
	TrayTemplateSize = 32
)

// Tray returns the icon for s, drawn in code so the repository holds no binary file.
// Each call returns fresh copies of the bytes; an unknown s gives the active icon.
func Tray(s TrayState) TrayIcon {
	icons := trayIcons()
	if s < 0 || int(s) >= len(icons) {
		s = TrayActive
	}
	ic := icons[s]
	return TrayIcon{PNG: bytes.Clone(ic.PNG), ICO: bytes.Clone(ic.ICO), Template: bytes.Clone(ic.Template)}
}

// trayLook is the disc colour and the sign of each state.
func trayLook(s TrayState) (color.NRGBA, glyph) {
	switch s {
	case TrayPaused:
		return color.NRGBA{0x6b, 0x72, 0x7b, 0xff}, pauseGlyph
	case TrayError:
		return color.NRGBA{0xc8, 0x32, 0x2b, 0xff}, errorGlyph
	default:
		return color.NRGBA{0x1d, 0x85, 0x4a, 0xff}, activeGlyph
	}
}

// trayIcons draws and encodes the three icons once, on first use.
var trayIcons = sync.OnceValue(func() [3]TrayIcon {
	var out [3]TrayIcon
	for _, s := range []TrayState{TrayActive, TrayPaused, TrayError} {
		bg, g := trayLook(s)
		out[s] = TrayIcon{
			PNG:      encodePNG(drawTray(TrayPNGSize, bg, g, true)),
			ICO:      encodeICO(drawTray(TrayICOSize, bg, g, false)),
			Template: encodePNG(drawTemplate(TrayTemplateSize, g)),
		}
	}
	return out
})

func encodePNG(img image.Image) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic("assets: encode tray icon: " + err.Error()) // an in-memory NRGBA always encodes
	}
	return b.Bytes()
}

// A glyph reports whether the point (x, y), in units of a 32×32 square from its top left,
// is inside the white sign on the disc.
type glyph func(x, y float64) bool

// inRoundRect: a rectangle from (x0, y0) to (x1, y1) with corners of radius r.
func inRoundRect(x, y, x0, y0, x1, y1, r float64) bool {
	if x < x0 || x > x1 || y < y0 || y > y1 {
		return false
	}
	cx := math.Max(x0+r, math.Min(x, x1-r))
	cy := math.Max(y0+r, math.Min(y, y1-r))
	return (x-cx)*(x-cx)+(y-cy)*(y-cy) <= r*r
}

// activeGlyph: three lines, each shorter than the one above: a conversation being trimmed.
func activeGlyph(x, y float64) bool {
	return inRoundRect(x, y, 8, 9, 24, 12.5, 1.75) ||
		inRoundRect(x, y, 8, 14.25, 20.5, 17.75, 1.75) ||
		inRoundRect(x, y, 8, 19.5, 16, 23, 1.75)
}

func pauseGlyph(x, y float64) bool {
	return inRoundRect(x, y, 10.5, 9, 14, 23, 1) || inRoundRect(x, y, 18, 9, 21.5, 23, 1)
}

func errorGlyph(x, y float64) bool {
	dot := (x-16)*(x-16)+(y-22.5)*(y-22.5) <= 2.1*2.1
	return dot || inRoundRect(x, y, 14.25, 7, 17.75, 18.5, 1.75)
}

// drawTray draws a size×size disc of colour bg with g in white, anti-aliased by 4×4
// supersampling. hardEdge makes every pixel fully opaque or fully transparent (covered by
// at least half the samples): only the sign's edge stays smooth.
func drawTray(size int, bg color.NRGBA, g glyph, hardEdge bool) *image.NRGBA {
	const ss, c, r = 4, 16.0, 15.0 // samples per axis; the disc in 32×32 units
	unit := 32 / float64(size)
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	for py := range size {
		for px := range size {
			var sr, sg, sb float64
			n := 0 // samples inside the disc
			for sy := range ss {
				for sx := range ss {
					x := (float64(px) + (float64(sx)+0.5)/ss) * unit
					y := (float64(py) + (float64(sy)+0.5)/ss) * unit
					if (x-c)*(x-c)+(y-c)*(y-c) > r*r {
						continue
					}
					col := bg
					if g(x, y) {
						col = color.NRGBA{0xff, 0xff, 0xff, 0xff}
					}
					sr += float64(col.R)
					sg += float64(col.G)
					sb += float64(col.B)
					n++
				}
			}
			alpha := float64(n) / (ss * ss)
			if hardEdge {
				alpha = math.Round(alpha)
			}
			if n == 0 || alpha == 0 {
				continue
			}
			// Every sample is opaque: the colour is the mean of the covered samples, the
			// alpha the covered share.
			img.SetNRGBA(px, py, color.NRGBA{
				R: uint8(math.Round(sr / float64(n))),
				G: uint8(math.Round(sg / float64(n))),
				B: uint8(math.Round(sb / float64(n))),
				A: uint8(math.Round(alpha * 255)),
			})
		}
	}
	return img
}

// drawTemplate draws a size×size template image: black, its alpha the share of 4×4
// samples inside the disc and outside the sign g.
func drawTemplate(size int, g glyph) *image.NRGBA {
	const ss, c, r = 4, 16.0, 15.0 // as drawTray
	unit := 32 / float64(size)
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	for py := range size {
		for px := range size {
			n := 0
			for sy := range ss {
				for sx := range ss {
					x := (float64(px) + (float64(sx)+0.5)/ss) * unit
					y := (float64(py) + (float64(sy)+0.5)/ss) * unit
					if (x-c)*(x-c)+(y-c)*(y-c) <= r*r && !g(x, y) {
						n++
					}
				}
			}
			img.SetNRGBA(px, py, color.NRGBA{A: uint8(math.Round(float64(n) * 255 / (ss * ss)))})
		}
	}
	return img
}

// encodeICO wraps img (at most 255×255) in an .ico file with one 32-bit DIB entry: a
// BITMAPINFOHEADER of twice the height (colour rows, then the AND mask), BGRA rows bottom
// up, then the 1-bit AND mask (set where the pixel is fully transparent), rows padded to
// 4 bytes.
func encodeICO(img *image.NRGBA) []byte {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	maskStride := (w + 31) / 32 * 4
	pixels := w * h * 4
	mask := maskStride * h
	const dirSize, entrySize, headerSize = 6, 16, 40
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	// ICONDIR
	le(uint16(0)) // reserved
	le(uint16(1)) // type: icon
	le(uint16(1)) // one image
	// ICONDIRENTRY
	b.WriteByte(byte(w))
	b.WriteByte(byte(h))
	b.WriteByte(0)                         // no palette
	b.WriteByte(0)                         // reserved
	le(uint16(1))                          // colour planes
	le(uint16(32))                         // bits per pixel
	le(uint32(headerSize + pixels + mask)) // bytes of the image
	le(uint32(dirSize + entrySize))        // offset of the image
	le(uint32(headerSize))                 // BITMAPINFOHEADER.biSize
	le(int32(w))                           // biWidth
	le(int32(2 * h))                       // biHeight: colour and mask
	le(uint16(1))                          // biPlanes
	le(uint16(32))                         // biBitCount
	le(uint32(0))                          // biCompression: BI_RGB
	le(uint32(pixels + mask))              // biSizeImage
	le([4]uint32{})                        // resolution and palette: unused
	for y := h - 1; y >= 0; y-- {
		for x := range w {
			c := img.NRGBAAt(img.Rect.Min.X+x, img.Rect.Min.Y+y)
			b.Write([]byte{c.B, c.G, c.R, c.A})
		}
	}
	for y := h - 1; y >= 0; y-- {
		row := make([]byte, maskStride)
		for x := range w {
			if img.NRGBAAt(img.Rect.Min.X+x, img.Rect.Min.Y+y).A == 0 {
				row[x/8] |= 0x80 >> (x % 8)
			}
		}
		b.Write(row)
	}
	return b.Bytes()
}
