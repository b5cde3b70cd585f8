package main

import (
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// The plots are written as plain SVG by this program: no plotting library, no hand edits.

var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1"}

const (
	svgW, svgH                    = 720, 400
	padL, padR, padTop, padBottom = 80, 170, 40, 60
)

// series is one named line or bar set.
type series struct {
	Name string
	X    []float64 // line charts only
	Y    []float64
	Dash bool // draw dashed (reference lines)
}

// lineChart draws series as lines over a linear or log10 x axis.
type lineChart struct {
	Title, XLabel, YLabel string
	LogX                  bool
	Series                []series
	YMin                  *float64 // nil: 0
}

// barChart draws one bar per series in each group.
type barChart struct {
	Title, YLabel string
	Groups        []string
	Series        []series // Y[i] belongs to Groups[i]; NaN leaves a gap
	LogY          bool
}

func writeSVG(dir, name, body string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
}

type canvas struct{ b strings.Builder }

func newCanvas(title string) *canvas {
	c := &canvas{}
	fmt.Fprintf(&c.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&c.b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	c.text(svgW/2, 22, "middle", 15, title)
	return c
}

func (c *canvas) text(x, y float64, anchor string, size int, s string) {
	fmt.Fprintf(&c.b, `<text x="%.1f" y="%.1f" text-anchor="%s" font-size="%d">%s</text>`+"\n", x, y, anchor, size, html.EscapeString(s))
}

func (c *canvas) line(x1, y1, x2, y2 float64, stroke string, width float64, dash bool) {
	d := ""
	if dash {
		d = ` stroke-dasharray="6 4"`
	}
	fmt.Fprintf(&c.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"%s/>`+"\n", x1, y1, x2, y2, stroke, width, d)
}

func (c *canvas) legend(names []string, dashes []bool) {
	x := float64(svgW - padR + 15)
	for i, n := range names {
		y := float64(padTop + 10 + 20*i)
		c.line(x, y, x+22, y, palette[i%len(palette)], 3, dashes[i])
		c.text(x+28, y+4, "start", 12, n)
	}
}

func (c *canvas) done() string { c.b.WriteString("</svg>\n"); return c.b.String() }

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 || math.IsNaN(v) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func label(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", v/1e6), ".0") + "M"
	case a >= 1e3:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", v/1e3), ".0") + "k"
	case a >= 10 || a == 0:
		return fmt.Sprintf("%.0f", v)
	case a >= 1:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0")
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

func (lc lineChart) svg() string {
	c := newCanvas(lc.Title)
	sc := lc.scale()
	lc.axes(c, sc)
	names, dashes := lc.lines(c, sc)
	c.legend(names, dashes)
	return c.done()
}

// lineScale maps data to the plot area of a line chart: x0..x1 (log10 of x on a log axis)
// and ymin..ymax onto the pw × ph pixels inside the paddings.
type lineScale struct {
	x0, x1, ymin, ymax float64
	pw, ph             float64
	logX               bool
}

// px is the pixel x of data x.
func (s lineScale) px(x float64) float64 {
	if s.logX {
		x = math.Log10(x)
	}
	return padL + (x-s.x0)/(s.x1-s.x0)*s.pw
}

// py is the pixel y of data y.
func (s lineScale) py(y float64) float64 { return padTop + s.ph - (y-s.ymin)/(s.ymax-s.ymin)*s.ph }

// scale finds the ranges of lc's data: x over every point, y from YMin (0 when nil) to the
// nice maximum of the non-NaN values, each widened to a unit when empty. A step of its own
// because the axes and the lines both draw through it.
func (lc lineChart) scale() lineScale {
	x0, x1 := math.Inf(1), math.Inf(-1)
	ymax := 0.0
	for _, s := range lc.Series {
		for i, x := range s.X {
			if lc.LogX {
				x = math.Log10(x)
			}
			x0, x1 = math.Min(x0, x), math.Max(x1, x)
			if !math.IsNaN(s.Y[i]) {
				ymax = math.Max(ymax, s.Y[i])
			}
		}
	}
	if math.IsInf(x0, 0) {
		x0, x1 = 0, 1
	}
	if x1 == x0 {
		x1 = x0 + 1
	}
	ymin := 0.0
	if lc.YMin != nil {
		ymin = *lc.YMin
	}
	ymax = niceMax(ymax)
	if ymax <= ymin {
		ymax = ymin + 1
	}
	pw, ph := float64(svgW-padL-padR), float64(svgH-padTop-padBottom)
	return lineScale{x0: x0, x1: x1, ymin: ymin, ymax: ymax, pw: pw, ph: ph, logX: lc.LogX}
}

// axes draws the y grid with its labels, the x ticks (one per data x on a log axis, six
// even ones on a linear axis), both axis lines and the axis labels. A step of its own
// because it draws everything of the chart but the data.
func (lc lineChart) axes(c *canvas, sc lineScale) {
	pw, ph := sc.pw, sc.ph
	for i := 0; i <= 5; i++ {
		y := sc.ymin + (sc.ymax-sc.ymin)*float64(i)/5
		c.line(padL, sc.py(y), padL+pw, sc.py(y), "#ddd", 1, false)
		c.text(padL-6, sc.py(y)+4, "end", 11, label(y))
	}
	if lc.LogX {
		// a tick at each x of the data
		seen := map[float64]bool{}
		for _, s := range lc.Series {
			for _, x := range s.X {
				if !seen[x] {
					seen[x] = true
					c.line(sc.px(x), padTop+ph, sc.px(x), padTop+ph+5, "#333", 1, false)
					c.text(sc.px(x), padTop+ph+18, "middle", 11, label(x))
				}
			}
		}
	} else {
		for i := 0; i <= 5; i++ {
			x := sc.x0 + (sc.x1-sc.x0)*float64(i)/5
			c.line(padL+pw*float64(i)/5, padTop+ph, padL+pw*float64(i)/5, padTop+ph+5, "#333", 1, false)
			c.text(padL+pw*float64(i)/5, padTop+ph+18, "middle", 11, label(x))
		}
	}
	c.line(padL, padTop, padL, padTop+ph, "#333", 1, false)
	c.line(padL, padTop+ph, padL+pw, padTop+ph, "#333", 1, false)
	c.text(padL+pw/2, svgH-18, "middle", 12, lc.XLabel)
	fmt.Fprintf(&c.b, `<text transform="translate(18,%.1f) rotate(-90)" text-anchor="middle" font-size="12">%s</text>`+"\n", padTop+ph/2, html.EscapeString(lc.YLabel))
}

// lines draws each series as a polyline (NaN points left out, values capped at the top of
// the scale), with a dot per point when it has at most 12, and returns the names and dash
// styles for the legend. A step of its own because it is the data layer of the chart.
func (lc lineChart) lines(c *canvas, sc lineScale) (names []string, dashes []bool) {
	for i, s := range lc.Series {
		var pts []string
		for k, x := range s.X {
			if math.IsNaN(s.Y[k]) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", sc.px(x), sc.py(math.Min(s.Y[k], sc.ymax))))
		}
		d := ""
		if s.Dash {
			d = ` stroke-dasharray="6 4"`
		}
		col := palette[i%len(palette)]
		fmt.Fprintf(&c.b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", col, d, strings.Join(pts, " "))
		if len(s.X) <= 12 {
			for _, p := range pts {
				xy := strings.Split(p, ",")
				fmt.Fprintf(&c.b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], col)
			}
		}
		names, dashes = append(names, s.Name), append(dashes, s.Dash)
	}
	return names, dashes
}

func (bc barChart) svg() string {
	c := newCanvas(bc.Title)
	ymax, ymin := 0.0, math.Inf(1)
	for _, s := range bc.Series {
		for _, y := range s.Y {
			if !math.IsNaN(y) {
				ymax = math.Max(ymax, y)
				if y > 0 {
					ymin = math.Min(ymin, y)
				}
			}
		}
	}
	pw, ph := float64(svgW-padL-padR), float64(svgH-padTop-padBottom)
	var py func(float64) float64
	var ticks []float64
	base := padTop + ph
	if bc.LogY {
		lo := math.Floor(math.Log10(math.Max(ymin, 1e-9)))
		hi := math.Ceil(math.Log10(math.Max(ymax, 1e-9)))
		if hi <= lo {
			hi = lo + 1
		}
		py = func(y float64) float64 {
			if y <= 0 {
				return base
			}
			return padTop + ph - (math.Log10(y)-lo)/(hi-lo)*ph
		}
		for e := lo; e <= hi; e++ {
			ticks = append(ticks, math.Pow(10, e))
		}
	} else {
		ymax = niceMax(ymax)
		py = func(y float64) float64 { return padTop + ph - y/ymax*ph }
		for i := 0; i <= 5; i++ {
			ticks = append(ticks, ymax*float64(i)/5)
		}
	}
	for _, y := range ticks {
		c.line(padL, py(y), padL+pw, py(y), "#ddd", 1, false)
		c.text(padL-6, py(y)+4, "end", 11, label(y))
	}
	c.line(padL, padTop, padL, base, "#333", 1, false)
	c.line(padL, base, padL+pw, base, "#333", 1, false)
	fmt.Fprintf(&c.b, `<text transform="translate(18,%.1f) rotate(-90)" text-anchor="middle" font-size="12">%s</text>`+"\n", padTop+ph/2, html.EscapeString(bc.YLabel))
	gw := pw / float64(max(len(bc.Groups), 1))
	bw := gw * 0.8 / float64(max(len(bc.Series), 1))
	for g, name := range bc.Groups {
		gx := padL + gw*float64(g)
		c.text(gx+gw/2, base+18, "middle", 11, name)
		for i, s := range bc.Series {
			if g >= len(s.Y) || math.IsNaN(s.Y[g]) {
				continue
			}
			top := py(s.Y[g])
			fmt.Fprintf(&c.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n",
				gx+gw*0.1+bw*float64(i), top, bw*0.95, math.Max(base-top, 0.5), palette[i%len(palette)])
		}
	}
	var names []string
	var dashes []bool
	for _, s := range bc.Series {
		names, dashes = append(names, s.Name), append(dashes, false)
	}
	c.legend(names, dashes)
	return c.done()
}
