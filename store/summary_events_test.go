package store

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// statusNow is the clock of the status tests; the v2 fixture's trim (2026-01-02T03:04:05Z)
// falls inside its 24-hour window.
var statusNow = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)

// writeStatusSession stores one row (written at statusNow) and events in sessions/<sid>.db
// through the writer.
func writeStatusSession(t *testing.T, r *Root, sid string, events ...Event) {
	t.Helper()
	writeSessionAt(t, r, sid, statusNow, []RowWrite{dashRow("hello from "+sid, true)}, events...)
}

// statusFixture is a root with three sessions written by the writer (events inside and
// outside the window), a version 1 and a version 2 database, an empty database, a newer
// schema and a file that is not a database.
func statusFixture(t *testing.T) *Root {
	t.Helper()
	p := func(n int64) *int64 { return &n }
	ago := func(d time.Duration) time.Time { return statusNow.Add(-d) }
	const pa, pb = "proxy:aaaaaaaaaaaa", "proxy:bbbbbbbbbbbb"
	r := newRoot(t)
	writeStatusSession(t, r, "a",
		Event{At: ago(time.Hour), Kind: "trim", Version: pa, TokensBefore: p(100000), TokensAfter: p(30000), Dropped: p(20)},
		Event{At: ago(30 * time.Hour), Kind: "trim", Version: pa, TokensBefore: p(999999), TokensAfter: p(1), Dropped: p(999)},
		Event{At: ago(time.Hour), Kind: "usage", Version: pa, Model: "claude-x", Trimmed: p(2), InputTokens: p(100),
			CacheReadTokens: p(0), CacheCreationTokens: p(5000), OutputTokens: p(50), Breakpoints: p(2), BreakpointAt: "system,m-1"},
		Event{At: ago(50 * time.Minute), Kind: "usage", Version: pa, Model: "claude-x", Trimmed: p(1), InputTokens: p(10),
			CacheReadTokens: p(4000), CacheCreationTokens: p(1000), OutputTokens: p(20), Breakpoints: p(2), BreakpointAt: "system,m-1"},
		Event{At: ago(2 * time.Hour), Kind: "fail_open", Version: pa, Location: "rewrite.go:10", Error: "*json.SyntaxError"},
	)
	b := []Event{
		{At: ago(10 * time.Minute), Kind: "usage", Version: pb, Trimmed: p(0), InputTokens: p(5), CacheReadTokens: p(8000),
			CacheCreationTokens: p(0), OutputTokens: p(30), Breakpoints: p(3), BreakpointAt: "tools,system,m-1"},
		{At: ago(5 * time.Minute), Kind: "usage", Version: pb, Trimmed: p(0), InputTokens: p(200), CacheReadTokens: p(100), OutputTokens: p(10)},
		{At: ago(4 * time.Minute), Kind: "usage", Version: "opencode:2.2.1", Trimmed: p(0)},
	}
	for h := 3; h <= 7; h++ {
		b = append(b, Event{At: ago(time.Duration(h) * time.Hour), Kind: "fail_open", Version: pb,
			Location: "usage.go:" + string(rune('0'+h)), Error: "*errors.errorString"})
	}
	writeStatusSession(t, r, "b", b...)
	var c []Event
	for _, at := range []string{"tools", "tools", "tools", "m-3", "m-2", "m-1"} {
		c = append(c, Event{At: ago(time.Minute), Kind: "usage", Version: pb, BreakpointAt: at})
	}
	writeStatusSession(t, r, "c", c...)

	sessions := filepath.Join(r.Dir(), "sessions")
	buildFixture(t, filepath.Join(sessions, "old1.db"), "schema_v1.sql")
	buildFixture(t, filepath.Join(sessions, "old2.db"), "schema_v2.sql")
	buildFixtureSQL(t, filepath.Join(sessions, "future.db"), "CREATE TABLE x (a); PRAGMA user_version = 9;")
	for name, data := range map[string]string{"empty.db": "", "junk.db": "this is not a database, just text that is long enough", "notes.txt": "x"} {
		if err := os.WriteFile(filepath.Join(sessions, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func TestStatus(t *testing.T) {
	r := statusFixture(t)
	st, err := r.Status(context.Background(), statusNow, 24)
	if err != nil {
		t.Fatal(err)
	}
	f := func(v float64) *float64 { return &v }
	round := func(v float64) *float64 { return f(math.Round(v*1e4) / 1e4) }
	want := Status{
		Hours: 24, Since: "2026-01-01T12:00:00Z",
		Sessions: 6, Skipped: 2,
		SkippedSessions: []SkippedSession{
			{Session: "future", Reason: "written by a newer smarter-compact (newer schema)"},
			{Session: "junk", Reason: "not a readable SQLite database"},
		},
		Trims:           2,                                   // a's within the window + the v2 fixture's
		TokensSaved:     (100000 - 30000) + (150000 - 40000), // the 30-hour-old trim is out
		MessagesDropped: 20 + 12,
		FailOpens:       6,
		LastErrors: []FailOpen{
			{At: "2026-01-02T10:00:00Z", Session: "a", Location: "rewrite.go:10", Error: "*json.SyntaxError"},
			{At: "2026-01-02T09:00:00Z", Session: "b", Location: "usage.go:3", Error: "*errors.errorString"},
			{At: "2026-01-02T08:00:00Z", Session: "b", Location: "usage.go:4", Error: "*errors.errorString"},
			{At: "2026-01-02T07:00:00Z", Session: "b", Location: "usage.go:5", Error: "*errors.errorString"},
			{At: "2026-01-02T06:00:00Z", Session: "b", Location: "usage.go:6", Error: "*errors.errorString"},
		},
		Latest: map[string]string{"proxy": "proxy:bbbbbbbbbbbb", "opencode": "opencode:2.2.1"},
		Note:   statusCheckoutNote,
		Usage: UsageStatus{
			Requests:        2 + 3 + 6,
			WithCacheCounts: 4, // b's all-NULL request and c's have none
			InputTokens:     100 + 10 + 5 + 200,
			CacheReadTokens: 4000 + 8000 + 100,
			CacheCreation:   5000 + 1000,
			OutputTokens:    50 + 20 + 30 + 10,
			HitRatio:        round(12100.0 / (12100 + 6000 + 315)),
			NewCut:          CacheCreation{Requests: 1, CacheCreationTokens: 5000, Average: f(5000)},
			Other:           CacheCreation{Requests: 2, CacheCreationTokens: 1000, Average: f(500)},
			Breakpoints:     map[string]int{"2": 2, "3": 1},
			// tools 3, system,m-1 2, then the four single layouts by name: the last is left out.
			BreakpointLayouts:        map[string]int{"tools": 3, "system,m-1": 2, "m-1": 1, "m-2": 1, "m-3": 1},
			BreakpointLayoutsOmitted: 1,
		},
	}
	if !reflect.DeepEqual(st, want) {
		g, _ := json.MarshalIndent(st, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Fatalf("status\n%s\nwant\n%s", g, w)
	}

	t.Run("wider window", func(t *testing.T) {
		st, err := r.Status(context.Background(), statusNow, 48)
		if err != nil {
			t.Fatal(err)
		}
		// a's older trim dropped 999 and its newer one 20: a session counts its largest
		// (a trim's count includes earlier cuts), not the sum
		if st.Trims != 3 || st.TokensSaved != want.TokensSaved+999998 || st.MessagesDropped != 999+12 {
			t.Errorf("48 h: trims %d, saved %d, dropped %d", st.Trims, st.TokensSaved, st.MessagesDropped)
		}
	})
	t.Run("narrow window", func(t *testing.T) {
		st, err := r.Status(context.Background(), statusNow, 1)
		if err != nil {
			t.Fatal(err)
		}
		// a's trim and first usage are exactly one hour old (at >= since); the v2 trim and
		// every fail-open are older.
		if st.Trims != 1 || st.FailOpens != 0 || len(st.LastErrors) != 0 || st.Usage.Requests != 11 {
			t.Errorf("1 h: %+v", st)
		}
	})
	t.Run("read only", func(t *testing.T) {
		for _, name := range []string{"old1.db-wal", "old1.db-shm", "old2.db-wal", "future.db-shm"} {
			if _, err := os.Stat(filepath.Join(r.Dir(), "sessions", name)); err == nil {
				t.Errorf("status created %s", name)
			}
		}
		var v int
		db := otherConn(t, filepath.Join(r.Dir(), "sessions", "old2.db"), "mode=ro")
		if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != 2 {
			t.Errorf("old2.db user_version %d, %v: status must not migrate", v, err)
		}
	})
}

func TestStatusEmpty(t *testing.T) {
	r := newRoot(t)
	st, err := r.Status(context.Background(), statusNow, StatusDefaultHours)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"trims":0`, `"lastErrors":[]`, `"latest":{}`, `"checkout_proxy_version":null`, `"proxy_stale":null`,
		`"hitRatio":null`, `"newCut":{"requests":0,"cacheCreationTokens":0,"average":null}`, `"breakpoints":{}`, `"breakpointLayouts":{}`} {
		if !strings.Contains(string(b), s) {
			t.Errorf("empty status lacks %s:\n%s", s, b)
		}
	}
}

func TestStatusHours(t *testing.T) {
	r := newRoot(t)
	for _, h := range []int{0, -1, 721} {
		if _, err := r.Status(context.Background(), statusNow, h); err == nil || !strings.Contains(err.Error(), "1 to 720") {
			t.Errorf("hours %d: err %v", h, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	writeStatusSession(t, r, "a")
	if _, err := r.Status(ctx, statusNow, 24); err == nil {
		t.Error("cancelled ctx: no error")
	}
}

// TestStatusCached runs the status fixture through the cache: files settled, every window
// read twice, and a cached session that turned to junk under the same stamp still counted.
func TestStatusCached(t *testing.T) {
	skipOnWindows(t, "a file SQLite holds open cannot be deleted, replaced or overwritten here (sharing violation, access denied, user-mapped section): retry_test.go covers what the store does about it")
	r := statusFixture(t)
	ctx := context.Background()
	ageSessions(t, r, time.Now().Add(-time.Hour))
	first, err := r.Status(ctx, statusNow, 24)
	if err != nil {
		t.Fatal(err)
	}
	if first.Trims != 2 || first.Skipped != 2 || first.Usage.Requests != 11 {
		t.Fatalf("24 h: %+v", first)
	}
	second, err := r.Status(ctx, statusNow.Add(time.Minute), 24)
	if err != nil {
		t.Fatal(err)
	}
	second.Since = first.Since
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("cached status differs:\n%+v\n%+v", first, second)
	}
	// a wider window starts before the cached one: read again
	wide, err := r.Status(ctx, statusNow, 48)
	if err != nil {
		t.Fatal(err)
	}
	if wide.Trims != 3 || wide.MessagesDropped != 999+12 {
		t.Fatalf("48 h after 24 h: trims %d, dropped %d", wide.Trims, wide.MessagesDropped)
	}
	// a narrower one filters what is cached
	narrow, err := r.Status(ctx, statusNow, 1)
	if err != nil {
		t.Fatal(err)
	}
	if narrow.Trims != 1 || narrow.FailOpens != 0 || narrow.Usage.Requests != 11 {
		t.Fatalf("1 h: %+v", narrow)
	}

	// "a" writes a fail-open: its WAL changes, so the next status reads it
	writeStatusSession(t, r, "a", Event{At: statusNow.Add(-time.Minute), Kind: "fail_open", Version: "proxy:aaaaaaaaaaaa", Location: "x.go:1", Error: "E"})
	if st, err := r.Status(ctx, statusNow, 1); err != nil || st.FailOpens != 1 || st.LastErrors[0].Location != "x.go:1" {
		t.Fatalf("after a new event: %+v, %v", st, err)
	}

	// old2 (no writer) turns to junk under its old stamp: still counted from the cache
	p := filepath.Join(r.Dir(), "sessions", "old2.db")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, make([]byte, fi.Size()), 0o600); err != nil {
		t.Fatal(err)
	}
	age(t, p, fi.ModTime())
	if st, err := r.Status(ctx, statusNow, 24); err != nil || st.Skipped != 2 || st.Trims != 2 {
		t.Fatalf("junk under a cached stamp: skipped %d, trims %d, %v", st.Skipped, st.Trims, err)
	}
	age(t, p, fi.ModTime().Add(time.Second))
	if st, err := r.Status(ctx, statusNow, 24); err != nil || st.Skipped != 3 || st.Trims != 1 {
		t.Fatalf("junk with a new mtime: skipped %d, trims %d, %v", st.Skipped, st.Trims, err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Status(ctx, statusNow, 24); err != nil {
		t.Fatal(err)
	}
	if _, events := r.dash.holds("old2"); events {
		t.Error("the deleted session's events stay cached")
	}
}
