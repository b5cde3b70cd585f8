package store

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// Queued writes land in order, and a reader opened after them sees all of them.
func TestQueuedWritesLandInOrderBeforeAReader(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "q")
	var specs [][4]string
	var results []int
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	for i := range 20 {
		specs = append(specs, [4]string{"user", "text", "", fmt.Sprintf("row %d", i)})
		d.SyncRowsLater(chain(specs...), time.Now(), func(res SyncResult, err error) {
			if err != nil {
				t.Errorf("write %d: %v", i, err)
			}
			<-mu
			results = append(results, res.Inserted)
			mu <- struct{}{}
		})
		d.AddEventLater(Event{Kind: "usage", Version: "v"}, func(err error) { t.Errorf("event %d: %v", i, err) })
	}
	rd, err := r.OpenReader("q")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var rows, events int
	if err := rd.db.QueryRow("SELECT count(*) FROM messages").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := rd.db.QueryRow("SELECT count(*) FROM events").Scan(&events); err != nil {
		t.Fatal(err)
	}
	if rows != 20 || events != 20 {
		t.Fatalf("the reader sees %d rows and %d events, want 20 and 20", rows, events)
	}
	<-mu
	for i, n := range results {
		if n != 1 { // in order, each write adds exactly its newest row
			t.Fatalf("write %d inserted %d rows, want 1 (results %v)", i, n, results)
		}
	}
}

// A full queue makes the caller wait: with the database locked by another connection, one
// write runs (waiting on the lock), maxQueued wait, and the next caller blocks until the
// queue moves.
func TestFullQueueMakesTheCallerWait(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "full")
	other := otherConn(t, d.Path(), "_busy_timeout=0")
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	var failed atomic.Int32
	for i := range maxQueued + 1 { // one runs (waiting on the lock), maxQueued wait in the queue
		d.SyncRowsLater(chain([4]string{"user", "text", "", fmt.Sprintf("r%d", i)}), time.Now(), func(_ SyncResult, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
	}
	queued := make(chan struct{})
	go func() {
		d.SyncRowsLater(chain([4]string{"user", "text", "", "last"}), time.Now(), nil)
		close(queued)
	}()
	select {
	case <-queued:
		t.Fatal("a write was queued past a full queue")
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-queued:
	case <-time.After(20 * time.Second):
		t.Fatal("the caller still waits after the lock was released")
	}
	d.Settle()
	if failed.Load() == 0 {
		t.Log("no write met the lock's busy timeout") // timing: the lock was released first
	}
}

// Closing the root lands the queued writes first.
func TestCloseLandsQueuedWrites(t *testing.T) {
	r, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := mustSession(t, r, "closing")
	path := d.Path()
	var specs [][4]string
	for i := range 10 {
		specs = append(specs, [4]string{"user", "text", "", fmt.Sprintf("row %d", i)})
		d.SyncRowsLater(chain(specs...), time.Now(), nil)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, otherConn(t, path, "mode=ro"), "SELECT count(*) FROM messages"); n != 10 {
		t.Fatalf("%d rows after Close, want 10", n)
	}
}
