package web

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/smarter-compact/smarter-compact/store"
)

// Bench store: 200 sessions of 300 rows (about 400 characters each, a tool result in every
// tenth with its blob, the first third trimmed) and 60 events (usage, a trim every tenth
// request, a fail-open now and then) in the last day, as a busy week of agents leaves it.
const (
	benchSessions = 200
	benchRows     = 300
	benchEvents   = 60
)

// seedBench writes the bench store into dir with its own Root, closed at the end, so the
// benchmark's Root starts as a freshly started service would.
func seedBench(b *testing.B, dir string) {
	b.Helper()
	root, err := store.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	now := time.Now().UTC()
	filler := strings.Repeat("lorem ipsum dolor sit amet, consectetur adipiscing elit ", 7)
	for s := range benchSessions {
		sid := fmt.Sprintf("bench-%03d", s)
		rows := make([]rowSpec, benchRows)
		for i := range rows {
			r := rowSpec{role: []string{"user", "assistant"}[i%2], kind: "text", in: i >= benchRows/3, cutAt: -1,
				text: fmt.Sprintf("row %d of %s: %s value-%d-%d", i+1, sid, filler, s, i)}
			if i%10 == 9 {
				r.role, r.kind, r.name, r.blob = "tool", "tool_result", "Bash", true
				r.text = strings.Repeat(fmt.Sprintf("output %d %d\n", s, i), 200)
			}
			if !r.in {
				r.cutAt = benchRows / 3
			}
			rows[i] = r
		}
		var events []store.Event
		for e := range benchEvents {
			at := now.Add(-time.Duration(benchEvents-e) * time.Minute)
			switch {
			case e%10 == 5:
				events = append(events, store.Event{At: at, Kind: "trim", TokensBefore: i64p(150000), TokensAfter: i64p(70000), Dropped: i64p(40)})
			case e%25 == 7:
				events = append(events, store.Event{At: at, Kind: "fail_open", Location: "proxy/rewrite.go:1", Error: "IndexError"})
			default:
				events = append(events, store.Event{At: at, Kind: "usage", Model: "claude-x", Trimmed: i64p(int64(e % 3)),
					InputTokens: i64p(200), CacheReadTokens: i64p(int64(60000 + 500*e)), CacheCreationTokens: i64p(1500), OutputTokens: i64p(300)})
			}
		}
		agent := []string{"claude-code", "codex", "opencode"}[s%3]
		seedSession(b, root, sid, agent, "/home/dev/project-"+fmt.Sprint(s%17), rows, events...)
	}
}

// BenchmarkPages200 loads each page against a store of 200 sessions (target: under 100 ms a
// page). "first" is the overview of a service that just started (every store cache cold);
// the others are loads with the caches as a running service has them.
func BenchmarkPages200(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "context")
	seedBench(b, dir)
	root, err := store.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	now := time.Now().UTC()
	ctl := newFakeControl(now)
	newHandler := func(root *store.Root) (http.Handler, *Server) {
		srv := New(Options{Root: root, Control: ctl, APIToken: testToken, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }})
		r := chi.NewRouter()
		srv.Mount(r)
		return r, srv
	}
	h, srv := newHandler(root)
	get := func(b *testing.B, h http.Handler, path string, hx bool) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "http://"+testHost+path, nil)
		if hx {
			req.Header.Set("HX-Request", "true")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 && w.Code != 204 {
			b.Fatalf("%s: %d %.300s", path, w.Code, w.Body)
		}
		return w
	}
	b.Run("overview-first", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			cold, err := store.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			ch, _ := newHandler(cold)
			b.StartTimer()
			get(b, ch, "/", false)
			b.StopTimer()
			cold.Close()
			b.StartTimer()
		}
	})
	live := ""
	for _, c := range []struct {
		name, path string
		hx         bool
	}{
		{"overview", "/", false},
		{"live-unchanged", "", true},
		{"live-changed", "/ui/live?rev=0", true},
		{"sessions", "/ui/sessions", false},
		{"sessions-sorted", "/ui/sessions?sort=size&dir=asc&q=project-1", true},
		{"session", "/ui/sessions/bench-100", false},
		{"session-page2", "/ui/sessions/bench-100?after=200", false},
		{"search-words", "/ui/search?q=value-150-200", false},
		{"search-words-typing", "/ui/search?q=value-150-200", true},
		{"search-trimmed", "/ui/search?q=lorem&in_context=false&all=1", true},
		{"search-trimmed-typing", "/ui/search?q=lorem&in_context=false", true},
		{"search-pattern", "/ui/search?pattern=" + "value-1[0-9]{2}-2[0-9]{2}", false},
		{"search-pattern-typing", "/ui/search?pattern=" + "value-1[0-9]{2}-2[0-9]{2}", true},
	} {
		get(b, h, "/", false) // warm the store's caches
		if live == "" {
			live = fmt.Sprintf("/ui/live?rev=%d&data=", ctl.State().Revision)
			stamp := srv.dataStamp(b.Context())
			live += stamp
		}
		path := c.path
		if path == "" {
			path = live
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				get(b, h, path, c.hx)
			}
		})
	}
}
