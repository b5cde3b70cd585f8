package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReadErrorKinds builds each condition a session database can be unreadable in and checks
// the kind OpenReader or a read through it reports, from SQLite result codes and fs errors.
func TestReadErrorKinds(t *testing.T) {
	// read opens sid and searches it, returning the first error.
	read := func(r *Root, sid string) error {
		rd, err := r.OpenReader(sid)
		if err != nil {
			return err
		}
		defer rd.Close()
		_, err = rd.Search(context.Background(), SearchOptions{Query: "row"})
		return err
	}
	sessions := func(r *Root) string { return filepath.Join(r.Dir(), "sessions") }
	cases := []struct {
		name  string
		setup func(t *testing.T, r *Root) // makes sessions/s.db unreadable
		want  ReadFailure
		hint  string
	}{
		{"missing", func(t *testing.T, r *Root) {}, ReadMissing, ""},
		{"no schema", func(t *testing.T, r *Root) {
			if err := os.WriteFile(filepath.Join(sessions(r), "s.db"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, ReadNoSchema, ""},
		{"newer schema", func(t *testing.T, r *Root) {
			buildFixtureSQL(t, filepath.Join(sessions(r), "s.db"), "CREATE TABLE x (a); PRAGMA user_version = 9;")
		}, ReadNewerSchema, "update smarter-compact to read it"},
		{"not a database", func(t *testing.T, r *Root) {
			if err := os.WriteFile(filepath.Join(sessions(r), "s.db"), []byte("this is not a database, just text that is long enough"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, ReadNotADatabase, "move the file away or delete it"},
		{"corrupt", func(t *testing.T, r *Root) {
			// A real session whose pages after the first are overwritten: the header and
			// schema read, the rows do not.
			var rows []RowWrite
			prev := ""
			for i := range 400 {
				text := fmt.Sprintf("row %d with enough text to fill pages %0200d", i, i)
				fp := Fingerprint(prev, "user", "text", "", text)
				rows = append(rows, RowWrite{Fingerprint: fp, Thread: "t", Role: "user", Kind: "text", Text: text, InContext: true})
				prev = fp
			}
			w, err := Open(r.Dir())
			if err != nil {
				t.Fatal(err)
			}
			d, err := w.Session("s")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.SyncRows(rows, time.Now()); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil { // checkpoints: everything is in s.db
				t.Fatal(err)
			}
			path := filepath.Join(sessions(r), "s.db")
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fi, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			junk := make([]byte, fi.Size()-8192)
			for i := range junk {
				junk[i] = 0xA5
			}
			if _, err := f.WriteAt(junk, 8192); err != nil {
				t.Fatal(err)
			}
		}, ReadCorrupt, "move the file away or delete it"},
		{"permission denied", func(t *testing.T, r *Root) {
			skipOnWindows(t, "chmod 000 sets only the read-only flag, which does not stop reading")
			if os.Geteuid() == 0 {
				t.Skip("running as root, which reads a file whatever its mode: chmod 000 cannot make it unreadable")
			}
			buildFixture(t, filepath.Join(sessions(r), "s.db"), "schema_v1.sql")
			path := filepath.Join(sessions(r), "s.db")
			if err := os.Chmod(path, 0); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(path, 0o600) })
		}, ReadPermission, "give your user read access to the session files"},
		{"locked", func(t *testing.T, r *Root) {
			// Another process holds the database in exclusive locking mode, as a writer
			// outside the store might: the reader's 1 s busy timeout runs out.
			w, err := Open(r.Dir())
			if err != nil {
				t.Fatal(err)
			}
			syncTestRows(t, mustSession(t, w, "s"), []testRow{{thread: "a", role: "user", text: "row one"}})
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(sessions(r), "s.db")
			db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(1)
			t.Cleanup(func() { _ = db.Close() })
			for _, q := range []string{"PRAGMA locking_mode = EXCLUSIVE", "BEGIN EXCLUSIVE", "CREATE TABLE lock_holder (a)"} {
				if _, err := db.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
		}, ReadLocked, "try again in a moment"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRoot(t)
			c.setup(t, r)
			err := read(r, "s")
			re := AsReadError(err)
			if re == nil {
				t.Fatalf("error %v (%T) is not a *ReadError", err, err)
			}
			if re.Kind != c.want || re.Hint != c.hint {
				t.Errorf("kind %v hint %q, want %v %q (%v)", re.Kind, re.Hint, c.want, c.hint, err)
			}
			if re.Path != filepath.Join(sessions(r), "s.db") {
				t.Errorf("path %q", re.Path)
			}
			if re.Error() != re.Err.Error() || !errors.Is(err, re.Err) {
				t.Errorf("Error %q does not keep the message of %v", re.Error(), re.Err)
			}
		})
	}
}
