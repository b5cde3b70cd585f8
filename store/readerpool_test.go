package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// settle sets the mtime of the session's database files well in the past, so a reader opened
// without a -wal (immutable) may be pooled (a fresh mtime could hide a change on a coarse
// clock).
func settle(t testing.TB, r *Root, sid string) {
	t.Helper()
	old := time.Now().Add(-time.Minute)
	for _, s := range []string{".db", ".db-wal", ".db-shm"} {
		if p := filepath.Join(r.Dir(), "sessions", sid+s); exists(p) {
			age(t, p, old)
		}
	}
}

// shared opens a reader of sid, notes the pooled connection behind it and closes it.
func shared(t testing.TB, r *Root, sid string) *sharedReader {
	t.Helper()
	rd, err := r.OpenReader(sid)
	if err != nil {
		t.Fatal(err)
	}
	sr := rd.sr
	if err := rd.Close(); err != nil {
		t.Fatal(err)
	}
	return sr
}

func searchTotal(t testing.TB, r *Root, sid, query string) int {
	t.Helper()
	return readWith(t, r, sid, func(rd *Reader) (int, error) {
		res, err := rd.Search(context.Background(), SearchOptions{Query: query})
		return res.TotalMatches, err
	})
}

// TestReaderPoolReuse: a closed Reader leaves its connection in the pool and the next
// OpenReader of the session takes it, with a writer live (WAL) or not (immutable).
func TestReaderPoolReuse(t *testing.T) {
	t.Run("wal", func(t *testing.T) {
		r := newRoot(t)
		syncTestRows(t, mustSession(t, r, "s"), []testRow{{thread: "a", role: "user", text: "hello"}})
		a, b := shared(t, r, "s"), shared(t, r, "s")
		if a != b || a.immutable || r.readers.size() != 1 {
			t.Errorf("second reader %p, first %p (immutable %v), pool %d; want the same WAL reader", b, a, a.immutable, r.readers.size())
		}
	})
	t.Run("immutable", func(t *testing.T) {
		r := newRoot(t)
		syncTestRows(t, mustSession(t, r, "s"), []testRow{{thread: "a", role: "user", text: "hello"}})
		r2 := reopen(t, r)
		settle(t, r2, "s")
		a, b := shared(t, r2, "s"), shared(t, r2, "s")
		if a != b || !a.immutable {
			t.Errorf("second reader %p, first %p (immutable %v); want the same immutable reader", b, a, a.immutable)
		}
	})
	t.Run("fresh file not pooled without a -wal", func(t *testing.T) {
		r := newRoot(t)
		syncTestRows(t, mustSession(t, r, "s"), []testRow{{thread: "a", role: "user", text: "hello"}})
		r2 := reopen(t, r)
		if a := shared(t, r2, "s"); !a.immutable || r2.readers.size() != 0 {
			t.Errorf("immutable %v, pool %d; want an immutable reader closed after use", a.immutable, r2.readers.size())
		}
	})
	t.Run("concurrent handles share one reader", func(t *testing.T) {
		r := newRoot(t)
		syncTestRows(t, mustSession(t, r, "s"), []testRow{{thread: "a", role: "user", text: "hello"}})
		a, b := mustReader(t, r, "s"), mustReader(t, r, "s")
		if a.sr != b.sr {
			t.Error("two open handles on different readers")
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Search(context.Background(), SearchOptions{Query: "hello"}); err == nil {
			t.Error("search on a closed handle")
		}
		if res, err := b.Search(context.Background(), SearchOptions{Query: "hello"}); err != nil || res.TotalMatches != 1 {
			t.Errorf("search on the other handle = %+v, %v", res, err)
		}
	})
}

// TestPooledReaderSeesLaterCommits: rows committed after a pooled reader was opened show in
// the next read, on a handle held open and on the next OpenReader.
func TestPooledReaderSeesLaterCommits(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	syncTestRows(t, d, []testRow{{thread: "a", role: "user", text: "first"}})
	before := shared(t, r, "s")
	held := mustReader(t, r, "s")
	syncTestRows(t, d, []testRow{{thread: "a", role: "user", text: "first"}, {thread: "a", role: "assistant", text: "second apple"}})
	if n := searchTotal(t, r, "s", "apple"); n != 1 {
		t.Errorf("pooled reader found %d apple rows, want 1", n)
	}
	if res, err := held.Search(context.Background(), SearchOptions{Query: "apple"}); err != nil || res.TotalMatches != 1 {
		t.Errorf("held reader = %+v, %v", res, err)
	}
	if after := shared(t, r, "s"); after != before {
		t.Error("the WAL reader was not reused after a commit")
	}
}

// TestPooledReaderWriterAppears: a reader pooled without a -wal (immutable) is not reused once
// a writer opened the database: the next read sees the new rows.
func TestPooledReaderWriterAppears(t *testing.T) {
	r := newRoot(t)
	syncTestRows(t, mustSession(t, r, "s"), []testRow{{thread: "a", role: "user", text: "first"}})
	r2 := reopen(t, r)
	settle(t, r2, "s")
	old := shared(t, r2, "s")
	if !old.immutable || r2.readers.size() != 1 {
		t.Fatalf("immutable %v pool %d", old.immutable, r2.readers.size())
	}
	// A writer elsewhere (its own Root, as the proxy in another process).
	w, err := Open(r.Dir())
	if err != nil {
		t.Fatal(err)
	}
	syncTestRows(t, mustSession(t, w, "s"), []testRow{{thread: "a", role: "user", text: "first"}, {thread: "a", role: "user", text: "second pear"}})
	if n := searchTotal(t, r2, "s", "pear"); n != 1 {
		t.Errorf("found %d pear rows with the writer open, want 1", n)
	}
	now := shared(t, r2, "s")
	if now == old || now.immutable {
		t.Errorf("reader after the writer opened: same %v immutable %v", now == old, now.immutable)
	}
	// The writer closes (checkpoint, no -wal left): a reader opens on the file as it is now.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(r.Dir(), "sessions", "s.db-wal")) {
		t.Log("-wal left after the writer closed") // a pooled reader kept it; the next read copes either way
	}
	syncTestRows(t, mustSession(t, r2, "s"), []testRow{{thread: "a", role: "user", text: "first"}, {thread: "a", role: "user", text: "second pear"}, {thread: "a", role: "user", text: "third pear"}})
	if n := searchTotal(t, r2, "s", "pear"); n != 2 {
		t.Errorf("found %d pear rows, want 2", n)
	}
}

// TestPooledReaderReplacedFile: a database file replaced by another (new inode) is read anew.
func TestPooledReaderReplacedFile(t *testing.T) {
	skipOnWindows(t, "a file SQLite holds open cannot be deleted, replaced or overwritten here (sharing violation, access denied, user-mapped section): retry_test.go covers what the store does about it")
	for _, wal := range []bool{false, true} {
		t.Run(fmt.Sprintf("wal %v", wal), func(t *testing.T) {
			r := newRoot(t)
			syncTestRows(t, mustSession(t, r, "s"), []testRow{{thread: "a", role: "user", text: "apple"}})
			syncTestRows(t, mustSession(t, r, "other"), []testRow{{thread: "a", role: "user", text: "banana"}})
			r2 := reopen(t, r)
			if wal { // a writer on s keeps a -wal: the pooled reader is a WAL reader
				syncTestRows(t, mustSession(t, r2, "s"), []testRow{{thread: "a", role: "user", text: "apple"}})
			}
			settle(t, r2, "s")
			settle(t, r2, "other")
			old := shared(t, r2, "s")
			if r2.readers.size() != 1 || old.immutable == wal {
				t.Fatalf("pool %d immutable %v", r2.readers.size(), old.immutable)
			}
			if wal {
				// The writer closes and the file is replaced while the reader stays pooled.
				r2.mu.Lock()
				e := r2.sessions["s"]
				r2.mu.Unlock()
				e.mu.Lock()
				_ = e.db.close()
				e.db = nil
				e.mu.Unlock()
			}
			dir := filepath.Join(r2.Dir(), "sessions")
			b, err := os.ReadFile(filepath.Join(dir, "other.db"))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"-wal", "-shm"} {
				_ = os.Remove(filepath.Join(dir, "s.db"+s))
			}
			tmp := filepath.Join(dir, ".s.db.tmp")
			if err := os.WriteFile(tmp, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if !wal { // same size and mtime as the file it replaces: only the identity differs
				fi, err := os.Stat(filepath.Join(dir, "s.db"))
				if err != nil || fi.Size() != int64(len(b)) {
					t.Fatalf("s.db %v, %v; other.db has %d bytes", fi, err, len(b))
				}
				age(t, tmp, fi.ModTime())
			}
			if err := os.Rename(tmp, filepath.Join(dir, "s.db")); err != nil {
				t.Fatal(err)
			}
			if n := searchTotal(t, r2, "s", "banana"); n != 1 {
				t.Errorf("found %d banana rows in the replaced file, want 1", n)
			}
			if n := searchTotal(t, r2, "s", "apple"); n != 0 {
				t.Errorf("found %d apple rows of the old file, want 0", n)
			}
			if shared(t, r2, "s") == old {
				t.Error("the old reader served the replaced file")
			}
		})
	}
}

// TestPooledReaderDeletedSession: a deleted session's pooled reader does not keep serving
// it, and OpenReader reports the missing file.
func TestPooledReaderDeletedSession(t *testing.T) {
	skipOnWindows(t, "a file SQLite holds open cannot be deleted, replaced or overwritten here (sharing violation, access denied, user-mapped section): retry_test.go covers what the store does about it")
	r := newRoot(t)
	syncTestRows(t, mustSession(t, r, "s"), []testRow{{thread: "a", role: "user", text: "apple"}})
	if shared(t, r, "s"); r.readers.size() != 1 {
		t.Fatal("not pooled")
	}
	for _, s := range []string{".db", ".db-wal", ".db-shm"} {
		_ = os.Remove(filepath.Join(r.Dir(), "sessions", "s"+s))
	}
	if _, err := r.OpenReader("s"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenReader of a deleted session = %v, want ErrNotExist", err)
	}
	if r.readers.size() != 0 {
		t.Error("the deleted session's reader stays pooled (and keeps the deleted file's space)")
	}
}

// TestSweepClosesPooledReader: retention closes a session's pooled reader before deleting
// its files, waiting for a handle still open on it; Windows refuses to delete open files.
// Each case runs in a synctest bubble, so the 100 ms the handle stays open and the sweep's
// wait for it are on the bubble's clock; the sweep is given the real time, which the
// files' mtimes are set from.
func TestSweepClosesPooledReader(t *testing.T) {
	for _, busy := range []bool{false, true} {
		t.Run(fmt.Sprintf("busy %v", busy), func(t *testing.T) {
			now := time.Now() // the files' clock: the sweep compares their mtimes with it
			synctest.Test(t, func(t *testing.T) {
				r := newRoot(t)
				d := mustSession(t, r, "gone")
				if _, err := d.SyncRows(chain([4]string{"user", "text", "", "x"}), now); err != nil {
					t.Fatal(err)
				}
				sr := shared(t, r, "gone")
				var held *Reader
				if busy {
					held = mustReader(t, r, "gone")
				}
				for _, s := range []string{".db", ".db-wal", ".db-shm"} {
					age(t, d.Path()[:len(d.Path())-3]+s, now.AddDate(0, 0, -40))
				}
				released := make(chan time.Time, 1)
				if busy {
					go func() {
						time.Sleep(100 * time.Millisecond)
						released <- time.Now()
						_ = held.Close()
					}()
				}
				rep, err := r.Sweep(30, now)
				if err != nil || !reflect.DeepEqual(rep.SessionsDeleted, []string{"gone"}) {
					t.Fatalf("Sweep = %+v, %v", rep, err)
				}
				select {
				case <-sr.done:
				default:
					t.Error("the pooled reader is still open after the sweep")
				}
				if busy {
					select {
					case <-released:
					default:
						t.Error("the sweep did not wait for the open handle")
					}
				}
				for _, s := range []string{".db", ".db-wal", ".db-shm"} {
					if p := filepath.Join(r.Dir(), "sessions", "gone"+s); exists(p) {
						t.Errorf("%s survived", p)
					}
				}
				if r.readers.size() != 0 {
					t.Errorf("pool holds %d readers", r.readers.size())
				}
			})
		})
	}
}

// holds reports whether the pool keeps a reader of session sid.
func (p *readerPool) holds(sid string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.entries[sid]
	return ok
}

// TestReaderPoolLimits: the pool keeps at most its capacity, least recently used out first,
// closes readers idle past the timeout, and closes everything with the Root.
func TestReaderPoolLimits(t *testing.T) {
	r := newRoot(t)
	for _, sid := range []string{"a", "b", "c"} {
		syncTestRows(t, mustSession(t, r, sid), []testRow{{thread: "a", role: "user", text: "x " + sid}})
	}
	r.readers.mu.Lock()
	r.readers.cap = 2
	r.readers.mu.Unlock()
	a := shared(t, r, "a")
	shared(t, r, "b")
	shared(t, r, "a") // a is now the most recently used
	shared(t, r, "c") // b goes
	hasA, hasB := r.readers.holds("a"), r.readers.holds("b")
	if r.readers.size() != 2 || !hasA || hasB {
		t.Errorf("pool %d, a %v, b %v; want a and c", r.readers.size(), hasA, hasB)
	}

	t.Run("idle timeout", func(t *testing.T) {
		// In a synctest bubble the pool's idle sweep (a time.AfterFunc armed inside it) and
		// the 150 ms run on the bubble's clock.
		synctest.Test(t, func(t *testing.T) {
			r := newRoot(t)
			syncTestRows(t, mustSession(t, r, "s"), []testRow{{thread: "a", role: "user", text: "x"}})
			r.readers.mu.Lock()
			r.readers.idle = 40 * time.Millisecond
			r.readers.mu.Unlock()
			sr := shared(t, r, "s")
			held := mustReader(t, r, "s") // in use: not idle
			time.Sleep(150 * time.Millisecond)
			if r.readers.size() != 1 {
				t.Fatal("a reader in use was closed as idle")
			}
			_ = held.Close()
			select {
			case <-sr.done:
			case <-time.After(5 * time.Second):
				t.Fatal("idle reader still open after 5 s")
			}
			if r.readers.size() != 0 {
				t.Errorf("pool %d after the idle timeout", r.readers.size())
			}
		})
	})

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.done:
	default:
		t.Error("Root.Close left a pooled reader open")
	}
	// OpenReader still works after Close, unpooled.
	rd, err := r.OpenReader("b")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := rd.Search(context.Background(), SearchOptions{Query: "b"}); err != nil || res.TotalMatches != 1 {
		t.Errorf("search after Root.Close = %+v, %v", res, err)
	}
	_ = rd.Close()
	if r.readers.size() != 0 {
		t.Error("a reader was pooled after Root.Close")
	}
}

// TestPooledReaderSchemaChanges: a pooled WAL reader reports the schema version the database
// has now (a writer migrated it), and a database without a schema yet is not pooled.
func TestPooledReaderSchemaChanges(t *testing.T) {
	r := newRoot(t)
	path := filepath.Join(r.Dir(), "sessions", "old.db")
	buildFixture(t, path, "schema_v2.sql")
	// Another connection keeps the database in WAL mode with a -wal, as a writer of the old
	// version would.
	other := otherConn(t, path, "")
	var mode string
	if err := other.QueryRow("PRAGMA journal_mode = WAL").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal mode %q, %v", mode, err)
	}
	if _, err := other.Exec("UPDATE messages SET in_context = in_context"); err != nil {
		t.Fatal(err)
	}
	rd := mustReader(t, r, "old")
	if rd.SchemaVersion() != 2 || rd.sr.immutable {
		t.Fatalf("version %d immutable %v", rd.SchemaVersion(), rd.sr.immutable)
	}
	sr := rd.sr
	_ = rd.Close()
	mustSession(t, r, "old") // migrates to 3
	rd = mustReader(t, r, "old")
	if rd.SchemaVersion() != SchemaVersion || rd.sr != sr {
		t.Errorf("after the migration: version %d, same reader %v", rd.SchemaVersion(), rd.sr == sr)
	}
	if _, err := rd.Query(context.Background(), "SELECT input_tokens FROM events", 0); err != nil {
		t.Errorf("usage column after the migration: %v", err)
	}
	// The connection the version was read on has its authorizer back.
	for _, q := range []string{"PRAGMA user_version", "SELECT * FROM pragma_user_version"} {
		if _, err := rd.db.QueryContext(context.Background(), q); err == nil || !strings.Contains(err.Error(), "authoriz") {
			t.Errorf("%s after the version was read again: %v, want not authorized", q, err)
		}
	}
	if _, err := rd.db.ExecContext(context.Background(), "DELETE FROM messages"); err == nil {
		t.Error("a write passed after the version was read again")
	}
	_ = rd.Close()

	empty := filepath.Join(r.Dir(), "sessions", "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.OpenReader("empty"); !errors.Is(err, ErrNoSchema) {
		t.Errorf("empty database: %v", err)
	}
	if r.readers.holds("empty") {
		t.Error("a database without a schema was pooled")
	}
}

// TestPooledReaderKeepsRetentionAge: reads through a pooled reader, again and again, leave
// the -shm mtime where it was, between reads and while the reader stays open.
func TestPooledReaderKeepsRetentionAge(t *testing.T) {
	r := newRoot(t)
	syncTestRows(t, mustSession(t, r, "s"), []testRow{{thread: "a", role: "user", text: "deploy it"}})
	old := time.Now().Add(-10 * 24 * time.Hour).Truncate(time.Second)
	ageSessions(t, r, old)
	before := sessionTimes(t, r)
	for range 3 {
		if n := searchTotal(t, r, "s", "deploy"); n != 1 {
			t.Fatalf("found %d", n)
		}
		if after := sessionTimes(t, r); !reflect.DeepEqual(after, before) {
			t.Fatalf("mtimes after a pooled read %v, were %v", after, before)
		}
	}
	if r.readers.size() != 1 {
		t.Fatalf("pool %d", r.readers.size())
	}
}

// TestReaderPoolConcurrent: readers opened, used and closed from many goroutines while a
// writer commits, sessions are swept and the pool evicts and times out; run with -race.
func TestReaderPoolConcurrent(t *testing.T) {
	r := newRoot(t)
	sids := []string{"a", "b", "c", "d", "e"}
	for _, sid := range sids {
		syncTestRows(t, mustSession(t, r, sid), []testRow{{thread: "a", role: "user", text: "word " + sid}})
	}
	r.readers.mu.Lock()
	r.readers.cap = 3
	r.readers.idle = 20 * time.Millisecond
	r.readers.mu.Unlock()
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // the writer
		rows := []testRow{{thread: "a", role: "user", text: "word a"}}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			rows = append(rows, testRow{thread: "a", role: "assistant", text: fmt.Sprintf("more words %d", i)})
			d, err := r.Session("a")
			if err != nil {
				t.Error(err)
				return
			}
			syncTestRows(t, d, rows)
			time.Sleep(time.Millisecond) // paces the writer (its rows grow each round); waits for nothing
		}
	})
	errs := make(chan error, 100)
	// The eviction comes once every reader has searched (it used to come after a 50 ms
	// sleep), and the writer stops once the readers are done (it used to stop after another
	// 50 ms): the readers are mid-run when b is evicted on any machine, and the writer
	// commits for as long as they read.
	var readers, searched sync.WaitGroup
	searched.Add(8)
	for g := range 8 {
		readers.Go(func() {
			first := true
			defer func() {
				if first {
					searched.Done() // a reader that failed before its first search
				}
			}()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 150 {
				sid := sids[rng.IntN(len(sids))]
				rd, err := r.OpenReader(sid)
				if err != nil {
					errs <- err
					return
				}
				var o SearchOptions
				if rng.IntN(2) == 0 {
					o.Query = "word"
				} else {
					o.Pattern = mustRegexp(t, `wor.`)
				}
				res, err := rd.Search(ctx, o)
				if err == nil && res.TotalMatches < 1 {
					err = fmt.Errorf("%s: %+v", sid, res)
				}
				if cerr := rd.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					errs <- err
					return
				}
				if first {
					first = false
					searched.Done()
				}
			}
		})
	}
	searched.Wait()
	unblock := r.readers.evict("b") // as a sweep deleting b would, without deleting it
	unblock()
	readers.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
