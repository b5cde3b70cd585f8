package store

import (
	"sort"
	"sync"
	"time"
)

// Writers a Root keeps connected. Every connected writer holds a SQLite connection with
// its page cache, statements and the session's fingerprint index, about 0.6 MB for a session
// of 400 rows (BenchmarkWriterFootprint: 128 KiB page cache, only the small INSERT statements
// kept); before a limit serve's memory grew with every session it had ever written (make
// bench: 1.2 GB after 570 sessions). A writer over the limit, or idle longer than writerIdle,
// is parked: its connection closes and the next call on the same *DB connects again (a few
// milliseconds: open, schema check, statements, index load). The limit is well above the
// sessions an agent host runs at once (make bench: 32), so a writer in use is not parked and
// reopened under load; it was 16, and at 32 concurrent sessions the parking and reconnecting
// took about a fifth of serve's CPU.
const (
	maxConnectedWriters = 64
	writerIdle          = 2 * time.Minute
)

// writerSet tracks a Root's connected writers and parks the least recently used. Lock
// order: DB.mu, then writerSet.mu; parking runs outside both, on its own goroutine, and
// skips a writer in use (DB.park's TryLock).
type writerSet struct {
	mu    sync.Mutex
	live  map[*DB]struct{}
	timer *time.Timer // parks idle writers; armed while live is not empty
	max   int         // 0: maxConnectedWriters
	// enforcing: an enforce goroutine is running
	enforcing bool
	idle      time.Duration
	// savings: the Root's open savings files; a writer's closes when it disconnects
	savings *savingsFiles
}

func (w *writerSet) limit() (int, time.Duration) {
	max, idle := maxConnectedWriters, writerIdle
	if w.max > 0 {
		max = w.max
	}
	if w.idle > 0 {
		idle = w.idle
	}
	return max, idle
}

// connected counts d as connected and parks the least recently used others over the limit.
func (w *writerSet) connected(d *DB) {
	if w == nil {
		return
	}
	max, idle := w.limit()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.live == nil {
		w.live = map[*DB]struct{}{}
	}
	w.live[d] = struct{}{}
	if w.timer == nil {
		w.timer = time.AfterFunc(idle/4, w.parkIdle)
	}
	if len(w.live) > max && !w.enforcing {
		w.enforcing = true
		go w.enforce(max)
	}
}

// enforce parks the least recently used writers until at most max stay connected. A writer
// in use is skipped and tried again shortly, so the limit holds within a moment of the
// calls in flight ending.
func (w *writerSet) enforce(max int) {
	for {
		w.mu.Lock()
		over := len(w.live) - max
		if over <= 0 {
			w.enforcing = false
			w.mu.Unlock()
			return
		}
		victims := make([]*DB, 0, len(w.live))
		for d := range w.live {
			victims = append(victims, d)
		}
		w.mu.Unlock()
		sort.Slice(victims, func(i, j int) bool { return victims[i].used.Load() < victims[j].used.Load() })
		parked := 0
		for _, d := range victims {
			if parked == over {
				break
			}
			if d.park() {
				parked++
			}
		}
		if parked < over {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// disconnected forgets d (parked or closed) and closes its session's savings file.
func (w *writerSet) disconnected(d *DB) {
	if w == nil {
		return
	}
	w.mu.Lock()
	delete(w.live, d)
	w.mu.Unlock()
	if w.savings != nil {
		w.savings.release(savingsOfDB(d.path))
	}
}

// parkIdle parks the writers unused for the idle time and re-arms while any stay connected.
func (w *writerSet) parkIdle() {
	_, idle := w.limit()
	cutoff := time.Now().Add(-idle).UnixNano()
	var victims []*DB
	w.mu.Lock()
	for d := range w.live {
		if d.used.Load() < cutoff {
			victims = append(victims, d)
		}
	}
	w.mu.Unlock()
	parkAll(victims)
	w.mu.Lock()
	if len(w.live) > 0 {
		w.timer.Reset(idle / 4)
	} else {
		w.timer = nil
	}
	w.mu.Unlock()
}

// stop ends the idle sweep (Root.Close); writers still close one by one.
func (w *writerSet) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
}

// connectedCount is how many writers hold a connection (tests).
func (w *writerSet) connectedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.live)
}

func parkAll(ds []*DB) {
	for _, d := range ds {
		d.park()
	}
}
