package store

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// waitConnected polls until at most want writers hold a connection (parking runs on its own
// goroutine) and fails after 5 s. In a synctest bubble (the over-limit and idle tests) its
// sleeps, parking's 20 ms between tries and the idle sweep's time.AfterFunc are all on the
// bubble's clock, so the wait takes no real time; TestWritersParkUnderConcurrentWrites
// stays on the real clock and polls.
func waitConnected(t *testing.T, r *Root, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.writers.connectedCount() > want {
		if time.Now().After(deadline) {
			t.Fatalf("%d writers still connected, want at most %d", r.writers.connectedCount(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Writers over the limit are parked, and a parked *DB a caller still holds goes on working:
// it connects again, reloads its index (so rows it stored are not inserted twice) and writes.
func TestWritersOverLimitParkAndReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRoot(t)
		r.writers.max = 2
		dbs := make([]*DB, 6)
		rows := make([][]RowWrite, len(dbs))
		for i := range dbs {
			dbs[i] = mustSession(t, r, fmt.Sprintf("w%d", i))
			rows[i] = chain([4]string{"user", "text", "", fmt.Sprintf("first %d", i)}, [4]string{"assistant", "text", "", "ok"})
			if res, err := dbs[i].SyncRows(rows[i], time.Now()); err != nil || res.Inserted != 2 {
				t.Fatalf("session %d: %+v, %v", i, res, err)
			}
		}
		waitConnected(t, r, 2)
		if dbs[0].conn != nil {
			t.Fatal("the least recently used writer is still connected")
		}
		// the same rows again: nothing new; one more row: one insert
		if res, err := dbs[0].SyncRows(rows[0], time.Now()); err != nil || res.Inserted != 0 {
			t.Fatalf("a parked writer re-synced its stored rows as %+v, %v; want no inserts", res, err)
		}
		more := append(rows[0], chain([4]string{"user", "text", "", "first 0"}, [4]string{"assistant", "text", "", "ok"}, [4]string{"user", "text", "", "again"})[2])
		if res, err := dbs[0].SyncRows(more, time.Now()); err != nil || res.Inserted != 1 {
			t.Fatalf("a parked writer synced a new row as %+v, %v; want one insert", res, err)
		}
		if err := dbs[1].AddEvent(Event{Kind: "trim", Version: "v"}); err != nil {
			t.Fatalf("AddEvent on a parked writer: %v", err)
		}
		waitConnected(t, r, 2)
		c := otherConn(t, dbs[0].Path(), "mode=ro")
		if n := queryInt(t, c, "SELECT count(*) FROM messages"); n != 3 {
			t.Fatalf("session w0 holds %d rows, want 3", n)
		}
		c1 := otherConn(t, dbs[1].Path(), "mode=ro")
		if n := queryInt(t, c1, "SELECT count(*) FROM events WHERE kind = 'trim'"); n != 1 {
			t.Fatalf("session w1 holds %d trim events, want 1", n)
		}
	})
}

// A writer unused for the idle time is parked even under the limit.
func TestWritersIdleParked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRoot(t)
		r.writers.idle = 40 * time.Millisecond
		d := mustSession(t, r, "idle")
		if _, err := d.SyncRows(chain([4]string{"user", "text", "", "x"}), time.Now()); err != nil {
			t.Fatal(err)
		}
		waitConnected(t, r, 0)
		if _, err := d.SyncRows(chain([4]string{"user", "text", "", "x"}, [4]string{"assistant", "text", "", "y"}), time.Now()); err != nil {
			t.Fatalf("write after an idle park: %v", err)
		}
		waitConnected(t, r, 0) // and the sweep keeps running while a writer is connected
	})
}

// A parked writer whose file was deleted does not create it again: the call fails with
// errClosed and Root.Session opens a new database.
func TestParkedWriterOfDeletedFile(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "gone")
	if _, err := d.SyncRows(chain([4]string{"user", "text", "", "x"}), time.Now()); err != nil {
		t.Fatal(err)
	}
	if !d.park() {
		t.Fatal("park refused an idle writer")
	}
	if err := os.Remove(d.Path()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.SyncRows(chain([4]string{"user", "text", "", "y"}), time.Now()); !errors.Is(err, errClosed) {
		t.Fatalf("SyncRows on a parked writer of a deleted file: %v, want errClosed", err)
	}
	if _, err := os.Stat(d.Path()); err == nil {
		t.Fatal("the parked writer created the deleted file again")
	}
	d2 := mustSession(t, r, "gone")
	if d2 == d {
		t.Fatal("Root.Session returned the closed writer")
	}
	if res, err := d2.SyncRows(chain([4]string{"user", "text", "", "y"}), time.Now()); err != nil || res.Inserted != 1 {
		t.Fatalf("the new writer: %+v, %v", res, err)
	}
}

// Many goroutines write to more sessions than may stay connected: every row lands once.
// It stays on the real clock: in a synctest bubble parking's 20 ms retry would wait until
// every writer is blocked, so parking would no longer run between the writes.
func TestWritersParkUnderConcurrentWrites(t *testing.T) {
	r := newRoot(t)
	r.writers.max = 2
	const sessions, rounds = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, sessions*2)
	for s := range sessions {
		for g := range 2 { // two writers per session race each other too
			wg.Go(func() {
				var specs [][4]string
				for i := range rounds {
					specs = append(specs, [4]string{"user", "text", "", fmt.Sprintf("s%d row %d", s, i)})
					d, err := r.Session(fmt.Sprintf("c%d", s))
					if err == nil {
						_, err = d.SyncRows(chain(specs...), time.Now())
					}
					if err != nil {
						errs <- fmt.Errorf("session %d goroutine %d round %d: %w", s, g, i, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for s := range sessions {
		c := otherConn(t, r.sessionFile(fmt.Sprintf("c%d", s), ".db"), "mode=ro")
		if n := queryInt(t, c, "SELECT count(*) FROM messages"); n != rounds {
			t.Errorf("session c%d holds %d rows, want %d", s, n, rounds)
		}
	}
	waitConnected(t, r, 2)
}
