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
	// stored is a session with 400 rows stored, and those rows.
	stored := func(b *testing.B) (*DB, []RowWrite) {
		b.Helper()
		d := mustSession(b, newRoot(b), "bench")
		rows := benchRows(nil, 400)
		if _, err := d.SyncRows(rows, time.Now()); err != nil {
			b.Fatal(err)
		}
		return d, rows
	}
	b.Run("warm_400_known_2_new", func(b *testing.B) {
		d, rows := stored(b)
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
		d, rows := stored(b)
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

// toolStepRows extends rows by n tool steps shaped like the proxy's request-path benchmark
// conversation (fakeupstream.ClaudeCodeConvo): a tool_use row and a tool_result of 30 lines
// (about 1 KB).
func toolStepRows(rows []RowWrite, n int) []RowWrite {
	prev, thread := "", ""
	if len(rows) > 0 {
		prev, thread = rows[len(rows)-1].Fingerprint, rows[0].Thread
	}
	add := func(role, kind, name, text string) {
		fp := Fingerprint(prev, role, kind, name, text)
		if thread == "" {
			thread = fp
		}
		rows = append(rows, RowWrite{Fingerprint: fp, Thread: thread, Role: role, Kind: kind, Name: name, Text: text, InContext: true})
		prev = fp
	}
	for range n {
		s := len(rows)
		add("assistant", "tool_use", "Bash", fmt.Sprintf(`{"command":"go test ./parser -run Case%d","description":"Run the test"}`, s))
		add("tool", "tool_result", "Bash", strings.Repeat(fmt.Sprintf("parser_test.go:%d: ok value=%d\n", s, s*7), 30))
	}
	return rows
}

// BenchmarkSyncRowsCut: the writes of a request that makes a new cut (contract: Rows): a
// session of steps tool steps (two rows each) stored, then one call that carries them all
// with every row after the first two out of context (named by the last row as the cut
// row) and one new step. 1000 steps is about the 400k-token request of the bench's overhead
// run; 300 about its 120k one. The session is built again, untimed, for each op.
func BenchmarkSyncRowsCut(b *testing.B) {
	for _, steps := range []int{300, 1000} {
		b.Run(fmt.Sprintf("%d_steps", steps), func(b *testing.B) {
			r := newRoot(b)
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				d := mustSession(b, r, fmt.Sprintf("bench-%d", i))
				rows := toolStepRows([]RowWrite{{Fingerprint: fmt.Sprintf("first-%d", i), Thread: "t", Role: "user", Kind: "text", Text: "Fix the parser.", InContext: true}}, steps)
				if _, err := d.SyncRows(rows, time.Now()); err != nil {
					b.Fatal(err)
				}
				rows = toolStepRows(rows, 1)
				cut := rows[len(rows)-1].Fingerprint
				for k := 2; k < len(rows)-2; k++ {
					rows[k].InContext, rows[k].CutFingerprint, rows[k].TextGone = false, cut, true
				}
				c0 := cpuTime()
				b.StartTimer()
				res, err := d.SyncRows(rows, time.Now())
				b.StopTimer()
				cpu += cpuTime() - c0
				if err != nil || res.Inserted != 2 || res.Updated != len(rows)-4 {
					b.Fatal(res, err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
