package web

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/smarter-compact/smarter-compact/store"
)

// GET /ui/stats shows store.Stats: the calls per tool, those after a trim, the share of
// trimmed sessions searched, and one row per session (issue 17).
func TestRecallStatsPage(t *testing.T) {
	h := newHarness(t)
	trimAt := h.now.Add(-time.Hour)
	seedSession(t, h.root, "s-trimmed", "claude-code", "/w", textRows(4, "row %d"),
		store.Event{At: trimAt, Kind: "trim", Version: "proxy:0123456789ab", TokensBefore: i64p(100), TokensAfter: i64p(10), Dropped: i64p(2)})
	seedSession(t, h.root, "s-plain", "codex", "/x", textRows(2, "row %d"))
	lines := `{"at":"` + trimAt.Add(-time.Minute).Format(time.RFC3339) + `","tool":"smart_compact_search","hits":1,"session_ids":["s-trimmed"]}` + "\n" +
		`{"at":"` + trimAt.Add(time.Minute).Format(time.RFC3339) + `","tool":"smart_compact_search","hits":4,"session_ids":["s-trimmed"]}` + "\n" +
		`{"at":"` + trimAt.Add(2*time.Minute).Format(time.RFC3339) + `","tool":"smart_compact_sql","rows":7,"session_ids":["s-trimmed"]}` + "\n"
	if err := os.WriteFile(filepath.Join(h.root.Dir(), store.ToolCallsFile), []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	d := doc(t, h.get("/ui/stats"), http.StatusOK)
	checkCSPClean(t, d)
	if got := text(one(t, d, "stats-calls")); got != "3" {
		t.Errorf("calls %q, want 3", got)
	}
	if got := text(one(t, d, "stats-after-trim")); got != "2" {
		t.Errorf("after a trim %q, want 2", got)
	}
	if got := text(one(t, d, "stats-share")); got != "1 of 1 (100 %)" {
		t.Errorf("share %q", got)
	}
	if got := one(t, d, "stats-tool-smart_compact_search").Find("td").Map(func(_ int, s *goquery.Selection) string { return text(s) }); strings.Join(got, "|") != "smart_compact_search|2|5 hits" {
		t.Errorf("search row %q", got)
	}
	row := d.Find(`[data-testid="stats-session"][data-session="s-trimmed"]`)
	if got := text(row); !strings.Contains(got, "smart_compact_search 2 (5 hits), smart_compact_sql 1 (7 rows)") || !strings.Contains(got, "yes") {
		t.Errorf("session row %q", got)
	}
	if got := text(one(t, d, "nav-stats")); got != "Recall" {
		t.Errorf("nav %q", got)
	}
}
