package proxy

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
)

// BenchmarkSessionMemory measures what the proxy keeps per session once its requests are
// answered: 32 sessions of about 300 KB (400 messages) each send a first request and two
// warm ones, then the Go heap still in use after a GC is divided by the sessions
// (retained-B/session; the bodies, built before the baseline, are added back). SQLite's own memory (the writers' page caches) is not in the Go heap
// and not in this number; make bench's RSS column has it. SMARTER_COMPACT_HEAP_PROFILE=F
// writes the in-use heap profile there.
func BenchmarkSessionMemory(b *testing.B) {
	const sessions = 32
	if os.Getenv("SMARTER_COMPACT_HEAP_PROFILE") != "" {
		defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
		runtime.MemProfileRate = 4096
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		p := benchProxy(b, 10_000_000)
		// every body is built before the baseline and dropped before the count, so only what
		// the proxy keeps is measured
		bodies, bodyBytes := make([][][]byte, 3), 0
		for step := range bodies {
			bodies[step] = make([][]byte, sessions)
		}
		for s := 0; s < sessions; s++ {
			c := convoOfSize()
			for step := range bodies {
				if step > 0 {
					c.Add()
				}
				bodies[step][s] = c.Body()
				bodyBytes += cap(bodies[step][s])
			}
		}
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		for step := range bodies {
			for s := range bodies[step] {
				if _, _, err := p.rewrite(benchHeader(fmt.Sprintf("mem-%d-%d", i, s)), bodies[step][s]); err != nil {
					b.Fatal(err)
				}
				bodies[step][s] = nil
			}
		}
		b.StopTimer()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)+int64(bodyBytes))/sessions, "retained-B/session")
		if f := os.Getenv("SMARTER_COMPACT_HEAP_PROFILE"); f != "" && i == 0 {
			out, err := os.Create(f)
			if err != nil {
				b.Fatal(err)
			}
			pprof.Lookup("heap").WriteTo(out, 0)
			out.Close()
		}
		p.Close()
		b.StartTimer()
	}
}
