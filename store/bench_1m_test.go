//go:build sqlite_fts5

package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain removes what the benchmarks built once for the whole run (bench1M).
func TestMain(m *testing.M) {
	code := m.Run()
	if bench1M.dir != "" && !bench1M.kept {
		_ = os.RemoveAll(bench1M.dir)
	}
	os.Exit(code)
}

// bench1M is the 1,000,000-row session of BenchmarkSearchLexical1M, built once per run in a
// temporary directory (removed by TestMain). With STORE_BENCH_1M_DIR set it lives in that
// directory instead, is built only when the directory holds no session yet and is kept, so
// the base and head binaries of an interleaved comparison read the same file.
var bench1M struct {
	once  sync.Once
	dir   string
	kept  bool   // the directory is STORE_BENCH_1M_DIR's
	path  string // the session's database
	build time.Duration
	err   error
}

// bench1MRows is how many rows bench1M's session holds.
const bench1MRows = 1_000_000

// bench1MServices are the names a bench1M row mentions, one per row: each matches about a
// twelfth of the rows.
var bench1MServices = strings.Fields("payments auth search checkout inventory notify profile gateway ledger media export billing")

// bench1MText is row i of bench1M's session, a conversation in threes as cmd/bench's scale
// case writes it (about 200 bytes and two lines a row): a user's question naming a request,
// the assistant's grep for it, and four log lines of the request's service.
func bench1MText(rng *rand.Rand, i int) (role, kind, text string) {
	svc := bench1MServices[rng.IntN(len(bench1MServices))]
	switch i % 3 {
	case 0:
		return "user", "text", fmt.Sprintf("Why did request r-%08x-0 from %s fail? Fix the handler.", i+2, svc)
	case 1:
		return "assistant", "tool_use", fmt.Sprintf(`{"command":"grep -n 'r-%08x' logs/%s.log"}`, i+1, svc)
	}
	lines := make([]string, 4)
	for l := range lines {
		lines[l] = fmt.Sprintf("2026-10-30T09:%02d:%02dZ %s %s req=r-%08x-%d user=u-%05d latency_ms=%d",
			(i/60)%60, i%60, []string{"INFO", "WARN", "ERROR"}[rng.IntN(3)], svc, i, l, rng.IntN(100000), rng.IntN(3000))
	}
	return "tool", "tool_result", strings.Join(lines, "\n")
}

// open1M returns a Root over bench1M's directory, building the session on the first call
// through DB.SyncRows, 500 rows a call as the proxy writes them.
func open1M(b *testing.B) *Root {
	b.Helper()
	bench1M.once.Do(func() {
		start := time.Now()
		if dir := os.Getenv("STORE_BENCH_1M_DIR"); dir != "" {
			bench1M.dir, bench1M.kept = dir, true
			if bench1M.err = os.MkdirAll(dir, 0o700); bench1M.err != nil {
				return
			}
		} else if bench1M.dir, bench1M.err = os.MkdirTemp("", "store-bench-1m-"); bench1M.err != nil {
			return
		}
		r, err := Open(filepath.Join(bench1M.dir, "context"))
		if err != nil {
			bench1M.err = err
			return
		}
		defer r.Close()
		d, err := r.Session("bench")
		if err != nil {
			bench1M.err = err
			return
		}
		bench1M.path = d.Path()
		built := filepath.Join(bench1M.dir, "built")
		if _, err := os.Stat(built); err == nil {
			return // kept from an earlier run (STORE_BENCH_1M_DIR)
		}
		rng := rand.New(rand.NewPCG(1, 1))
		prev, thread := "", ""
		rows := make([]RowWrite, 0, 500)
		for i := range bench1MRows {
			role, kind, text := bench1MText(rng, i)
			fp := Fingerprint(prev, role, kind, "", text)
			if thread == "" {
				thread = fp
			}
			rows = append(rows, RowWrite{Fingerprint: fp, Thread: thread, Role: role, Kind: kind, Text: text, InContext: true})
			prev = fp
			if len(rows) == cap(rows) || i == bench1MRows-1 {
				if _, err := d.SyncRows(rows, time.Now()); err != nil {
					bench1M.err = err
					return
				}
				rows = rows[:0]
			}
		}
		bench1M.build = time.Since(start)
		if bench1M.kept {
			bench1M.err = os.WriteFile(built, nil, 0o600)
		}
	})
	if bench1M.err != nil {
		b.Fatal(bench1M.err)
	}
	var size int64
	if fi, err := os.Stat(bench1M.path); err == nil {
		size = fi.Size()
	}
	b.Logf("%d rows built through SyncRows in %v (once per run), db %d MB", bench1MRows, bench1M.build.Round(time.Second), size>>20)
	return openRoot(b, filepath.Join(bench1M.dir, "context"))
}

// BenchmarkSearchLexical1M: words queries on a 1,000,000-row session, a reader opened and
// closed per search as smart_compact_search does (pooled). rare_and_common is cmd/bench's
// scale query (a request id, one row, and a service name, about 83,000 rows); common_word a
// service name alone; common_word_default_roles the same under smart_compact_search's default
// roles (user and tool). Each case runs latencySamples searches per iteration at rows spread
// over the session and reports their p50 and p99 in milliseconds.
func BenchmarkSearchLexical1M(b *testing.B) {
	r := open1M(b)
	ctx := context.Background()
	commonWord := func(rng *rand.Rand) string { return bench1MServices[rng.IntN(len(bench1MServices))] }
	for _, c := range []struct {
		name  string
		query func(rng *rand.Rand) string
		roles []string
	}{
		{"rare_and_common", func(rng *rand.Rand) string {
			return fmt.Sprintf("r-%08x-1 %s", 3*rng.IntN(bench1MRows/3)+2, bench1MServices[rng.IntN(len(bench1MServices))])
		}, nil},
		{"common_word", commonWord, nil},
		{"common_word_default_roles", commonWord, []string{"user", "tool"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(2, 2))
			search := func() SearchResult {
				rd, err := r.OpenReader("bench")
				if err != nil {
					b.Fatal(err)
				}
				defer rd.Close()
				res, err := rd.Search(ctx, SearchOptions{Query: c.query(rng), Roles: c.roles})
				if err != nil || res.TotalMatches == 0 {
					b.Fatal(res, err)
				}
				return res
			}
			res := search() // warm the pool and the page cache
			var ds []time.Duration
			for b.Loop() {
				for range latencySamples {
					t := time.Now()
					search()
					ds = append(ds, time.Since(t))
				}
			}
			reportLatency(b, ds)
			b.ReportMetric(float64(res.TotalMatches), "matches")
		})
	}
}

// BenchmarkRankWords1M compares the hit ranking of a words query two ways on bench1M's
// session, in one process and alternated sample by sample (so the machine's load falls on
// both alike): rankAll, the one statement, and rankHits, which takes the tiered path when at
// most one word is common (search_rank.go). The queries are BenchmarkSearchLexical1M's, with
// smart_compact_search's default roles (user and tool) and without; each sample checks that
// both rankings are identical (rows, order, matched words, bm25 bit for bit). It reports
// each way's p50 and p99 in milliseconds.
func BenchmarkRankWords1M(b *testing.B) {
	r := open1M(b)
	rd, err := r.OpenReader("bench")
	if err != nil {
		b.Fatal(err)
	}
	defer rd.Close()
	c, err := rd.conn()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, roles := range [][]string{nil, {"user", "tool"}} {
		for _, name := range []string{"rare_and_common", "common_word"} {
			b.Run(fmt.Sprintf("%s/roles=%d", name, len(roles)), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(2, 2))
				query := func() string {
					svc := bench1MServices[rng.IntN(len(bench1MServices))]
					if name == "common_word" {
						return svc
					}
					return fmt.Sprintf("r-%08x-1 %s", 3*rng.IntN(bench1MRows/3)+2, svc)
				}
				var all, tiers []time.Duration
				for b.Loop() {
					for i := range latencySamples / 4 {
						q := newRankQuery(SearchOptions{Roles: roles}, queryWords(query()))
						var want, got []rankedRow
						runAll := func() {
							t := time.Now()
							if want, err = rankAll(ctx, c, q, DefaultSearchLimit); err != nil {
								b.Fatal(err)
							}
							all = append(all, time.Since(t))
						}
						runHits := func() {
							t := time.Now()
							hits, err := rankHits(ctx, c, q, DefaultSearchLimit)
							if err != nil {
								b.Fatal(err)
							}
							tiers = append(tiers, time.Since(t))
							got = got[:0]
							for _, h := range hits {
								got = append(got, rankedRow{seq: h.Seq, matched: h.MatchedTerms, score: h.Rank})
							}
						}
						if i%2 == 0 {
							runAll()
							runHits()
						} else {
							runHits()
							runAll()
						}
						if d := diffRanked(got, want); d != "" {
							b.Fatalf("query %v: %s", q.phrases, d)
						}
					}
				}
				b.ReportMetric(latencyMS(all, 0.5), "all-p50-ms")
				b.ReportMetric(latencyMS(all, 0.99), "all-p99-ms")
				b.ReportMetric(latencyMS(tiers, 0.5), "tiers-p50-ms")
				b.ReportMetric(latencyMS(tiers, 0.99), "tiers-p99-ms")
			})
		}
	}
}

// BenchmarkPostings1M measures the word postings of bench1M's session (search_postings.go):
// each iteration opens a fresh Root (so a fresh reader pool, no postings) and searches each
// service name twice, a reader opened and closed per search. The first search of a word
// builds its postings (first-p50-ms: the whole search); the second finds them
// (warm-p50-ms). It reports the postings' size in the search memory budget, the rows' sizes
// and the twelve words (postings-MB), what they add to the live heap (heap-MB, after a GC
// each side) and the words' rows (rows).
func BenchmarkPostings1M(b *testing.B) {
	open1M(b)
	ctx := context.Background()
	var first, warm []time.Duration
	var accounted, heap, rows float64
	for b.Loop() {
		r, err := Open(filepath.Join(bench1M.dir, "context"))
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		search := func(word string) time.Duration {
			t := time.Now()
			rd, err := r.OpenReader("bench")
			if err != nil {
				b.Fatal(err)
			}
			defer rd.Close()
			if res, err := rd.Search(ctx, SearchOptions{Query: word}); err != nil || res.TotalMatches == 0 {
				b.Fatal(res, err)
			}
			return time.Since(t)
		}
		for _, w := range bench1MServices {
			first = append(first, search(w))
			warm = append(warm, search(w))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		rd, err := r.OpenReader("bench")
		if err != nil {
			b.Fatal(err)
		}
		c, err := rd.conn()
		if err != nil {
			b.Fatal(err)
		}
		ps := postingStats(c.sr)
		if ps.built != len(bench1MServices) {
			b.Fatalf("%d words built, want %d", ps.built, len(bench1MServices))
		}
		accounted, rows = 4*float64(len(ps.sizes)), 0
		for _, p := range ps.words {
			accounted += float64(p.bytes())
			rows += float64(len(p.seqs))
		}
		heap = float64(after.HeapAlloc) - float64(before.HeapAlloc)
		rd.Close()
		if err := r.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(latencyMS(first, 0.5), "first-p50-ms")
	b.ReportMetric(latencyMS(first, 1), "first-max-ms")
	b.ReportMetric(latencyMS(warm, 0.5), "warm-p50-ms")
	b.ReportMetric(accounted/(1<<20), "postings-MB")
	b.ReportMetric(heap/(1<<20), "heap-MB")
	b.ReportMetric(rows, "rows")
}

// BenchmarkSearchMix1M is cmd/bench's scale search (searchBench) on bench1M's session: each
// iteration opens a fresh Root (a fresh reader pool: no postings, no trigram index) and runs
// 20 words queries ("r-<id>-1 <service>", a rare request id and a common word) alternated
// with 20 patterns (`req=r-<id>-\d user=`), a reader opened and closed per search, first uses
// included. It reports each kind's p50 and p99 in milliseconds and the patterns cut by the
// budget (cut, per iteration).
func BenchmarkSearchMix1M(b *testing.B) {
	open1M(b)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 3))
	var words, patterns []time.Duration
	cut := 0
	for b.Loop() {
		r, err := Open(filepath.Join(bench1M.dir, "context"))
		if err != nil {
			b.Fatal(err)
		}
		for i := range 40 {
			row := 3*rng.IntN(bench1MRows/3) + 2 // a tool row
			var o SearchOptions
			if i%2 == 0 {
				o.Query = fmt.Sprintf("r-%08x-1 %s", row, bench1MServices[rng.IntN(len(bench1MServices))])
			} else {
				o.Pattern = regexp.MustCompile(fmt.Sprintf(`req=r-%08x-\d user=`, row))
			}
			t := time.Now()
			rd, err := r.OpenReader("bench")
			if err != nil {
				b.Fatal(err)
			}
			res, err := rd.Search(ctx, o)
			d := time.Since(t)
			rd.Close()
			if err != nil || !res.TimedOut && res.TotalMatches == 0 {
				b.Fatal(o.Query, o.Pattern, res, err)
			}
			if i%2 == 0 {
				words = append(words, d)
			} else {
				patterns = append(patterns, d)
				if res.TimedOut {
					cut++
				}
			}
		}
		if err := r.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(latencyMS(words, 0.5), "words-p50-ms")
	b.ReportMetric(latencyMS(words, 0.99), "words-p99-ms")
	b.ReportMetric(latencyMS(patterns, 0.5), "pattern-p50-ms")
	b.ReportMetric(latencyMS(patterns, 0.99), "pattern-p99-ms")
	b.ReportMetric(float64(cut)/float64(b.N), "cut")
}

// BenchmarkGramIndex1M measures the trigram index of bench1M's session (search_trigrams.go):
// each iteration opens a fresh Root and indexes every row in one refresh, without a deadline.
// It reports the time (index-s) and the index's size in the search memory budget (index-MB),
// and whether it kept the texts (texts: 1) or the filters only (0).
func BenchmarkGramIndex1M(b *testing.B) {
	open1M(b)
	ctx := context.Background()
	var took []time.Duration
	var size, texts float64
	for b.Loop() {
		r, err := Open(filepath.Join(bench1M.dir, "context"))
		if err != nil {
			b.Fatal(err)
		}
		rd, err := r.OpenReader("bench")
		if err != nil {
			b.Fatal(err)
		}
		c, err := rd.conn()
		if err != nil {
			b.Fatal(err)
		}
		t := time.Now()
		gi, complete, err := c.sr.gramIndex(ctx, c, time.Now().Add(time.Hour))
		if err != nil || gi == nil || !complete {
			b.Fatal(gi != nil, complete, err)
		}
		took = append(took, time.Since(t))
		size, texts = float64(gi.bytes)/(1<<20), 0
		if !gi.noTexts {
			texts = 1
		}
		gi.mu.Unlock()
		rd.Close()
		if err := r.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(latencyMS(took, 0.5)/1000, "index-s")
	b.ReportMetric(size, "index-MB")
	b.ReportMetric(texts, "texts")
}
