package store

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rssKiB is the process's resident set (VmRSS, KiB), or 0 where /proc is missing.
func rssKiB() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// BenchmarkWriterFootprint opens 64 writers, each storing a 400-row session and then 20
// warm writes of 2 rows (a request's and its reply's), all kept connected, and reports the
// resident memory they add per writer (KiB/writer, VmRSS; Linux only) and the time of one
// warm write over all of them (ns/op).
func BenchmarkWriterFootprint(b *testing.B) {
	const writers = 64
	r := newRoot(b)
	r.writers.max = writers * 2
	ds := make([]*DB, writers)
	rows := make([][]RowWrite, writers)
	for i := range rows {
		rows[i] = benchRows(make([]RowWrite, 0, 1200), 440)
	}
	runtime.GC()
	before := rssKiB()
	for i := range ds {
		ds[i] = mustSession(b, r, fmt.Sprintf("s%02d", i))
		if _, err := ds[i].SyncRows(rows[i][:400], time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	for k := 0; k < 20; k++ {
		for i, d := range ds {
			if _, err := d.SyncRows(rows[i][2*k+2:402+2*k], time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	}
	runtime.GC()
	after := rssKiB()
	if n := r.writers.connectedCount(); n != writers {
		b.Fatalf("%d writers connected, want %d", n, writers)
	}
	b.ResetTimer()
	defer cpuPerOp(b)()
	i := 0
	for b.Loop() {
		d := ds[i%writers]
		rows[i%writers] = benchRows(rows[i%writers], 2)
		rs := rows[i%writers]
		if _, err := d.SyncRows(rs[len(rs)-402:], time.Now()); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(after-before)/writers, "KiB/writer")
}

// BenchmarkCheckHeader is the header check every SyncRows call and every batch of the write
// queue makes (db_recover.go): an open, a 16-byte read and a close.
func BenchmarkCheckHeader(b *testing.B) {
	r := newRoot(b)
	d := mustSession(b, r, "h")
	if _, err := d.SyncRows(benchRows(nil, 10), time.Now()); err != nil {
		b.Fatal(err)
	}
	defer cpuPerOp(b)()
	for b.Loop() {
		if err := d.checkHeader(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQueuedWarm is the store's side of serve's throughput run: sessions (each a
// 400-row history) send warm requests back to back, all at once; a request queues its rows,
// then its reply's rows, waiting for them as the proxy waits before the last byte, then its
// usage event. "held" holds the event, as the proxy does (it commits with the next request's
// rows), "later" does not (each write starts its commit). ns/op and
// cpu-ms/op are per request, the writers' limit is the Root's default.
func BenchmarkQueuedWarm(b *testing.B) {
	for _, mode := range []string{"later", "held"} {
		for _, n := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s/sessions_%d", mode, n), func(b *testing.B) { benchQueuedWarm(b, n, mode == "held") })
		}
	}
}

func benchQueuedWarm(b *testing.B, n int, held bool) {
	r := newRoot(b)
	ds := make([]*DB, n)
	rows := make([][]RowWrite, n)
	for i := range ds {
		ds[i] = mustSession(b, r, fmt.Sprintf("w%02d", i))
		rows[i] = benchRows(nil, 400)
		if _, err := ds[i].SyncRows(rows[i], time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	defer cpuPerOp(b)()
	var next atomic.Int64
	var wg sync.WaitGroup
	for i := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, rs := ds[i], rows[i]
			event := d.AddEventLater
			if held {
				event = d.AddEventHeld
			}
			for next.Add(1) <= int64(b.N) {
				rs = benchRows(rs, 2)
				d.SyncRowsLater(rs[len(rs)-401:len(rs)-1], time.Now(), nil)
				done := make(chan error, 1)
				d.SyncRowsLater(rs[len(rs)-1:], time.Now(), func(_ SyncResult, err error) { done <- err })
				if err := <-done; err != nil {
					b.Error(err)
					return
				}
				event(Event{Kind: "usage", Version: "bench"}, nil)
			}
			d.Settle()
		}()
	}
	wg.Wait()
}
