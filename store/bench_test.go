package store

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// benchRows extends rows by n chained rows of a few lines each, alternating user and assistant.
func benchRows(rows []RowWrite, n int) []RowWrite {
	prev := ""
	if len(rows) > 0 {
		prev = rows[len(rows)-1].Fingerprint
	}
	for i := 0; i < n; i++ {
		k := len(rows)
		role, kind, name := "user", "text", ""
		if k%2 == 1 {
			role, kind, name = "assistant", "tool_use", "Bash"
		}
		text := fmt.Sprintf("row %d\n%s\nend of row %d", k, strings.Repeat("some words of a message ", 8), k)
		fp := Fingerprint(prev, role, kind, name, text)
		thread := fp
		if k > 0 {
			thread = rows[0].Thread
		}
		rows = append(rows, RowWrite{Fingerprint: fp, Thread: thread, Role: role, Kind: kind, Name: name, Text: text, InContext: true})
		prev = fp
	}
	return rows
}

// BenchmarkSyncRows: warm is the common request (400 known rows, 2 new ones, one commit);
// noop is a resent request (nothing written); cold stores 400 new rows in one transaction.
func BenchmarkSyncRows(b *testing.B) {
	b.Run("warm_400_known_2_new", func(b *testing.B) {
		r := newRoot(b)
		d := mustSession(b, r, "bench")
		rows := benchRows(nil, 400)
		if _, err := d.SyncRows(rows, time.Now()); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		defer cpuPerOp(b)()
		for b.Loop() {
			rows = benchRows(rows, 2)
			res, err := d.SyncRows(rows[len(rows)-402:], time.Now())
			if err != nil || res.Inserted != 2 {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("noop_400_known", func(b *testing.B) {
		r := newRoot(b)
		d := mustSession(b, r, "bench")
		rows := benchRows(nil, 400)
		if _, err := d.SyncRows(rows, time.Now()); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if res, err := d.SyncRows(rows, time.Now()); err != nil || res != (SyncResult{}) {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("cold_400_new", func(b *testing.B) {
		r := newRoot(b)
		d := mustSession(b, r, "bench")
		var rows []RowWrite
		for b.Loop() {
			rows = benchRows(rows, 400)
			res, err := d.SyncRows(rows[len(rows)-400:], time.Now())
			if err != nil || res.Inserted != 400 {
				b.Fatal(res, err)
			}
		}
	})
}
