package store

import (
	"database/sql"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// newRoot opens a context root in a fresh temp dir, through the production Open.
func newRoot(t testing.TB) *Root {
	t.Helper()
	return openRoot(t, filepath.Join(t.TempDir(), "context"))
}

// openRoot opens the context root at dir through the production Open and closes it when the
// test ends (before the temp dir goes: Windows deletes no open file). A second Root on the
// same dir stands in for another process.
func openRoot(t testing.TB, dir string) *Root {
	t.Helper()
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// reopen closes r and opens its directory again through the production Open, the way the
// next process would; the new Root is closed when the test ends.
func reopen(t testing.TB, r *Root) *Root {
	t.Helper()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return openRoot(t, r.Dir())
}

// holdWriteLock takes the write lock of the database at path on a second connection (opened
// with params, as otherConn) with BEGIN IMMEDIATE and returns that connection (ROLLBACK on it
// lets go); the connection is closed when the test ends.
func holdWriteLock(t testing.TB, path, params string) *sql.Conn {
	t.Helper()
	conn, err := otherConn(t, path, params).Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// otherConn opens a second, independent connection to a database file, the way the MCP tools
// (params "mode=ro") or another writer would.
func otherConn(t testing.TB, path, params string) *sql.DB {
	t.Helper()
	dsn := "file:" + path
	if params != "" {
		dsn += "?" + params
	}
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// buildFixture creates a database at path from a testdata SQL file, without the store's code.
func buildFixture(t testing.TB, path, sqlFile string) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("testdata", sqlFile))
	if err != nil {
		t.Fatal(err)
	}
	buildFixtureSQL(t, path, string(script))
}

func buildFixtureSQL(t testing.TB, path, script string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(script); err != nil {
		t.Fatalf("build fixture %s: %v", path, err)
	}
}

func queryInt(t testing.TB, db *sql.DB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func mustSession(t testing.TB, r *Root, sid string) *DB {
	t.Helper()
	d, err := r.Session(sid)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// writeSessionAt stores rows, written at now (no rows: none), then events, one AddEvent each,
// in sessions/<sid>.db through the writer, failing the test on an error.
func writeSessionAt(t testing.TB, r *Root, sid string, now time.Time, rows []RowWrite, events ...Event) {
	t.Helper()
	d := mustSession(t, r, sid)
	if len(rows) > 0 {
		if _, err := d.SyncRows(rows, now); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range events {
		if err := d.AddEvent(e); err != nil {
			t.Fatal(err)
		}
	}
}

func age(t testing.TB, path string, mtime time.Time) {
	t.Helper()
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// underWine is set by wine_windows_test.go when the tests run under wine (.ci/test-windows).
var underWine bool

// UnderWine is underWine for the tests of package store_test.
func UnderWine() bool { return underWine }

// skipOnWindows skips a test of POSIX file semantics on Windows (and wine), saying why.
func skipOnWindows(t testing.TB, why string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("cannot run on Windows: " + why)
	}
}

// wrongMode reports whether the mode got is not want. Windows keeps no POSIX permission bits
// (os.Chmod sets only the read-only flag): there it logs that modes are not checked and
// reports false.
func wrongMode(t testing.TB, got, want os.FileMode) bool {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Logf("mode %v not checked against %v: Windows has no POSIX permission bits", got, want)
		return false
	}
	return got != want
}

func perm(t testing.TB, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}
