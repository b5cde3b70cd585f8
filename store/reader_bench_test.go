package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

// searchBenchRows builds n rows of a coding session: 4000-word vocabulary with a skewed
// (Zipf) frequency, 1–8 lines of 4–14 words per row, a long tool result every 50 rows, two
// threads, a third of the rows trimmed.
func searchBenchRows(n int) []RowWrite {
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := make([]string, 4000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%dx%s", i, strings.Repeat("a", i%7))
	}
	zipf := func() string {
		// a simple Zipf-like pick: low indexes are common
		f := rng.Float64()
		return vocab[int(float64(len(vocab))*f*f*f)]
	}
	roles := []string{"user", "assistant", "tool"}
	kinds := []string{"text", "tool_use", "tool_result"}
	rows := make([]RowWrite, 0, n)
	prev := map[string]string{}
	first := map[string]string{}
	for k := 0; k < n; k++ {
		var b strings.Builder
		lines := 1 + rng.IntN(8)
		if k%50 == 0 {
			lines = 200
		}
		for l := 0; l < lines; l++ {
			if l > 0 {
				b.WriteByte('\n')
			}
			for w, nw := 0, 4+rng.IntN(11); w < nw; w++ {
				if w > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(zipf())
			}
		}
		if k%1000 == 7 {
			b.WriteString(" KEY-7 rareneedle")
		}
		thread := "main"
		if k%10 == 9 {
			thread = "sub"
		}
		role, kind := roles[k%3], kinds[k%3]
		text := b.String()
		fp := Fingerprint(prev[thread], role, kind, "", text)
		if first[thread] == "" {
			first[thread] = fp
		}
		prev[thread] = fp
		rows = append(rows, RowWrite{Fingerprint: fp, Thread: first[thread], Role: role, Kind: kind, Text: text, InContext: k > n/3})
	}
	return rows
}

// newSearchBench writes the 50,000 rows of searchBenchRows to session "bench" through
// DB.SyncRows, 1000 rows a call, and opens a reader on it.
func newSearchBench(b *testing.B) (*DB, *Reader) {
	b.Helper()
	r := newRoot(b)
	d := mustSession(b, r, "bench")
	rows := searchBenchRows(50000)
	for i := 0; i < len(rows); i += 1000 {
		if _, err := d.SyncRows(rows[i:min(i+1000, len(rows))], time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	rd := mustReader(b, r, "bench")
	var lines int
	if err := rd.db.QueryRow("SELECT count(*) FROM lines").Scan(&lines); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(d.Path())
	wi, _ := os.Stat(d.Path() + "-wal")
	b.Logf("50000 rows, %d lines, db %d MB, wal %d MB", lines, fi.Size()>>20, wi.Size()>>20)
	return d, rd
}

// BenchmarkSearch: a 50,000-row session written through DB.SyncRows; each sub-benchmark is one
// Search (hits with excerpts, TotalMatches and LineMatches) or one Query.
func BenchmarkSearch(b *testing.B) {
	_, rd := newSearchBench(b)
	ctx := context.Background()
	user := []string{"user", "tool"}
	trimmed := false
	for _, c := range []struct {
		name string
		o    SearchOptions
	}{
		{"query_rare_word", SearchOptions{Query: "rareneedle", Roles: user}},
		{"query_two_words_mid", SearchOptions{Query: "w300xaaaaaa w1200xaaaaa", Roles: user, Context: 2}},
		{"query_three_words_common", SearchOptions{Query: "w1xa w2xaa w3xaaa", Roles: user, InContext: &trimmed}},
		{"query_common_word_nofilter", SearchOptions{Query: "w0x"}},
		{"query_KEY-7", SearchOptions{Query: "KEY-7"}},
		{"pattern_literal", SearchOptions{Pattern: mustRegexp(b, `KEY-7`), Roles: user}},
		{"pattern_class", SearchOptions{Pattern: mustRegexp(b, `w12\d\dxa+ w`)}},
		{"line_count_only_query", SearchOptions{Query: "w5xaaaaa w9xaa", Limit: -1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			res, err := rd.Search(ctx, c.o)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := rd.Search(ctx, c.o); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.TotalMatches), "matches")
			b.ReportMetric(float64(res.LineMatches), "line_matches")
			if res.TimedOut {
				b.ReportMetric(1, "timed_out")
			}
		})
	}
	b.Run("sql_count_like", func(b *testing.B) {
		for b.Loop() {
			if _, err := rd.Query(ctx, "SELECT count(*) FROM lines WHERE text LIKE '%rareneedle%'", 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}
