package mcp

import (
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/storetest"
)

// writeEvents stores one row and events in sessions/<sid>.db through the writer.
func (r *rig) writeEvents(t *testing.T, sid string, events ...store.Event) {
	t.Helper()
	r.writeSession(t, sid, row{role: "user", kind: "text", text: "hello " + sid})
	db, err := r.writer.Session(sid)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if err := db.AddEvent(e); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStatusTool(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	p := func(n int64) *int64 { return &n }
	ago := func(d time.Duration) time.Time { return fixedNow.Add(-d) }
	r.writeEvents(t, "s1",
		store.Event{At: ago(time.Hour), Kind: "trim", Version: "proxy:111111111111", TokensBefore: p(120000), TokensAfter: p(20000), Dropped: p(30)},
		store.Event{At: ago(100 * time.Hour), Kind: "trim", Version: "proxy:000000000000", TokensBefore: p(500000), TokensAfter: p(1), Dropped: p(7)},
		store.Event{At: ago(time.Hour), Kind: "usage", Version: "proxy:111111111111", Trimmed: p(2), InputTokens: p(50),
			CacheReadTokens: p(0), CacheCreationTokens: p(9000), OutputTokens: p(10), Breakpoints: p(2), BreakpointAt: "system,m-1"},
	)
	r.writeEvents(t, "s2",
		store.Event{At: ago(30 * time.Minute), Kind: "usage", Version: "proxy:222222222222", Trimmed: p(1), InputTokens: p(50),
			CacheReadTokens: p(9000), CacheCreationTokens: p(1000), OutputTokens: p(10), Breakpoints: p(2), BreakpointAt: "system,m-1"},
		store.Event{At: ago(20 * time.Minute), Kind: "fail_open", Version: "proxy:222222222222", Location: "rewrite.go:99", Error: "*fmt.wrapError"},
	)
	c := httpClient(t, r.srv)

	var st storetest.StatusJSON
	callJSON(t, c, ToolStatus, nil, &st)
	u := st.Usage // hitRatio: 9000 / (9000 + 10000 + 100)
	if st.Hours != 24 || st.Sessions != 2 || st.Trims != 1 || st.TokensSaved != 100000 || st.MessagesDropped != 30 ||
		st.FailOpens != 1 || len(st.LastErrors) != 1 || st.LastErrors[0] != (store.FailOpen{At: "2026-10-29T16:40:00Z", Session: "s2", Location: "rewrite.go:99", Error: "*fmt.wrapError"}) ||
		st.Latest["proxy"] != "proxy:222222222222" || st.CheckoutProxyVersion != nil || st.ProxyStale != nil || !strings.Contains(st.Note, "no proxy/ checkout") {
		t.Errorf("status %+v", st)
	}
	if u.Requests != 2 || u.WithCacheCounts != 2 || u.CacheReadTokens != 9000 || u.HitRatio == nil || *u.HitRatio != 0.4712 ||
		u.NewCut["cacheCreationTokens"] != 9000.0 || u.Other["average"] != 1000.0 ||
		u.Breakpoints["2"] != 2 || u.BreakpointLayouts["system,m-1"] != 2 {
		t.Errorf("usage %+v", u)
	}

	// A wider window takes in the old trim.
	callJSON(t, c, ToolStatus, map[string]any{"hours": 720}, &st)
	if st.Hours != 720 || st.Trims != 2 || st.TokensSaved != 100000+499999 || st.Latest["proxy"] != "proxy:222222222222" {
		t.Errorf("720 h: %+v", st)
	}

	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"hours": 0}, "hours must be an integer from 1 to 720, not 0"},
		{map[string]any{"hours": 721}, "hours must be an integer from 1 to 720, not 721"},
		{map[string]any{"hours": 1.5}, "hours must be an integer from 1 to 720"},
		{map[string]any{"hours": "24"}, `hours must be an integer from 1 to 720, not the string "24"`},
		{map[string]any{"window": 3}, `context_status does not take "window": its arguments are hours`},
	} {
		if msg := callError(t, c, ToolStatus, tc.args); !strings.Contains(msg, tc.want) {
			t.Errorf("%v: %q, want %q", tc.args, msg, tc.want)
		}
	}

	lines := telemetry(t, r.dir)
	if len(lines) != 7 {
		t.Fatalf("tool-calls.jsonl has %d lines, want 7: %v", len(lines), lines)
	}
	if l := lines[0]; l["tool"] != ToolStatus || l["sessions"] != 2.0 || l["error"] != nil || l["at"] != "2026-10-29T17:00:00Z" {
		t.Errorf("first line %v", l)
	}
	if l := lines[2]; l["tool"] != ToolStatus || l["error"] != true {
		t.Errorf("error line %v", l)
	}
}

func TestStatusToolEmptyStore(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	c := httpClient(t, r.srv)
	text, isErr := call(t, c, ToolStatus, map[string]any{"hours": 1})
	if isErr {
		t.Fatalf("isError: %s", text)
	}
	for _, s := range []string{`"sessions":0`, `"trims":0`, `"lastErrors":[]`, `"hitRatio":null`, `"proxy_stale":null`} {
		if !strings.Contains(text, s) {
			t.Errorf("answer lacks %s: %s", s, text)
		}
	}
}
