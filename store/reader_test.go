package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// testRow is one row for syncTestRows: rows with the same thread label chain into one thread.
type testRow struct {
	thread     string
	role, kind string
	name, text string
	out        bool // in_context = 0
}

// syncTestRows stores rows through the real writer, each thread chained by fingerprint as the
// proxy does, and returns what it wrote (seq = index + 1 in a fresh session).
func syncTestRows(t testing.TB, d *DB, rows []testRow) []RowWrite {
	t.Helper()
	first := map[string]string{}
	prev := map[string]string{}
	ws := make([]RowWrite, 0, len(rows))
	for _, r := range rows {
		kind := r.kind
		if kind == "" {
			kind = "text"
		}
		fp := Fingerprint(prev[r.thread], r.role, kind, r.name, r.text)
		if first[r.thread] == "" {
			first[r.thread] = fp
		}
		prev[r.thread] = fp
		ws = append(ws, RowWrite{Fingerprint: fp, Thread: first[r.thread], Role: r.role, Kind: kind, Name: r.name, Text: r.text, InContext: !r.out})
	}
	if _, err := d.SyncRows(ws, time.Now()); err != nil {
		t.Fatal(err)
	}
	return ws
}

func mustReader(t testing.TB, r *Root, sid string) *Reader {
	t.Helper()
	rd, err := r.OpenReader(sid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rd.Close() })
	return rd
}

// readWith opens a reader of sid, returns what f reads with it and closes it; an error fails
// the test.
func readWith[T any](t testing.TB, r *Root, sid string, f func(*Reader) (T, error)) T {
	t.Helper()
	rd, err := r.OpenReader(sid)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	v, err := f(rd)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestOpenReader(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	syncTestRows(t, d, []testRow{{thread: "a", role: "user", text: "hello"}})

	rd := mustReader(t, r, "s")
	if rd.SchemaVersion() != SchemaVersion || rd.Path() != d.Path() {
		t.Errorf("version %d path %s", rd.SchemaVersion(), rd.Path())
	}
	if err := rd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rd.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := rd.Search(context.Background(), SearchOptions{Query: "hello"}); err == nil {
		t.Error("Search after Close worked")
	}

	t.Run("missing", func(t *testing.T) {
		_, err := r.OpenReader("nope")
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("err = %v, want fs.ErrNotExist", err)
		}
		if exists(filepath.Join(r.Dir(), "sessions", "nope.db")) {
			t.Error("OpenReader created the database")
		}
	})
	t.Run("unsanitized sid", func(t *testing.T) {
		for _, sid := range []string{"", "a/b", "../s", " s", "s\x00"} {
			if _, err := r.OpenReader(sid); err == nil || errors.Is(err, fs.ErrNotExist) {
				t.Errorf("OpenReader(%q) = %v, want an invalid id error", sid, err)
			}
		}
	})
	t.Run("newer schema", func(t *testing.T) {
		path := filepath.Join(r.Dir(), "sessions", "new.db")
		buildFixtureSQL(t, path, "CREATE TABLE messages (seq INTEGER PRIMARY KEY); PRAGMA user_version = 4;")
		_, err := r.OpenReader("new")
		if !errors.Is(err, ErrUnsupportedSchema) {
			t.Errorf("err = %v, want ErrUnsupportedSchema", err)
		}
	})
	t.Run("no schema yet", func(t *testing.T) {
		path := filepath.Join(r.Dir(), "sessions", "empty.db")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := r.OpenReader("empty")
		if !errors.Is(err, ErrNoSchema) {
			t.Errorf("err = %v, want ErrNoSchema", err)
		}
	})
}

// TestReaderOldSchemas reads version 1 and 2 databases as an earlier writer left them, without
// migrating them.
func TestReaderOldSchemas(t *testing.T) {
	for _, c := range []struct {
		file    string
		version int
		events  bool
	}{
		{"schema_v1.sql", 1, false},
		{"schema_v2.sql", 2, true},
	} {
		t.Run(c.file, func(t *testing.T) {
			r := newRoot(t)
			path := filepath.Join(r.Dir(), "sessions", "old.db")
			buildFixture(t, path, c.file)
			before := hashFiles(t, path)
			rd := mustReader(t, r, "old")
			if rd.SchemaVersion() != c.version {
				t.Fatalf("version %d, want %d", rd.SchemaVersion(), c.version)
			}
			ctx := context.Background()
			q, err := rd.Query(ctx, "SELECT count(*), min(seq) FROM messages", 0)
			if err != nil || len(q.Rows) != 1 || q.Rows[0][0].(int64) != 2 {
				t.Fatalf("count = %+v, %v", q, err)
			}
			var text string
			for _, v := range []string{"SELECT text FROM messages WHERE seq = 1"} {
				res, err := rd.Query(ctx, v, 0)
				if err != nil {
					t.Fatal(err)
				}
				text = res.Rows[0][0].(string)
			}
			word := firstWord(text)
			res, err := rd.Search(ctx, SearchOptions{Query: word})
			if err != nil || res.TotalMatches == 0 || len(res.Hits) == 0 || res.LineMatches == 0 {
				t.Errorf("search %q = %+v, %v", word, res, err)
			}
			res, err = rd.Search(ctx, SearchOptions{Pattern: mustRegexp(t, regexpQuote(word))})
			if err != nil || res.TotalMatches == 0 || len(res.Hits) == 0 {
				t.Errorf("pattern %q = %+v, %v", word, res, err)
			}
			_, err = rd.Query(ctx, "SELECT count(*) FROM events", 0)
			if (err == nil) != c.events {
				t.Errorf("events query err = %v, want a table: %v", err, c.events)
			}
			if _, err := rd.Query(ctx, "SELECT input_tokens FROM events", 0); err == nil {
				t.Error("usage column exists in an old schema")
			}
			if err := rd.Close(); err != nil {
				t.Fatal(err)
			}
			if after := hashFiles(t, path); after[path] != before[path] {
				t.Error("reading changed the old database")
			}
			// Still the old version: a reader never migrates.
			if v := queryInt(t, otherConn(t, path, "mode=ro"), "PRAGMA user_version"); v != int64(c.version) {
				t.Errorf("user_version %d after read", v)
			}
		})
	}
}

// sessionTimes returns the mtime of every file in sessions/.
func sessionTimes(t testing.TB, r *Root) map[string]time.Time {
	t.Helper()
	dir := filepath.Join(r.Dir(), "sessions")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]time.Time{}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = fi.ModTime()
	}
	return m
}

// ageSessions sets the modification time of every file in sessions/ to when.
func ageSessions(t testing.TB, r *Root, when time.Time) {
	t.Helper()
	for name := range sessionTimes(t, r) {
		age(t, filepath.Join(r.Dir(), "sessions", name), when)
	}
}

func readEverything(t *testing.T, r *Root, sid string) {
	t.Helper()
	rd, err := r.OpenReader(sid)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if res, err := rd.Search(ctx, SearchOptions{Query: "deploy", Context: 2}); err != nil || len(res.Hits) == 0 {
		t.Fatalf("search = %+v, %v", res, err)
	}
	if _, err := rd.Search(ctx, SearchOptions{Pattern: mustRegexp(t, "dep.oy")}); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Query(ctx, "SELECT count(*) FROM lines_fts WHERE lines_fts MATCH 'deploy'", 0); err != nil {
		t.Fatal(err)
	}
	if err := rd.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReaderKeepsRetentionAge: a read creates no session file and leaves every session file's
// mtime as it was, so reading an old session does not keep it from the sweep.
func TestReaderKeepsRetentionAge(t *testing.T) {
	old := time.Now().Add(-10 * 24 * time.Hour).Truncate(time.Second)
	rows := []testRow{{thread: "a", role: "user", text: "deploy it"}, {thread: "a", role: "assistant", text: "deploying"}}
	check := func(t *testing.T, r *Root, sid string) {
		t.Helper()
		before := sessionTimes(t, r)
		readEverything(t, r, sid)
		after := sessionTimes(t, r)
		names := func(m map[string]time.Time) []string {
			var s []string
			for k := range m {
				s = append(s, k)
			}
			sort.Strings(s)
			return s
		}
		if len(before) != len(after) {
			t.Fatalf("files before %v, after %v", names(before), names(after))
		}
		for name, mt := range before {
			if !after[name].Equal(mt) {
				t.Errorf("%s mtime %v, was %v", name, after[name], mt)
			}
		}
		rep, err := r.Sweep(5, time.Now())
		if err != nil || len(rep.SessionsDeleted) != 1 {
			t.Errorf("sweep after the read = %+v, %v; want the session deleted", rep, err)
		}
	}

	t.Run("writer open (-wal and -shm)", func(t *testing.T) {
		r := newRoot(t)
		syncTestRows(t, mustSession(t, r, "s"), rows)
		if !exists(filepath.Join(r.Dir(), "sessions", "s.db-wal")) {
			t.Fatal("no -wal while the writer is open")
		}
		ageSessions(t, r, old)
		check(t, r, "s")
	})
	t.Run("writer closed (no -wal)", func(t *testing.T) {
		r := newRoot(t)
		syncTestRows(t, mustSession(t, r, "s"), rows)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if exists(filepath.Join(r.Dir(), "sessions", "s.db-wal")) {
			t.Fatal("-wal left after the writer closed")
		}
		r2, err := Open(r.Dir())
		if err != nil {
			t.Fatal(err)
		}
		ageSessions(t, r2, old)
		check(t, r2, "s")
	})
	t.Run("-wal without -shm", func(t *testing.T) {
		r := newRoot(t)
		d := mustSession(t, r, "s")
		syncTestRows(t, d, rows)
		// A copy of the live files without -shm, as after a crash that lost it.
		for _, suffix := range []string{".db", ".db-wal"} {
			b, err := os.ReadFile(d.Path()[:len(d.Path())-3] + suffix)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(r.Dir(), "sessions", "c"+suffix), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		for _, suffix := range []string{".db", ".db-wal", ".db-shm"} {
			_ = os.Remove(filepath.Join(r.Dir(), "sessions", "s"+suffix))
		}
		ageSessions(t, r, old)
		r2 := openRoot(t, r.Dir())
		before := sessionTimes(t, r2)
		readEverything(t, r2, "c")
		newest := func(m map[string]time.Time) time.Time {
			var n time.Time
			for _, mt := range m {
				if mt.After(n) {
					n = mt
				}
			}
			return n
		}
		if after := sessionTimes(t, r2); !newest(after).Equal(newest(before)) {
			t.Errorf("newest session file %v after the read, was %v (%v)", newest(after), newest(before), after)
		}
	})
}

// TestReaderSeesLaterCommits: a Reader opened while the writer is live reads rows committed
// after it opened (WAL), so one reader per call is current.
func TestReaderSeesLaterCommits(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	syncTestRows(t, d, []testRow{{thread: "a", role: "user", text: "first"}})
	rd := mustReader(t, r, "s")
	syncTestRows(t, d, []testRow{{thread: "a", role: "user", text: "first"}, {thread: "a", role: "assistant", text: "second apple"}})
	res, err := rd.Search(context.Background(), SearchOptions{Query: "apple"})
	if err != nil || res.TotalMatches != 1 {
		t.Errorf("search = %+v, %v", res, err)
	}
}
