package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

// The store at scale, through the store package directly (no proxy, no HTTP): many sessions
// of a few hundred rows, and one session of many rows.

type scaleCase struct {
	Label       string // "1000 sessions × 200 rows", "1M rows"
	Sessions    int
	Rows        int // total
	InsertRowsS float64
	SearchP50   float64 // ms, a words query (FTS5), reader opened per call as the MCP tool does
	SearchP99   float64
	PatternP50  float64 // ms, a regular expression (scan under the 1 s budget)
	PatternP99  float64
	PatternCut  int     // pattern searches stopped by the budget
	Searches    int     // of each kind
	SweepMS     float64 // one retention pass
	SweepNote   string
	BytesPerRow float64
}

type scalePlan struct {
	Sessions       []int
	RowsPerSession int
	Rows           []int
	Searches       int
	Seed           uint64
}

// scaleRowText is row i of a conversation in threes: a user text (one line), an assistant
// tool_use (one line of JSON), a tool_result of four log lines; about 200 bytes and two lines a
// row on average. Every request id is unique, so a search for one finds one row.
func scaleRowText(r *rand.Rand, i int) string {
	svc := services[r.IntN(len(services))]
	switch i % 3 {
	case 0:
		return fmt.Sprintf("Check why request r-%08x-0 from %s failed and fix the handler.", i+2, svc)
	case 1:
		return fmt.Sprintf(`{"command":"grep -n 'r-%08x' logs/%s.log","description":"Find the request in the %s log"}`, i+1, svc, svc)
	}
	var b strings.Builder
	for l := 0; l < 4; l++ {
		fmt.Fprintf(&b, "2026-10-30T09:%02d:%02d.%03dZ %s %s req=r-%08x-%d user=u-%05d latency_ms=%d msg=\"%s\"\n",
			(i/60)%60, i%60, r.IntN(1000), []string{"INFO", "WARN", "ERROR"}[r.IntN(3)], svc,
			i, l, r.IntN(100000), r.IntN(3000), messages[r.IntN(len(messages))])
	}
	return strings.TrimRight(b.String(), "\n")
}

// fillSession writes n rows to sid in SyncRows calls of batch rows, as the proxy does on each
// request, chained like a conversation (user text, assistant tool_use, tool tool_result).
func fillSession(root *store.Root, sid string, n, batch int, r *rand.Rand) error {
	db, err := root.Session(sid)
	if err != nil {
		return err
	}
	now := time.Now()
	return syncConversationRows(db, n, batch, func(i int) string { return scaleRowText(r, i) },
		func(int) bool { return true }, func() time.Time { return now })
}

// syncConversationRows writes n rows to db in SyncRows calls of batch rows, chained like a
// conversation: row i is user text, assistant tool_use Bash or tool tool_result Bash as i%3
// is 0, 1 or 2, with text(i) (called in row order) and in_context inContext(i), each row
// fingerprinted on the one before and all in the thread of the first. Each SyncRows call
// is stamped now().
func syncConversationRows(db *store.DB, n, batch int, text func(i int) string, inContext func(i int) bool, now func() time.Time) error {
	prev, thread := "", ""
	rows := make([]store.RowWrite, 0, batch)
	for i := 0; i < n; i++ {
		role, kind, name := "tool", "tool_result", "Bash"
		switch i % 3 {
		case 0:
			role, kind, name = "user", "text", ""
		case 1:
			role, kind = "assistant", "tool_use"
		}
		t := text(i)
		fp := store.Fingerprint(prev, role, kind, name, t)
		if thread == "" {
			thread = fp
		}
		rows = append(rows, store.RowWrite{Fingerprint: fp, Thread: thread, Role: role, Kind: kind, Name: name, Text: t, InContext: inContext(i)})
		prev = fp
		if len(rows) == batch || i == n-1 {
			if _, err := db.SyncRows(rows, now()); err != nil {
				return err
			}
			rows = rows[:0]
		}
	}
	return nil
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// searchBench runs the searches of one case: half words queries, half patterns, each on a
// random session with a reader opened and closed per call, as smart_compact_search does.
func searchBench(root *store.Root, sids []string, rowsPer int, n int, r *rand.Rand, sc *scaleCase) error {
	var q, p []float64
	ctx := context.Background()
	for i := 0; i < n; i++ {
		sid := sids[r.IntN(len(sids))]
		row := 3*r.IntN(max(rowsPer/3, 1)) + 2 // a tool_result row
		start := time.Now()
		rd, err := root.OpenReader(sid)
		if err != nil {
			return err
		}
		var o store.SearchOptions
		if i%2 == 0 {
			o.Query = fmt.Sprintf("r-%08x-1 %s", row, services[r.IntN(len(services))])
		} else {
			o.Pattern = regexp.MustCompile(fmt.Sprintf(`req=r-%08x-\d user=`, row))
		}
		res, err := rd.Search(ctx, o)
		rd.Close()
		if err != nil {
			return err
		}
		d := ms(time.Since(start))
		if i%2 == 0 {
			if res.TotalMatches == 0 {
				return fmt.Errorf("query %q found nothing in %s", o.Query, sid)
			}
			q = append(q, d)
		} else {
			if res.TimedOut {
				sc.PatternCut++
			} else if res.TotalMatches == 0 {
				return fmt.Errorf("pattern %s found nothing in %s", o.Pattern, sid)
			}
			p = append(p, d)
		}
	}
	sc.SearchP50, sc.SearchP99 = pct(q, 50), pct(q, 99)
	sc.PatternP50, sc.PatternP99 = pct(p, 50), pct(p, 99)
	sc.Searches = len(q)
	return nil
}

// searchesFor is how many searches of each kind a case runs: fewer on the big sessions, where
// one pattern search takes up to its 1 s budget.
func searchesFor(n, rowsPerSession int) int {
	switch {
	case rowsPerSession >= 1_000_000:
		return max(n/5, 5)
	case rowsPerSession >= 100_000:
		return max(n*2/5, 5)
	}
	return n
}

func runScale(ctx context.Context, pl scalePlan, tmp string, logf func(string, ...any)) ([]*scaleCase, error) {
	var out []*scaleCase
	type job struct {
		sessions, rowsPer, batch int
		label                    string
	}
	var jobs []job
	for _, s := range pl.Sessions {
		jobs = append(jobs, job{s, pl.RowsPerSession, 20, fmt.Sprintf("%s sessions × %d rows", commas(int64(s)), pl.RowsPerSession)})
	}
	for _, n := range pl.Rows {
		jobs = append(jobs, job{1, n, 500, fmt.Sprintf("1 session × %s rows", commas(int64(n)))})
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r := rand.New(rand.NewPCG(pl.Seed, uint64(j.sessions*j.rowsPer)))
		dir, err := os.MkdirTemp(tmp, "scale-")
		if err != nil {
			return nil, err
		}
		sc := &scaleCase{Label: j.label, Sessions: j.sessions, Rows: j.sessions * j.rowsPer}
		root, err := store.Open(dir)
		if err != nil {
			return nil, err
		}
		var sids []string
		start := time.Now()
		for s := 0; s < j.sessions; s++ {
			sid := fmt.Sprintf("scale-%05d", s)
			sids = append(sids, sid)
			if err := fillSession(root, sid, j.rowsPer, j.batch, r); err != nil {
				root.Close()
				return nil, err
			}
		}
		sc.InsertRowsS = float64(sc.Rows) / time.Since(start).Seconds()
		if err := root.Close(); err != nil { // checkpoints the WAL files away
			return nil, err
		}
		sc.BytesPerRow = float64(dirBytes(filepath.Join(dir, "sessions"))) / float64(sc.Rows)
		if root, err = store.Open(dir); err != nil {
			return nil, err
		}
		if err := searchBench(root, sids, j.rowsPer, 2*searchesFor(pl.Searches, j.rowsPer), r, sc); err != nil {
			root.Close()
			return nil, err
		}
		// Retention: with many sessions, half of them idle past the TTL (deleted); with one
		// session, none (the pass still reads every remaining database for blob references).
		old := time.Now().Add(-40 * 24 * time.Hour)
		expire := 0
		if j.sessions > 1 {
			for s := 0; s < j.sessions; s += 2 {
				for _, suf := range []string{".db", ".db-wal", ".db-shm"} {
					os.Chtimes(filepath.Join(dir, "sessions", sids[s]+suf), old, old)
				}
				expire++
			}
		}
		os.Remove(filepath.Join(dir, ".ttl-stamp"))
		start = time.Now()
		rep, err := root.Sweep(30, time.Now())
		sc.SweepMS = ms(time.Since(start))
		root.Close()
		if err != nil {
			return nil, err
		}
		if !rep.Ran || len(rep.SessionsDeleted) != expire {
			return nil, fmt.Errorf("%s: the sweep deleted %d sessions (ran %v), want %d", j.label, len(rep.SessionsDeleted), rep.Ran, expire)
		}
		sc.SweepNote = fmt.Sprintf("%d of %d sessions deleted", expire, j.sessions)
		os.RemoveAll(dir)
		out = append(out, sc)
		logf("scale %s: insert %.0f rows/s, query p50 %.2f ms, pattern p50 %.2f ms, sweep %.0f ms, %.0f B/row",
			sc.Label, sc.InsertRowsS, sc.SearchP50, sc.PatternP50, sc.SweepMS, sc.BytesPerRow)
	}
	return out, nil
}
