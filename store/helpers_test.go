package store

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// newRoot opens a context root in a fresh temp dir, through the production Open.
func newRoot(t testing.TB) *Root {
	t.Helper()
	r, err := Open(filepath.Join(t.TempDir(), "context"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
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

func age(t testing.TB, path string, mtime time.Time) {
	t.Helper()
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func perm(t testing.TB, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}
