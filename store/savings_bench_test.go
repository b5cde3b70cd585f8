package store

import (
	"fmt"
	"testing"
)

// BenchmarkAppendSavings is the request path's savings record (proxy/usage.go): one
// AppendSavings per op on a real file. "1sessions" appends to one session; "40sessions"
// appends round robin to more sessions than a Root keeps files open for (the worst case of
// savings_files.go: every append opens its file).
func BenchmarkAppendSavings(b *testing.B) {
	rec := SavingsRecord{At: "2026-12-02T08:00:00Z", Model: "claude-sonnet-4-5", ThreadRoot: "t1", Trimmed: 2,
		InputTokens: 12, CacheReadTokens: 81234, CacheCreationTokens: 2048, OutputTokens: 512, RemovedTokens: 40123,
		UntrimmedInputTokens: 12, UntrimmedCacheReadTokens: 120000, UntrimmedCacheCreationTokens: 3405, ThresholdTokens: 100000}
	for _, n := range []int{1, 40} {
		b.Run(fmt.Sprintf("%dsessions", n), func(b *testing.B) {
			r := newRoot(b)
			sids := make([]string, n)
			for i := range sids {
				sids[i] = fmt.Sprintf("bench-%d", i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := r.AppendSavings(sids[i%n], rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
