package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/smarter-compact/smarter-compact/store"
)

// seedSavings gives session sid three usage events and their savings records: a whole
// request, a new cut and a request after it, on claude-sonnet-4-5 ($3 / $0.30 / $3.75 / $15).
func seedSavings(t *testing.T, h *harness, sid string) {
	t.Helper()
	at := h.now.Add(-time.Minute)
	i64 := func(n int64) *int64 { return &n }
	var events []store.Event
	recs := []store.SavingsRecord{
		{InputTokens: 10, CacheCreationTokens: 100_000, OutputTokens: 1000, UntrimmedInputTokens: 10, UntrimmedCacheCreationTokens: 100_000},
		{Trimmed: 2, InputTokens: 10, CacheReadTokens: 5000, CacheCreationTokens: 30_000, OutputTokens: 1000, RemovedTokens: 90_000,
			UntrimmedInputTokens: 10, UntrimmedCacheReadTokens: 100_010, UntrimmedCacheCreationTokens: 24_990},
		{Trimmed: 1, InputTokens: 10, CacheReadTokens: 35_000, CacheCreationTokens: 1000, OutputTokens: 1000, RemovedTokens: 90_000,
			UntrimmedInputTokens: 36, UntrimmedCacheReadTokens: 122_500, UntrimmedCacheCreationTokens: 3474},
	}
	for i := range recs {
		r := &recs[i]
		r.At, r.Model, r.ThresholdTokens = at.Format(time.RFC3339), "claude-sonnet-4-5", 120_000
		events = append(events, store.Event{At: at, Kind: "usage", Version: "proxy:test", Model: r.Model, Trimmed: i64(r.Trimmed),
			InputTokens: i64(r.InputTokens), CacheReadTokens: i64(r.CacheReadTokens), CacheCreationTokens: i64(r.CacheCreationTokens), OutputTokens: i64(r.OutputTokens)})
	}
	seedSession(t, h.root, sid, "claude-code", "/home/dev/save", textRows(2, "s %d"), events...)
	for _, r := range recs {
		if err := h.root.AppendSavings(sid, r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOverviewShowsSavings(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	seedSavings(t, h, "ses-save")
	// by hand: cost = (30·3 + 40000·0.30 + 131000·3.75 + 3000·15) / 1e6
	//   untrimmed = (56·3 + 222510·0.30 + 128464·3.75 + 3000·15) / 1e6
	cost := (30*3 + 40000*0.30 + 131000*3.75 + 3000*15) / 1e6
	untrimmed := (56*3 + 222510*0.30 + 128464*3.75 + 3000*15) / 1e6
	d := doc(t, h.get("/"), http.StatusOK)
	if got := d.Find(testID("savings-today-cost")).AttrOr("data-usd", ""); got != exact(cost) {
		t.Errorf("today's cost %s, want %s", got, exact(cost))
	}
	if got := d.Find(testID("savings-today-untrimmed")).AttrOr("data-usd", ""); got != exact(untrimmed) {
		t.Errorf("today's untrimmed cost %s, want %s", got, exact(untrimmed))
	}
	if got, want := strings.TrimSpace(d.Find(testID("savings-today-saved")).Text()), USD(untrimmed-cost); got != want {
		t.Errorf("today saved %q, want %q", got, want)
	}
	if got := strings.TrimSpace(d.Find(testID("savings-today-percent")).Text()); !strings.HasSuffix(got, "\u00a0%") {
		t.Errorf("today's percent %q", got)
	}
	if d.Find(testID("savings-session")).Length() != 1 || d.Find(testID("savings-agent")).Find("td").Eq(1).Text() != "claude-code" {
		t.Errorf("the week table lacks the session or the agent:\n%s", outer(d.Find(testID("savings"))))
	}

	var body struct {
		Savings struct {
			Today struct {
				Cost, Saved float64
				Percent     *float64
			}
		}
	}
	w := h.api("GET", "/api/status", "")
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("/api/status: %v: %s", err, w.Body)
	}
	if exact(body.Savings.Today.Cost) != exact(cost) || body.Savings.Today.Percent == nil {
		t.Errorf("/api/status savings.today = %+v, want cost %v", body.Savings.Today, cost)
	}
}

func TestSessionChartHasThreeLines(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	seedSavings(t, h, "ses-save")
	d := doc(t, h.get("/ui/sessions/ses-save"), http.StatusOK)
	for _, id := range []string{"line-sent", "line-untrimmed", "line-threshold"} {
		pts := strings.Fields(d.Find(testID(id)).AttrOr("points", ""))
		if len(pts) != 3 {
			t.Errorf("%s has %d points, want 3 (one per request)", id, len(pts))
		}
	}
	if fact := d.Find("dd").FilterFunction(func(_ int, sel *goquery.Selection) bool {
		return strings.Contains(sel.Prev().Text(), "Saved (estimate)")
	}); !strings.Contains(fact.Text(), "3 requests") {
		t.Errorf("the session facts lack the savings line: %q", fact.Text())
	}
	// the threshold is flat, and above the untrimmed line's point for the first request
	th := strings.Fields(d.Find(testID("line-threshold")).AttrOr("points", ""))
	if len(th) == 3 && (strings.Split(th[0], ",")[1] != strings.Split(th[2], ",")[1]) {
		t.Errorf("threshold line not flat: %v", th)
	}
}
