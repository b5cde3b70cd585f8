package store

import (
	"database/sql"
	"reflect"
	"testing"
	"time"
)

func TestAddEvent(t *testing.T) {
	p := func(n int64) *int64 { return &n }
	r := newRoot(t)
	d := mustSession(t, r, "s")
	cols := "at, kind, version, location, error, tokens_before, tokens_after, dropped, model, thread_root, trimmed, input_tokens, cache_read_tokens, cache_creation_tokens, output_tokens, breakpoints, breakpoint_at"
	type row struct {
		At, Kind, Version                                     string
		Location, Error                                       sql.NullString
		TokensBefore, TokensAfter, Dropped                    sql.NullInt64
		Model, ThreadRoot                                     sql.NullString
		Trimmed, Input, CacheRead, CacheCreation, Output, Bps sql.NullInt64
		BreakpointAt                                          sql.NullString
	}
	cases := []struct {
		name string
		ev   Event
		want row
	}{
		{"trim", Event{At: t0, Kind: "trim", Version: "proxy:0123456789ab", TokensBefore: p(150000), TokensAfter: p(40000), Dropped: p(12)},
			row{At: "2026-10-29T17:00:00Z", Kind: "trim", Version: "proxy:0123456789ab", TokensBefore: num(150000), TokensAfter: num(40000), Dropped: num(12)}},
		{"fail_open", Event{At: t0, Kind: "fail_open", Version: "proxy:0123456789ab", Location: "trim.go:42", Error: "*json.SyntaxError"},
			row{At: "2026-10-29T17:00:00Z", Kind: "fail_open", Version: "proxy:0123456789ab", Location: str("trim.go:42"), Error: str("*json.SyntaxError")}},
		{"usage, all counts", Event{At: t0, Kind: "usage", Version: "v", Model: "claude-x", ThreadRoot: "ef4e", Trimmed: p(2), InputTokens: p(10),
			CacheReadTokens: p(0), CacheCreationTokens: p(30), OutputTokens: p(40), Breakpoints: p(2), BreakpointAt: "system,m-1"},
			row{At: "2026-10-29T17:00:00Z", Kind: "usage", Version: "v", Model: str("claude-x"), ThreadRoot: str("ef4e"), Trimmed: num(2), Input: num(10),
				CacheRead: num(0), CacheCreation: num(30), Output: num(40), Bps: num(2), BreakpointAt: str("system,m-1")}},
		{"usage, nothing reported", Event{At: t0, Kind: "usage", Version: "v", Model: "m", Trimmed: p(0)},
			row{At: "2026-10-29T17:00:00Z", Kind: "usage", Version: "v", Model: str("m"), Trimmed: num(0)}},
	}
	ro := otherConn(t, d.Path(), "mode=ro")
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := d.AddEvent(c.ev); err != nil {
				t.Fatal(err)
			}
			var g row
			if err := ro.QueryRow("SELECT "+cols+" FROM events WHERE id = ?", i+1).Scan(&g.At, &g.Kind, &g.Version, &g.Location, &g.Error,
				&g.TokensBefore, &g.TokensAfter, &g.Dropped, &g.Model, &g.ThreadRoot, &g.Trimmed, &g.Input, &g.CacheRead,
				&g.CacheCreation, &g.Output, &g.Bps, &g.BreakpointAt); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, c.want) {
				t.Errorf("\n got %+v\nwant %+v", g, c.want)
			}
		})
	}
	t.Run("zero time means now", func(t *testing.T) {
		before := time.Now().UTC().Truncate(time.Second)
		if err := d.AddEvent(Event{Kind: "trim", Version: "v"}); err != nil {
			t.Fatal(err)
		}
		var at string
		if err := ro.QueryRow("SELECT at FROM events ORDER BY id DESC LIMIT 1").Scan(&at); err != nil {
			t.Fatal(err)
		}
		got, err := time.Parse(time.RFC3339, at)
		if err != nil || got.Before(before) || got.After(time.Now().Add(time.Second)) {
			t.Errorf("at = %s (%v), want about now", at, err)
		}
	})
	t.Run("empty kind", func(t *testing.T) {
		if err := d.AddEvent(Event{Version: "v"}); err == nil {
			t.Error("an event without kind was accepted")
		}
	})
}
