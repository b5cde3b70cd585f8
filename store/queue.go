package store

import (
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

// maxQueued is how many jobs a database's queue holds; a caller finding it full waits for
// room, so a store slower than the requests slows them down rather than filling memory.
const maxQueued = 8

type writeQueue struct {
	mu       sync.Mutex
	cond     *sync.Cond // signalled when a job is taken or the queue empties
	jobs     []func()
	draining bool // a drain goroutine runs
}

func (q *writeQueue) init() {
	q.mu.Lock()
	if q.cond == nil {
		q.cond = sync.NewCond(&q.mu)
	}
	q.mu.Unlock()
}

// later queues job on d's write queue; it blocks only while the queue is full.
func (d *DB) later(job func()) {
	q := &d.queue
	q.init()
	q.mu.Lock()
	for len(q.jobs) >= maxQueued {
		q.cond.Wait()
	}
	q.jobs = append(q.jobs, job)
	if !q.draining {
		q.draining = true
		go d.drain()
	}
	q.mu.Unlock()
}

func (d *DB) drain() {
	q := &d.queue
	for {
		q.mu.Lock()
		if len(q.jobs) == 0 {
			q.draining = false
			q.jobs = nil
			q.cond.Broadcast()
			q.mu.Unlock()
			return
		}
		job := q.jobs[0]
		q.jobs[0] = nil
		q.jobs = q.jobs[1:]
		q.cond.Broadcast()
		q.mu.Unlock()
		job()
	}
}

// Settle waits until every job queued on d before the call has run.
func (d *DB) Settle() {
	q := &d.queue
	q.init()
	q.mu.Lock()
	for q.draining {
		q.cond.Wait()
	}
	q.mu.Unlock()
}

// SyncRowsLater queues SyncRows(rows, now) on the session's write queue and returns; done
// (may be nil) gets its result on the queue's goroutine and must not block. rows must not be
// changed after the call.
func (d *DB) SyncRowsLater(rows []RowWrite, now time.Time, done func(SyncResult, error)) {
	d.later(func() {
		res, err := d.SyncRows(rows, now)
		if done != nil {
			done(res, err)
		}
	})
}

// AddEventLater queues AddEvent(e) on the session's write queue, after the rows queued
// before it; failed (may be nil) gets the error on the queue's goroutine.
func (d *DB) AddEventLater(e Event, failed func(error)) {
	if e.At.IsZero() {
		e.At = time.Now() // the time of the request, not of the write
	}
	d.later(func() {
		if err := d.AddEvent(e); err != nil && failed != nil {
			failed(err)
		}
	})
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

// SettleAll waits for the writes queued for every session so far (tests, shutdown).
func (r *Root) SettleAll() {
	r.mu.Lock()
	entries := make([]*sessionEntry, 0, len(r.sessions))
	for _, e := range r.sessions {
		entries = append(entries, e)
	}
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
