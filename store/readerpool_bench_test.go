package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Many-sessions bench: 200 sessions of 300 rows (about 400 characters each, a tool result of
// 200 lines every tenth, the first third trimmed), the shape of web's BenchmarkPages200.
const (
	manySessions = 200
	manyRows     = 300
)

// seedMany writes the many-sessions store into dir with its own Root, closed at the end (no
// -wal left, as after a restart), and returns the session ids.
func seedMany(b *testing.B, dir string) []string {
	b.Helper()
	root, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	filler := strings.Repeat("lorem ipsum dolor sit amet, consectetur adipiscing elit ", 7)
	var sids []string
	for s := range manySessions {
		sid := fmt.Sprintf("bench-%03d", s)
		sids = append(sids, sid)
		d, err := root.Session(sid)
		if err != nil {
			b.Fatal(err)
		}
		ws := make([]RowWrite, 0, manyRows)
		prev := ""
		for i := range manyRows {
			role, kind, name := []string{"user", "assistant"}[i%2], "text", ""
			text := fmt.Sprintf("row %d of %s: %s value-%d-%d", i+1, sid, filler, s, i)
			if i%10 == 9 {
				role, kind, name = "tool", "tool_result", "Bash"
				text = strings.Repeat(fmt.Sprintf("output %d %d\n", s, i), 200)
			}
			fp := Fingerprint(prev, role, kind, name, text)
			thread := fp
			if len(ws) > 0 {
				thread = ws[0].Thread
			}
			ws = append(ws, RowWrite{Fingerprint: fp, Thread: thread, Role: role, Kind: kind, Name: name, Text: text, InContext: i >= manyRows/3})
			prev = fp
		}
		if _, err := d.SyncRows(ws, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	return sids
}

// BenchmarkSearchMany searches every session of the many-sessions store one after the other
// (ms per op = per 200 sessions): "cold-open-close" opens and closes a reader of each on a
// fresh Root; "open-*" opens a reader per session, searches and closes it, as a dashboard or
// MCP search does, after one round that opened them all (the pool, when there is one, holds
// them); "held-*" searches readers held open, the search alone. "-keys" is the KeysOnly
// search the dashboard runs per session.
//
// With SMARTER_COMPACT_BENCH_MANY_DIR set the store is seeded there once and reused (for
// profiling and for comparing builds on the same files).
func BenchmarkSearchMany(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "context")
	var sids []string
	if d := os.Getenv("SMARTER_COMPACT_BENCH_MANY_DIR"); d != "" {
		dir = d
		for s := range manySessions {
			sids = append(sids, fmt.Sprintf("bench-%03d", s))
		}
		if _, err := os.Stat(filepath.Join(dir, "sessions", sids[len(sids)-1]+".db")); err != nil {
			seedMany(b, dir)
		}
	} else {
		sids = seedMany(b, dir)
		// Files older than the pool's racy window, as a store's sessions mostly are.
		old := time.Now().Add(-time.Minute)
		for _, sid := range sids {
			if err := os.Chtimes(filepath.Join(dir, "sessions", sid+".db"), old, old); err != nil {
				b.Fatal(err)
			}
		}
	}
	ctx := context.Background()
	openClose := func(b *testing.B, root *Root) {
		for _, sid := range sids {
			rd, err := root.OpenReader(sid)
			if err != nil {
				b.Fatal(err)
			}
			_ = rd.Close()
		}
	}
	b.Run("cold-open-close", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			root, err := Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			openClose(b, root)
			b.StopTimer()
			_ = root.Close()
			b.StartTimer()
		}
	})
	root, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	openClose(b, root)
	out := false
	cases := []struct {
		name string
		o    SearchOptions
	}{
		{"words", SearchOptions{Query: "value-150-200", Limit: 10}},
		{"trimmed", SearchOptions{Query: "lorem", InContext: &out, Limit: 10}},
		{"trimmed-keys", SearchOptions{Query: "lorem", InContext: &out, Limit: 10, KeysOnly: true}},
		{"pattern", SearchOptions{Pattern: mustRegexp(b, `value-1[0-9]{2}-2[0-9]{2}`), Limit: 10, Budget: time.Minute}},
		{"pattern-keys", SearchOptions{Pattern: mustRegexp(b, `value-1[0-9]{2}-2[0-9]{2}`), Limit: 10, Budget: time.Minute, KeysOnly: true}},
	}
	b.Run("open-close", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			openClose(b, root)
		}
	})
	for _, c := range cases {
		b.Run("open-"+c.name, func(b *testing.B) {
			defer cpuPerOp(b)()
			for b.Loop() {
				for _, sid := range sids {
					rd, err := root.OpenReader(sid)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := rd.Search(ctx, c.o); err != nil {
						b.Fatal(err)
					}
					_ = rd.Close()
				}
			}
		})
	}
	var held []*Reader
	for _, sid := range sids {
		held = append(held, mustReader(b, root, sid))
	}
	for _, c := range cases {
		b.Run("held-"+c.name, func(b *testing.B) {
			defer cpuPerOp(b)()
			for b.Loop() {
				for _, rd := range held {
					if _, err := rd.Search(ctx, c.o); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// cpuPerOp reports the process CPU time (user + system) per op as "cpu-ms/op", which a loaded
// machine disturbs less than the wall time: defer cpuPerOp(b)() around the b.Loop.
func cpuPerOp(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	}
}
