package web

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/web/ui"
)

// The charts are server-rendered SVG (DESIGN.md §9): this file computes the geometry in
// chart units (x: 0 to chartW, drawn as percentages of the width; y: pixels),
// web/ui/charts.templ draws it. Every value is also written as text (above a
// bar, in <title>, in the caption), so the charts read without JavaScript.

// Chart frame in chart units: x runs 0..chartW across the panel's width, y is in pixels.
const (
	chartW      = 640
	chartH      = 220
	chartLeft   = 52  // room for the y labels
	chartRight  = 630 // end of the plot
	chartTop    = 18  // room for the value above the tallest bar
	chartBottom = 190 // the x axis; labels go below it
)

// niceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten, so the y ticks are round.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// yTicks are gridlines at 0, ½ and 1 of top.
func yTicks(top float64) []ui.Tick {
	var ticks []ui.Tick
	for _, f := range []float64{0, 0.5, 1} {
		ticks = append(ticks, ui.Tick{Y: chartBottom - f*(chartBottom-chartTop), Label: compact(f * top)})
	}
	return ticks
}

// dailyChart draws the tokens saved per day, oldest first (store.Root.Daily).
func dailyChart(days []store.Day) ui.BarChart {
	c := ui.BarChart{
		TestID: "chart-daily-saved", Title: "Estimated tokens saved per day (UTC)",
		Width: chartW, Height: chartH, XAxisY: chartBottom, PlotX0: chartLeft, PlotX1: chartRight,
	}
	if len(days) == 0 {
		c.Summary = "No days to show."
		return c
	}
	var top, total int64
	best := 0
	for i, d := range days {
		total += d.TokensSaved
		if d.TokensSaved > days[best].TokensSaved {
			best = i
		}
		top = max(top, d.TokensSaved)
	}
	scale := niceCeil(float64(top))
	c.YTicks = yTicks(scale)
	slot := float64(chartRight-chartLeft) / float64(len(days))
	w := slot * 0.7
	for i, d := range days {
		v := float64(max(d.TokensSaved, 0))
		h := v / scale * (chartBottom - chartTop)
		x := chartLeft + float64(i)*slot + (slot-w)/2
		label := d.Date
		if len(label) == len("2006-01-02") {
			label = label[5:] // MM-DD under the bar; the title has the full date
		}
		c.Bars = append(c.Bars, ui.Bar{
			X: x, Y: chartBottom - h, W: w, H: h,
			Label: label, LabelX: x + w/2, LabelY: chartBottom + 16,
			Value: compact(v), ValueY: chartBottom - h - 4,
			Title: fmt.Sprintf("%s: %s saved, %s, %s, %s", d.Date,
				ui.Plural(d.TokensSaved, "token", "tokens"), ui.Plural(d.Trims, "trim", "trims"),
				ui.Plural(d.Requests, "request", "requests"), ui.Plural(d.FailOpens, "fail-open", "fail-opens")),
			Minor: (len(days)-1-i)%2 == 1,
		})
	}
	c.Summary = fmt.Sprintf("%s saved over %s (%s to %s)", ui.Plural(total, "token", "tokens"),
		ui.Plural(int64(len(days)), "day", "days"), days[0].Date, days[len(days)-1].Date)
	if top > 0 {
		c.Summary += fmt.Sprintf("; most on %s: %s", days[best].Date, ui.Commas(days[best].TokensSaved))
	}
	c.Summary += "."
	return c
}

// maxDots caps the request dots; the line still shows every request.
const maxDots = 400

// promptChart draws prompt tokens (input + cache read + cache creation) per request, one
// point per usage event that reported them, in event order. A trim is marked at the request
// it applied to: a trim event at the next usage event after it, and a usage event that
// reported a new cut (trimmed = 2); both for one request make one mark.
//
// With the session's savings records (recs, one per usage event that reported its prompt,
// in the same order) it draws two more lines: what the request would have sent untrimmed
// (the estimate) and the trim threshold that applied.
func promptChart(events []store.EventInfo, recs []store.SavingsRecord) ui.LineChart {
	c := ui.LineChart{
		TestID: "chart-prompt-tokens", Title: "Prompt tokens per request, trims marked",
		Width: chartW, Height: chartH, XAxisY: chartBottom, PlotX0: chartLeft, PlotX1: chartRight, PlotY0: chartTop,
	}
	pts, marks, requests := promptRequests(events)
	last := max(requests, 1)
	for n := range marks {
		last = max(last, n)
	}
	xOf := func(n int) float64 {
		if last <= 1 {
			return (chartLeft + chartRight) / 2
		}
		return chartLeft + 8 + float64(n-1)/float64(last-1)*(chartRight-chartLeft-16)
	}
	var top int64
	for _, p := range pts {
		top = max(top, p.tokens)
	}
	peak := top // of what was sent
	// the newest records match the newest points (both are one per request with a prompt)
	n := min(len(pts), len(recs))
	lined, recs := pts[len(pts)-n:], recs[len(recs)-n:]
	for i := range recs {
		top = max(top, recs[i].UntrimmedPromptTokens(), recs[i].ThresholdTokens)
	}
	scale := niceCeil(float64(top))
	c.YTicks = yTicks(scale)
	yOf := func(v int64) float64 { return chartBottom - float64(v)/scale*(chartBottom-chartTop) }

	promptLine(&c, pts, xOf, yOf)
	if n > 1 {
		var un, th strings.Builder
		for i, p := range lined {
			if i > 0 {
				un.WriteByte(' ')
				th.WriteByte(' ')
			}
			x := strconv.FormatFloat(xOf(p.n), 'f', 1, 64)
			un.WriteString(x + "," + strconv.FormatFloat(yOf(recs[i].UntrimmedPromptTokens()), 'f', 1, 64))
			th.WriteString(x + "," + strconv.FormatFloat(yOf(recs[i].ThresholdTokens), 'f', 1, 64))
		}
		c.Untrimmed, c.Threshold = un.String(), th.String()
		c.Title = "Prompt tokens per request: sent, would have been sent untrimmed (estimate), threshold; trims marked"
	}
	nums := make([]int, 0, len(marks))
	for n := range marks {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	for _, n := range nums {
		c.Marks = append(c.Marks, ui.Mark{X: xOf(n), Title: strings.Join(marks[n], "; ")})
	}
	switch {
	case requests == 0:
		c.Empty = "no requests recorded"
	case len(pts) == 0:
		c.Empty = "the provider reported no token counts"
	}
	if requests > 0 {
		c.XLabels = append(c.XLabels, ui.XLabel{X: xOf(1), Label: "request 1", Anchor: "start"})
		if last > 1 {
			c.XLabels = append(c.XLabels, ui.XLabel{X: xOf(last), Label: "request " + strconv.Itoa(last), Anchor: "end"})
		}
	}
	c.Summary = fmt.Sprintf("%s, %d with token counts, peak %s; %s marked.",
		ui.Plural(int64(requests), "request", "requests"), len(pts),
		ui.Plural(peak, "prompt token", "prompt tokens"), ui.Plural(int64(len(marks)), "trim", "trims"))
	if n > 1 {
		last := recs[n-1]
		c.Summary += fmt.Sprintf(" Last request: %s sent, about %s untrimmed (estimate), threshold %s.",
			ui.Commas(last.SentPromptTokens()), ui.Commas(last.UntrimmedPromptTokens()), ui.Commas(last.ThresholdTokens))
	}
	return c
}

// promptPoint is one request of promptChart that reported its prompt tokens.
type promptPoint struct {
	n      int // request number, from 1
	tokens int64
	ev     store.EventInfo
}

// promptRequests walks events in order and numbers the requests (usage events) from 1: the
// points of those that reported prompt tokens, the trim marks per request number (a trim
// event at the next request, or request requests+1 when none follows; a new cut reported
// by the usage event itself when no trim event marked it) and the number of requests.
// It is a step of its own because it is the only part that reads events; the rest of
// promptChart is geometry.
func promptRequests(events []store.EventInfo) (pts []promptPoint, marks map[int][]string, requests int) {
	marks = map[int][]string{} // request number → what was cut
	var pending []string       // trims waiting for the next request
	for _, e := range events {
		switch e.Kind {
		case "trim":
			pending = append(pending, "trim at "+shortUTC(e.At)+": "+trimDetail(e))
		case "usage":
			requests++
			if len(pending) > 0 {
				marks[requests] = append(marks[requests], pending...)
				pending = nil
			}
			if e.Trimmed == 2 && len(marks[requests]) == 0 {
				marks[requests] = append(marks[requests], fmt.Sprintf("request %d at %s made a new cut", requests, shortUTC(e.At)))
			}
			if t := e.PromptTokens(); t >= 0 {
				pts = append(pts, promptPoint{requests, t, e})
			}
		}
	}
	if len(pending) > 0 { // trims after the last usage event: mark them at the end
		marks[requests+1] = append(marks[requests+1], pending...)
	}
	return pts, marks, requests
}

// promptLine sets c's polyline through pts (only when there are two or more) and, up to
// maxDots points, one titled dot per point. A step of its own because the line and its
// dots are drawn from the same positions in one pass.
func promptLine(c *ui.LineChart, pts []promptPoint, xOf func(int) float64, yOf func(int64) float64) {
	var b strings.Builder
	for i, p := range pts {
		if i > 0 {
			b.WriteByte(' ')
		}
		x, y := xOf(p.n), yOf(p.tokens)
		b.WriteString(strconv.FormatFloat(x, 'f', 1, 64) + "," + strconv.FormatFloat(y, 'f', 1, 64))
		if len(pts) <= maxDots {
			c.Dots = append(c.Dots, ui.Dot{X: x, Y: y, Title: fmt.Sprintf("request %d at %s: %s%s",
				p.n, shortUTC(p.ev.At), ui.Plural(p.tokens, "prompt token", "prompt tokens"), cutNote(p.ev.Trimmed))})
		}
	}
	if len(pts) > 1 {
		c.Points = b.String()
	}
}

// cutNote says what a usage event's trimmed value means.
func cutNote(trimmed int64) string {
	switch trimmed {
	case 0:
		return " (whole conversation)"
	case 1:
		return " (an earlier cut applied)"
	case 2:
		return " (a new cut)"
	}
	return ""
}
