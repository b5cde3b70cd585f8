package store

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"
)

// The write queue lets the proxy hand a request's rows and events to the store and forward
// the request at once: SQLite's commit (rows, lines, the full-text index, a cut's in_context
// updates) was about half of the time serve added to a request that makes a new cut
// (docs/benchmarks.md). Jobs of one database run in order, one at a time, on a goroutine
// that exists while the queue is not empty. Every read through this package (OpenReader,
// and so the MCP tools and the dashboard) waits for the session's queue first, so a read
// after a request sees what the request stored; Root.Close and retention wait too.
//
// A held write (AddEventHeld) does not start a commit of its own: it waits on
// the queue for the session's next write that does, and goes into that write's transaction,
// or commits alone after HoldWait, or as soon as anything waits for the queue (Settle, and so
// every read, Close and retention). The proxy holds its events: a request's trim event goes
// in with the request's rows, its usage event with the next request's rows, so an agent in a
// fast loop makes two commits per request instead of three (SQLite's commit cost about as
// much CPU as the inserts it commits). It does not hold a request's rows: the reply's commit,
// which the end of the response waits for, would carry them, and their inserts would be on
// the path to the client's last byte (in make bench, the 120k warm request's added latency
// nearly doubled). What a held write risks is only a kill -9 within HoldWait of it: for the
// proxy, a usage event, which is a statistic.

// maxQueued is how many jobs a database's queue holds; a caller finding it full waits for
// room up to queueWait, so a store slower than the requests slows them down rather than
// filling memory, and a stuck one (a lock held elsewhere) fails the write instead of
// holding the request: the proxy then stores the rows again with the session's next request.
const (
	maxQueued = 8
	queueWait = 2 * time.Second
)

// maxHeld is how many jobs a queue keeps waiting for an unheld one: a request's rows and
// the usage event before them are two; more means the replies are not coming (the upstream
// fails, or answers what the proxy does not store), and the queue is written at once so a
// request never waits for room behind held writes.
const maxHeld = maxQueued / 2

// HoldWait is how long a held write waits on its queue for the next unheld write before it
// commits alone.
const HoldWait = time.Second

// ErrQueueFull is the error of a write that found its session's queue full for queueWait.
var ErrQueueFull = errors.New("the session's write queue stayed full; the write was dropped")

// queuedJob is one write on the queue: rows (SyncRowsLater), an event (AddEventLater), or
// any other func (run).
type queuedJob struct {
	run func()
	// rows and event jobs, which the drain commits together (syncBatch)
	sync   *syncJob
	event  *Event
	failed func(error) // an event's, may be nil
	hold   bool        // a held write: waits for the next unheld one (AddEventHeld)
}

type writeQueue struct {
	mu       sync.Mutex
	cond     *sync.Cond // signalled when a job ends
	jobs     []queuedJob
	draining bool          // a drain goroutine runs
	queued   uint64        // jobs ever queued
	ran      uint64        // jobs ever finished
	room     chan struct{} // a slot per job queued or running, maxQueued in all
	flush    bool          // write the held jobs now: a Settle, a full queue or the hold timer asked
	timer    *time.Timer   // commits held jobs that waited HoldWait (flushHeld); nil until needed
	armed    bool          // timer runs, for held jobs queued since the queue was last empty
	due      time.Time     // when the armed timer is to flush
}

// newWriteQueue returns an empty queue (openDB makes one per database).
func newWriteQueue() *writeQueue {
	q := &writeQueue{room: make(chan struct{}, maxQueued)}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// later queues job on d's write queue. It waits for room up to queueWait and then returns
// ErrQueueFull without queueing.
func (d *DB) later(job func()) error { return d.enqueue(queuedJob{run: job}) }

// enqueue queues j on d's write queue, as later.
func (d *DB) enqueue(j queuedJob) error {
	q := d.queue
	select {
	case q.room <- struct{}{}:
	default:
		q.mu.Lock()
		d.flushLocked() // held jobs would otherwise keep their slots until HoldWait
		q.mu.Unlock()
		t := time.NewTimer(queueWait)
		defer t.Stop()
		select {
		case q.room <- struct{}{}:
		case <-t.C:
			return ErrQueueFull
		}
	}
	q.mu.Lock()
	q.jobs = append(q.jobs, j)
	q.queued++
	switch {
	case !j.hold:
		d.startLocked()
	case len(q.jobs) >= maxHeld:
		d.flushLocked() // writes that nothing unheld follows (failed upstream calls) go on
	case !q.draining:
		d.armLocked()
	}
	q.mu.Unlock()
	return nil
}

// startLocked starts a drain unless one runs (q.mu held).
func (d *DB) startLocked() {
	q := d.queue
	if !q.draining {
		q.draining = true
		go d.drain()
	}
}

// armLocked starts the hold timer unless it runs (q.mu held).
func (d *DB) armLocked() {
	q := d.queue
	if q.armed {
		return
	}
	q.armed, q.due = true, time.Now().Add(HoldWait)
	if q.timer == nil {
		q.timer = time.AfterFunc(HoldWait, d.flushHeld)
	} else {
		q.timer.Reset(HoldWait)
	}
}

// flushHeld is the hold timer: the held jobs waited long enough.
func (d *DB) flushHeld() {
	q := d.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.armed || time.Now().Before(q.due) {
		return // a firing from before the queue emptied and was armed again
	}
	q.armed = false
	d.flushLocked()
}

// flushLocked has the queued jobs written now, held ones included (q.mu held).
func (d *DB) flushLocked() {
	q := d.queue
	if len(q.jobs) == 0 {
		return
	}
	q.flush = true
	d.startLocked()
}

// onlyHeld reports whether every job on the queue is held (q.mu held).
func (q *writeQueue) onlyHeld() bool {
	for _, j := range q.jobs {
		if !j.hold {
			return false
		}
	}
	return true
}

// drain runs the queue's jobs in order. The rows and event jobs queued one after another
// go in together, up to maxQueued, in one transaction (syncBatch): held jobs with the unheld
// one after them, and whatever waited together because the store was the bottleneck. It
// stops, leaving them queued, when only held jobs are left and nothing asked for a flush. Each job's callback runs after the commit that
// holds its writes, so a reply released by its callback is durable (docs/store-safety.md).
func (d *DB) drain() {
	q := d.queue
	for {
		q.mu.Lock()
		if len(q.jobs) == 0 {
			q.draining, q.flush = false, false
			q.jobs = nil
			if q.armed { // its held jobs are written: the next held job starts a full wait
				q.armed = false
				q.timer.Stop()
			}
			q.mu.Unlock()
			return
		}
		if !q.flush && q.onlyHeld() {
			q.draining = false // the held jobs wait for the next unheld one
			d.armLocked()
			q.mu.Unlock()
			return
		}
		n := 1
		if q.jobs[0].run == nil {
			for n < len(q.jobs) && q.jobs[n].run == nil {
				n++
			}
		}
		batch := make([]queuedJob, n)
		copy(batch, q.jobs[:n])
		clear(q.jobs[:n])
		q.jobs = q.jobs[n:]
		q.mu.Unlock()
		if batch[0].run != nil {
			runJob(batch[0].run)
		} else {
			d.runBatch(batch)
		}
		for range batch {
			<-q.room
		}
		q.mu.Lock()
		q.ran += uint64(n)
		q.cond.Broadcast()
		q.mu.Unlock()
	}
}

// runBatch writes a batch of rows and event jobs (syncBatch) and hands each its outcome;
// a panic in the write fails every job of the batch, one in a callback only that callback.
func (d *DB) runBatch(batch []queuedJob) {
	res := make([]SyncResult, len(batch))
	errs := make([]error, len(batch))
	func() {
		defer func() {
			if v := recover(); v != nil {
				for i := range errs {
					res[i], errs[i] = SyncResult{}, fmt.Errorf("sync rows panicked: %v", v)
				}
			}
		}()
		d.syncBatch(batch, res, errs)
	}()
	for i, j := range batch {
		switch {
		case j.sync != nil && j.sync.done != nil:
			runJob(func() { j.sync.done(res[i], errs[i]) })
		case j.event != nil && errs[i] != nil && j.failed != nil:
			runJob(func() { j.failed(errs[i]) })
		}
	}
}

// runJob runs a queued write; a panic in it (the store's or a caller's callback) is logged
// by the caller's callback where it can be, and never ends the process: the write fails open.
func runJob(job func()) {
	defer func() {
		if v := recover(); v != nil {
			fmt.Fprintf(os.Stderr, "smarter-compact: fail-open store at store/queue.go: a queued write panicked: %v\n", v)
		}
	}()
	job()
}

// Settle waits until every job queued on d before the call has run; jobs queued later do
// not keep it waiting.
func (d *DB) Settle() {
	q := d.queue
	q.mu.Lock()
	if q.ran < q.queued {
		d.flushLocked()
	}
	for target := q.queued; q.ran < target; {
		q.cond.Wait()
	}
	q.mu.Unlock()
}

// SyncRowsLater queues SyncRows(rows, now) on the session's write queue and returns; done
// (may be nil) gets its result on the queue's goroutine and must not block, or ErrQueueFull
// on the caller's when the queue stayed full. rows must not be changed after the call.
func (d *DB) SyncRowsLater(rows []RowWrite, now time.Time, done func(SyncResult, error)) {
	err := d.enqueue(queuedJob{sync: &syncJob{rows: rows, now: now, done: done}})
	if err != nil && done != nil {
		done(SyncResult{}, d.noted(err))
	}
}

// AddEventHeld is AddEventLater as a held write: the event commits with the session's next
// unheld write, after HoldWait, or when something settles the queue, whichever comes first;
// failed (may be nil) gets the error on the queue's goroutine.
func (d *DB) AddEventHeld(e Event, failed func(error)) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	err := d.enqueue(queuedJob{event: &e, failed: failed, hold: true})
	if err != nil && failed != nil {
		failed(d.noted(err))
	}
}

// AddEventLater queues AddEvent(e) on the session's write queue, after the rows queued
// before it; failed (may be nil) gets the error on the queue's goroutine.
func (d *DB) AddEventLater(e Event, failed func(error)) {
	if e.At.IsZero() {
		e.At = time.Now() // the time of the request, not of the write
	}
	err := d.enqueue(queuedJob{event: &e, failed: failed})
	if err != nil && failed != nil {
		failed(d.noted(err))
	}
}

// Settle waits for the writes queued for session sid so far (nothing when it has no
// writer open). OpenReader calls it.
func (r *Root) Settle(sid string) {
	r.mu.Lock()
	e := r.sessions[sid]
	r.mu.Unlock()
	if e == nil {
		return
	}
	e.mu.Lock()
	d := e.db
	e.mu.Unlock()
	if d != nil {
		d.Settle()
	}
}

// SettleAll waits for the writes queued for every session so far (tests; Root.Close settles
// each writer as it closes it).
func (r *Root) SettleAll() {
	r.mu.Lock()
	entries := slices.Collect(maps.Values(r.sessions))
	r.mu.Unlock()
	for _, e := range entries {
		e.mu.Lock()
		d := e.db
		e.mu.Unlock()
		if d != nil {
			d.Settle()
		}
	}
}
