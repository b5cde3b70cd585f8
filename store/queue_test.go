package store

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
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

// A full queue makes the caller wait for room, and gives up with ErrQueueFull after
// queueWait: a stuck store fails the write instead of holding the request. It runs in a
// synctest bubble: the root, its queue's channels and timers are made inside it, so the
// two-second wait passes on the bubble's clock, and synctest.Wait says when the second
// caller is blocked waiting for room (SQLite's cgo calls are not durably blocking; the
// bubble's clock only moves once they have returned).
func TestFullQueueWaitsThenGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRoot(t)
		d := mustSession(t, r, "full")
		release := make(chan struct{})
		for range maxQueued {
			if err := d.later(func() { <-release }); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		got := make(chan error, 1)
		d.SyncRowsLater(chain([4]string{"user", "text", "", "late"}), time.Now(), func(_ SyncResult, err error) { got <- err })
		if err := <-got; !errors.Is(err, ErrQueueFull) {
			t.Fatalf("a write past a full, stuck queue got %v, want ErrQueueFull", err)
		}
		if waited := time.Since(start); waited < queueWait {
			t.Fatalf("gave up after %s, want a wait of %s first", waited, queueWait)
		}
		// room comes back as soon as a job ends
		queued := make(chan struct{})
		go func() {
			d.SyncRowsLater(chain([4]string{"user", "text", "", "in time"}), time.Now(), nil)
			close(queued)
		}()
		synctest.Wait() // the caller waits for room
		close(release)
		select {
		case <-queued:
		case <-time.After(queueWait):
			t.Fatal("the caller still waits after the queue moved")
		}
		d.Settle()
		if n := queryInt(t, otherConn(t, d.Path(), "mode=ro"), "SELECT count(*) FROM messages"); n != 1 {
			t.Fatalf("%d rows stored, want only the one queued in time", n)
		}
	})
}

// Settle waits for the jobs queued before it, not for a queue that keeps filling. In a
// synctest bubble the jobs' 5 ms, the 50 ms of feeding before the first job ends and the
// 3 s limit are on the bubble's clock: the feeder blocks on the full queue, so the clock
// moves, and no run depends on how fast this machine is.
func TestSettleIsNotStarvedByLaterJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRoot(t)
		d := mustSession(t, r, "starve")
		release := make(chan struct{})
		if err := d.later(func() { <-release }); err != nil {
			t.Fatal(err)
		}
		settled := make(chan struct{})
		go func() { d.Settle(); close(settled) }()
		stop := make(chan struct{})
		feeding := make(chan struct{})
		go func() {
			defer close(feeding)
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = d.later(func() { time.Sleep(5 * time.Millisecond) })
			}
		}()
		time.Sleep(50 * time.Millisecond)
		close(release)
		select {
		case <-settled:
		case <-time.After(3 * time.Second):
			t.Error("Settle still waits while later jobs keep coming")
		}
		close(stop)
		<-feeding
		<-settled
	})
}

// A queued write that panics fails open: its caller hears of it and the queue goes on.
func TestPanickingJobFailsOpen(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "panic")
	if err := d.later(func() { panic("boom") }); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	// a nil row slice element can't panic SyncRows; a done callback that panics can
	d.SyncRowsLater(chain([4]string{"user", "text", "", "x"}), time.Now(), func(_ SyncResult, err error) {
		got <- err
		panic("callback boom")
	})
	if err := <-got; err != nil {
		t.Fatalf("the write after a panicking job: %v", err)
	}
	d.Settle()
	if n := queryInt(t, otherConn(t, d.Path(), "mode=ro"), "SELECT count(*) FROM messages"); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

// Rows marked TextGone that are not stored are left out; the rest of the call is written
// and the error says rows were left out.
func TestTextGoneRowsLeftOutRestWritten(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "gone")
	rows := chain([4]string{"user", "text", "", "old"}, [4]string{"assistant", "text", "", "new"})
	rows[0].Text, rows[0].TextGone = "", true
	res, err := d.SyncRows(rows, time.Now())
	if !errors.Is(err, ErrTextGone) {
		t.Fatalf("err = %v, want ErrTextGone", err)
	}
	if res.Inserted != 1 {
		t.Fatalf("inserted %d rows, want the one with its text", res.Inserted)
	}
	c := otherConn(t, d.Path(), "mode=ro")
	if n := queryInt(t, c, "SELECT count(*) FROM messages WHERE text = 'new'"); n != 1 {
		t.Fatal("the row with its text was not stored")
	}
	if n := queryInt(t, c, "SELECT count(*) FROM messages WHERE text = ''"); n != 0 {
		t.Fatal("a row without its text was stored")
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

// blockQueue queues a job that holds d's queue until the returned func is called, so the
// writes queued meanwhile wait together.
func blockQueue(t *testing.T, d *DB) func() {
	t.Helper()
	release := make(chan struct{})
	if err := d.later(func() { <-release }); err != nil {
		t.Fatal(err)
	}
	return func() { close(release) }
}

// Writes that wait on the queue together are one transaction (group commit): a request's
// rows, its reply's rows that repeat them and add one, and a usage event commit once, and
// each callback runs after that commit, its rows visible to another connection (durable
// before done) with the result a call of its own would have had.
func TestQueuedWritesCommitTogether(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "g")
	first := chain([4]string{"user", "text", "", "hello"}, [4]string{"assistant", "text", "", "hi"})
	if _, err := d.SyncRows(first, time.Now()); err != nil {
		t.Fatal(err)
	}
	reply := chain([4]string{"user", "text", "", "hello"}, [4]string{"assistant", "text", "", "hi"},
		[4]string{"user", "text", "", "list the files"}, [4]string{"assistant", "tool_use", "Bash", "ls"})
	request := reply[:3]
	other := otherConn(t, d.Path(), "")
	count := func() int64 { return queryInt(t, other, "SELECT count(*) FROM messages") }

	release := blockQueue(t, d)
	before := d.commits.Load()
	var got []string
	d.SyncRowsLater(request, time.Now(), func(res SyncResult, err error) {
		got = append(got, fmt.Sprintf("request %+v %v, %d stored", res, err, count()))
	})
	d.SyncRowsLater(reply, time.Now(), func(res SyncResult, err error) {
		got = append(got, fmt.Sprintf("reply %+v %v, %d stored", res, err, count()))
	})
	d.AddEventLater(Event{Kind: "usage", Version: "v"}, func(err error) { t.Errorf("event: %v", err) })
	release()
	d.Settle()
	if n := d.commits.Load() - before; n != 1 {
		t.Errorf("%d commits for three queued writes, want 1", n)
	}
	want := []string{"request {Inserted:1 Updated:0} <nil>, 4 stored", "reply {Inserted:1 Updated:0} <nil>, 4 stored"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("callbacks:\n got %q\nwant %q", got, want)
	}
	if n := queryInt(t, other, "SELECT count(*) FROM events WHERE kind = 'usage'"); n != 1 {
		t.Errorf("%d usage events, want 1", n)
	}
}

// A batch with a write that fails (here a row without a fingerprint) keeps nothing of the
// batch and runs each write alone: the bad one gets its error, the others land.
func TestQueuedBatchWithAFailingWrite(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "f")
	good := chain([4]string{"user", "text", "", "one"})
	bad := chain([4]string{"user", "text", "", "two"})
	bad[0].Fingerprint = ""
	later := chain([4]string{"user", "text", "", "one"}, [4]string{"assistant", "text", "", "three"})
	release := blockQueue(t, d)
	var errs []error
	var inserted []int
	for _, rows := range [][]RowWrite{good, bad, later} {
		d.SyncRowsLater(rows, time.Now(), func(res SyncResult, err error) {
			errs = append(errs, err)
			inserted = append(inserted, res.Inserted)
		})
	}
	release()
	d.Settle()
	if len(errs) != 3 || errs[0] != nil || errs[1] == nil || errs[2] != nil {
		t.Fatalf("errors %v, want only the second", errs)
	}
	if fmt.Sprint(inserted) != "[1 0 1]" {
		t.Errorf("inserted %v, want [1 0 1]", inserted)
	}
	if n := queryInt(t, otherConn(t, d.Path(), ""), "SELECT count(*) FROM messages"); n != 2 {
		t.Errorf("%d rows stored, want 2", n)
	}
}

// A held write (here a trim and a usage event) starts no commit of its own: it waits on
// the queue and commits in the transaction of the session's next unheld write, whose
// callback then sees all of them stored. Alone, it commits after HoldWait. In a
// synctest bubble, synctest.Wait returns only once a drain that had started has finished
// its SQLite calls, so "not committed yet" is checked after any commit could have happened.
func TestHeldWritesCommitWithTheNextWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRoot(t)
		d := mustSession(t, r, "held")
		other := otherConn(t, d.Path(), "mode=ro")
		count := func() int64 { return queryInt(t, other, "SELECT count(*) FROM events") }
		rows := chain([4]string{"user", "text", "", "list the files"}, [4]string{"assistant", "tool_use", "Bash", "ls"})
		before := d.commits.Load()
		d.AddEventHeld(Event{Kind: "trim", Version: "v"}, func(err error) { t.Errorf("event: %v", err) })
		d.AddEventHeld(Event{Kind: "usage", Version: "v"}, func(err error) { t.Errorf("event: %v", err) })
		synctest.Wait()
		time.Sleep(HoldWait / 2)
		synctest.Wait()
		if n := d.commits.Load() - before; n != 0 || count() != 0 {
			t.Fatalf("held writes made %d commits and stored %d events before the next write, want none", n, count())
		}
		stored := make(chan int64, 1)
		d.SyncRowsLater(rows, time.Now(), func(_ SyncResult, err error) {
			if err != nil {
				t.Error(err)
			}
			stored <- count()
		})
		if n := <-stored; n != 2 {
			t.Errorf("the unheld write's callback sees %d events, want 2 (the held ones with it)", n)
		}
		synctest.Wait()
		if n := d.commits.Load() - before; n != 1 {
			t.Errorf("%d commits for two held writes and the unheld one after them, want 1", n)
		}
		if n := queryInt(t, other, "SELECT count(*) FROM messages"); n != 2 {
			t.Errorf("%d rows, want the unheld write's 2", n)
		}

		// alone, a held write waits HoldWait and then commits
		start := time.Now()
		d.AddEventHeld(Event{Kind: "usage", Version: "v"}, nil)
		synctest.Wait()
		if n := count(); n != 2 {
			t.Fatalf("a lone held event committed at once (%d events)", n)
		}
		for count() != 3 {
			time.Sleep(10 * time.Millisecond)
			if time.Since(start) > 2*HoldWait {
				t.Fatal("a lone held event was not committed within twice HoldWait")
			}
		}
		if waited := time.Since(start); waited < HoldWait {
			t.Errorf("a lone held event committed after %s, want HoldWait (%s)", waited, HoldWait)
		}
	})
}

// Whatever waits for the queue has the held writes committed at once: Settle (every read
// through OpenReader, Close, retention); and held writes that nothing unheld follows are
// written once maxHeld wait, so no caller waits for room behind them. On the bubble's clock
// all of it takes no time; without the flush it would take HoldWait.
func TestHeldWritesFlushForSettleAndAFullQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRoot(t)
		d := mustSession(t, r, "flush")
		start := time.Now()
		ro := otherConn(t, d.Path(), "mode=ro")
		d.AddEventHeld(Event{Kind: "usage", Version: "settled"}, nil)
		d.Settle()
		if waited := time.Since(start); waited != 0 {
			t.Errorf("Settle waited %s for a held write, want it committed at once", waited)
		}
		if n := queryInt(t, ro, "SELECT count(*) FROM events"); n != 1 {
			t.Errorf("%d events after Settle, want 1", n)
		}

		// maxHeld held writes with nothing unheld after them are written at once
		start = time.Now()
		for i := range maxHeld {
			d.AddEventHeld(Event{Kind: "usage", Version: fmt.Sprint(i)}, nil)
		}
		synctest.Wait()
		if n := queryInt(t, ro, "SELECT count(*) FROM events"); n != 1+maxHeld || time.Since(start) != 0 {
			t.Errorf("%d events after %s, want %d at once", n, time.Since(start), 1+maxHeld)
		}

		start = time.Now()
		for i := range maxQueued + 1 {
			d.AddEventHeld(Event{Kind: "usage", Version: fmt.Sprint(i)}, func(err error) { t.Errorf("event %d: %v", i, err) })
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("queueing past a queue full of held writes waited %s, want no wait", waited)
		}
		d.Settle()
		if n := queryInt(t, ro, "SELECT count(*) FROM events"); n != 1+maxHeld+maxQueued+1 {
			t.Errorf("%d events, want %d", n, 1+maxHeld+maxQueued+1)
		}
	})
}
