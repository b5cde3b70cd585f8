package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "context")
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Dir() != dir {
		t.Errorf("Dir = %s, want %s", r.Dir(), dir)
	}
	for _, d := range []string{dir, filepath.Join(dir, "sessions"), filepath.Join(dir, "blobs")} {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() {
			t.Fatalf("%s: %v", d, err)
		}
		if p := fi.Mode().Perm(); wrongMode(t, p, 0o700) {
			t.Errorf("%s mode %o, want 700", d, p)
		}
	}
	// Opening again is fine; the directories exist.
	r2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	r2.Close()

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(file); err == nil {
		t.Error("Open on a regular file succeeded")
	}
	if _, err := Open(""); err == nil {
		t.Error("Open(\"\") succeeded")
	}
}

func TestSessionCache(t *testing.T) {
	r := newRoot(t)
	a := mustSession(t, r, "a")
	if again := mustSession(t, r, "a"); again != a {
		t.Error("Session returned a new *DB for a cached, unchanged file")
	}
	if b := mustSession(t, r, "b"); b == a {
		t.Error("two sessions share one *DB")
	}
	for _, sid := range []string{"", "a/b", "../a", " a", "😀"} {
		if _, err := r.Session(sid); err == nil {
			t.Errorf("Session(%q) accepted an unsanitized id", sid)
		}
	}
	if fi, err := os.Stat(filepath.Join(r.Dir(), "sessions", "a.db")); err != nil || wrongMode(t, fi.Mode().Perm(), 0o600) {
		t.Errorf("a.db: %v %v", fi, err)
	}
}

func TestSessionReopensDeletedFile(t *testing.T) {
	skipOnWindows(t, "a file SQLite holds open cannot be deleted, replaced or overwritten here (sharing violation, access denied, user-mapped section): retry_test.go covers what the store does about it")
	for _, c := range []struct {
		name     string
		suffixes []string
	}{
		{"all files deleted", []string{".db", ".db-wal", ".db-shm"}},
		// The stale -wal and -shm must not be replayed onto the new file.
		{"only the db deleted", []string{".db"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRoot(t)
			old := mustSession(t, r, "s")
			rows := chain([4]string{"user", "text", "", "before delete"})
			if _, err := old.SyncRows(rows, t0); err != nil {
				t.Fatal(err)
			}
			for _, suffix := range c.suffixes {
				if err := os.Remove(filepath.Join(r.Dir(), "sessions", "s"+suffix)); err != nil {
					t.Fatal(err)
				}
			}
			d := mustSession(t, r, "s")
			if d == old {
				t.Fatal("Session kept the writer of a deleted file")
			}
			if _, err := old.SyncRows(rows, t0); !errors.Is(err, errClosed) {
				t.Errorf("old writer: %v, want closed", err)
			}
			// The new file is a fresh database: the row is stored again.
			if res, err := d.SyncRows(rows, t0); err != nil || res != (SyncResult{Inserted: 1}) {
				t.Errorf("SyncRows on the reopened file = %+v, %v", res, err)
			}
			ro := otherConn(t, d.Path(), "mode=ro")
			if v := queryInt(t, ro, "PRAGMA user_version"); v != 3 {
				t.Errorf("user_version = %d", v)
			}
			var check string
			if err := ro.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
				t.Errorf("integrity_check = %q, %v", check, err)
			}
			if n := queryInt(t, ro, "SELECT count(*) FROM messages"); n != 1 {
				t.Errorf("messages = %d, want 1", n)
			}
		})
	}
}

func TestSessionReopensReplacedFile(t *testing.T) {
	skipOnWindows(t, "a file SQLite holds open cannot be deleted, replaced or overwritten here (sharing violation, access denied, user-mapped section): retry_test.go covers what the store does about it")
	r := newRoot(t)
	old := mustSession(t, r, "s")
	if _, err := old.SyncRows(chain([4]string{"user", "text", "", "mine"}), t0); err != nil {
		t.Fatal(err)
	}
	// Another database (a v1 file) renamed over ours.
	repl := filepath.Join(r.Dir(), "sessions", ".replacement")
	buildFixture(t, repl, "schema_v1.sql")
	if err := os.Rename(repl, old.Path()); err != nil {
		t.Fatal(err)
	}
	d := mustSession(t, r, "s")
	if d == old {
		t.Fatal("Session kept the writer of a replaced file")
	}
	// The index comes from the replacement: its row is known, ours is not.
	res, err := d.SyncRows([]RowWrite{{Fingerprint: "ef4ec80451390e48c7d9345e3d025634", Role: "user", Kind: "text", Text: "x", InContext: false}}, t0)
	if err != nil || res != (SyncResult{}) {
		t.Errorf("SyncRows of the replacement's row = %+v, %v", res, err)
	}
	if v := queryInt(t, otherConn(t, d.Path(), "mode=ro"), "PRAGMA user_version"); v != 3 {
		t.Errorf("replacement not migrated: user_version %d", v)
	}
}

func TestRootClose(t *testing.T) {
	r, err := Open(filepath.Join(t.TempDir(), "context"))
	if err != nil {
		t.Fatal(err)
	}
	d := mustSession(t, r, "s")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.SyncRows(chain([4]string{"user", "text", "", "x"}), time.Now()); !errors.Is(err, errClosed) {
		t.Errorf("SyncRows after Close = %v", err)
	}
	if err := d.AddEvent(Event{Kind: "trim", Version: "v"}); !errors.Is(err, errClosed) {
		t.Errorf("AddEvent after Close = %v", err)
	}
	if _, err := r.Session("s"); err == nil {
		t.Error("Session after Close succeeded")
	}
	// Closing the last connection checkpoints and removes the WAL.
	if _, err := os.Stat(d.Path() + "-wal"); !os.IsNotExist(err) {
		t.Errorf("-wal still there after Close: %v", err)
	}
}

// TestOddRootPath: characters that mean something in a SQLite URI (? # %) and spaces in the
// root path still name the right file.
func TestOddRootPath(t *testing.T) {
	skipOnWindows(t, "'?' is not allowed in a Windows file name")
	dir := filepath.Join(t.TempDir(), "a dir?x=1#frag%41", "context")
	r := openRoot(t, dir)
	d := mustSession(t, r, "s")
	if _, err := d.SyncRows(chain([4]string{"user", "text", "", "x"}), t0); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "sessions", "s.db")
	if d.Path() != want {
		t.Errorf("Path = %s, want %s", d.Path(), want)
	}
	fi, err := os.Stat(want)
	if err != nil || fi.Size() == 0 && !exists(want+"-wal") {
		t.Fatalf("database not at %s: %v", want, err)
	}
	ents, _ := os.ReadDir(filepath.Dir(filepath.Dir(dir)))
	if len(ents) != 1 {
		t.Errorf("files created outside the root: %v", ents)
	}
	if got := queryInt(t, otherConn(t, sqliteURI(want, "")[len("file:"):], "mode=ro"), "SELECT count(*) FROM messages"); got != 1 {
		t.Errorf("messages = %d, want 1", got)
	}
}
