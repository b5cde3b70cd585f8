package store

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// latencySamples is how many times each BenchmarkSearchLatency case runs per b.Loop iteration.
const latencySamples = 200

// benchVector is a deterministic pseudo-random vector of dim components in [-1, 1).
func benchVector(rng *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = 2*rng.Float32() - 1
	}
	return v
}

// BenchmarkSearchLatency: the BenchmarkSearch session plus a 768-dim vector of model
// "bench-embed" for every row; each case runs latencySamples times per iteration and reports
// the p50 and p99 of all its samples in milliseconds. Run with -benchtime 1x for one set of
// latencySamples samples per case.
func BenchmarkSearchLatency(b *testing.B) {
	const model, dim = "bench-embed", 768
	d, rd := newSearchBench(b)
	ctx := context.Background()

	var seqs []int64
	rows, err := rd.db.Query("SELECT seq FROM messages ORDER BY seq")
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			b.Fatal(err)
		}
		seqs = append(seqs, s)
	}
	if err := rows.Close(); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	start := time.Now()
	for i := 0; i < len(seqs); i += 5000 {
		vecs := make(map[int64][]float32, 5000)
		for _, s := range seqs[i:min(i+5000, len(seqs))] {
			vecs[s] = benchVector(rng, dim)
		}
		if err := d.PutVectors(model, vecs); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d vectors of %d dims in %v", len(seqs), dim, time.Since(start).Round(time.Millisecond))
	qv := benchVector(rng, dim)

	user := []string{"user", "tool"}
	search := func(o SearchOptions) func() error {
		return func() error {
			res, err := rd.Search(ctx, o)
			if err == nil && res.TimedOut {
				b.Logf("%s: timed out", b.Name())
			}
			return err
		}
	}
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"query_rare_word", search(SearchOptions{Query: "rareneedle", Roles: user})},
		{"query_two_words_mid", search(SearchOptions{Query: "w300xaaaaaa w1200xaaaaa", Roles: user, Context: 2})},
		{"pattern_literal", search(SearchOptions{Pattern: mustRegexp(b, `KEY-7`), Roles: user})},
		{"pattern_class", search(SearchOptions{Pattern: mustRegexp(b, `w12\d\dxa+ w`)})},
		{"hybrid_two_words_mid", search(SearchOptions{Query: "w300xaaaaaa w1200xaaaaa", Roles: user, QueryVector: qv, VectorModel: model})},
		{"sql_count_like_x", func() error {
			_, err := rd.Query(ctx, "SELECT count(*) FROM lines WHERE text LIKE '%x%'", 0)
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			if err := c.run(); err != nil { // warm the pool and the page cache
				b.Fatal(err)
			}
			var ds []time.Duration
			for b.Loop() {
				for range latencySamples {
					t := time.Now()
					if err := c.run(); err != nil {
						b.Fatal(err)
					}
					ds = append(ds, time.Since(t))
				}
			}
			reportLatency(b, ds)
		})
	}
}

// reportLatency reports the p50 and p99 of ds in milliseconds, and how many there are.
func reportLatency(b *testing.B, ds []time.Duration) {
	b.ReportMetric(latencyMS(ds, 0.50), "p50-ms")
	b.ReportMetric(latencyMS(ds, 0.99), "p99-ms")
	b.ReportMetric(float64(len(ds)), "samples")
}

// latencyMS sorts ds and returns its p-quantile (0 ≤ p ≤ 1) in milliseconds.
func latencyMS(ds []time.Duration, p float64) float64 {
	slices.Sort(ds)
	return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))]) / float64(time.Millisecond)
}
