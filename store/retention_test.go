package store

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

func writeAged(t *testing.T, path string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	age(t, path, mtime)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestSweepGating(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name    string
		ttlDays int
		stamp   time.Duration // stamp age; 0 means no stamp
		ran     bool
	}{
		{"ttl 0 keeps everything", 0, 0, false},
		{"negative ttl keeps everything", -1, 0, false},
		{"no stamp", 30, 0, true},
		{"stamp 25 h old", 30, 25 * time.Hour, true},
		{"stamp 23 h old", 30, 23 * time.Hour, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRoot(t)
			stamp := filepath.Join(r.Dir(), ".ttl-stamp")
			if c.stamp != 0 {
				writeAged(t, stamp, now.Add(-c.stamp))
			}
			old := filepath.Join(r.Dir(), "sessions", "old.json")
			writeAged(t, old, now.AddDate(0, 0, -100))
			rep, err := r.Sweep(c.ttlDays, now)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Ran != c.ran || exists(old) == c.ran {
				t.Errorf("ran %v, old session exists %v; want ran %v", rep.Ran, exists(old), c.ran)
			}
			fi, err := os.Stat(stamp)
			switch {
			case c.ran && (err != nil || !fi.ModTime().Equal(now)):
				t.Errorf("stamp not touched to now: %v %v", fi, err)
			case !c.ran && c.stamp == 0 && err == nil:
				t.Error("stamp created without a sweep")
			}
			if c.ran {
				if p := perm(t, stamp); c.stamp == 0 && wrongMode(t, p, 0o600) {
					t.Errorf("stamp mode %o", p)
				}
			}
		})
	}
}

func TestSweepSessions(t *testing.T) {
	skipOnWindows(t, "the blob pass reads the 1-byte .db files as \"not a database\" here, while Linux reads them as empty; not yet looked into")
	now := time.Now()
	r := newRoot(t)
	sessions := filepath.Join(r.Dir(), "sessions")
	oldT := now.AddDate(0, 0, -31)
	files := map[string]time.Time{
		// every suffix of an expired session
		"old.db": oldT, "old.db-wal": oldT, "old.db-shm": oldT, "old.json": oldT, "old.trim.json": oldT, "old.force": oldT, "old.log.jsonl": oldT,
		// the newest file decides: kept
		"mixed.db": oldT, "mixed.json": now.AddDate(0, 0, -1),
		// .trim.json belongs to "x", not to a session "x.trim": x is kept whole
		"x.db": now, "x.trim.json": oldT,
		// inside the TTL
		"young.json": now.AddDate(0, 0, -29),
		// only a legacy handoff log
		"legacy.log.jsonl": oldT,
		// a dot id's database named before the escape rule (sid_file.go): a session
		".hidden.db": oldT,
		// left alone: other names
		"notes.txt": oldT, ".ttl-stamp-not": oldT, "weird.db.bak": oldT,
	}
	for name, mt := range files {
		writeAged(t, filepath.Join(sessions, name), mt)
	}
	if err := os.Mkdir(filepath.Join(sessions, "dir.db"), 0o700); err != nil {
		t.Fatal(err)
	}
	age(t, filepath.Join(sessions, "dir.db"), oldT)

	rep, err := r.Sweep(30, now)
	// The remaining 1-byte .db files read as empty databases: no blob references, no error.
	if rep.BlobPassSkipped || err != nil {
		t.Errorf("blob pass skipped %v, err %v", rep.BlobPassSkipped, err)
	}
	if want := []string{".hidden", "legacy", "old"}; !reflect.DeepEqual(rep.SessionsDeleted, want) {
		t.Errorf("deleted %v, want %v", rep.SessionsDeleted, want)
	}
	ents, _ := os.ReadDir(sessions)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	sort.Strings(left)
	want := []string{".ttl-stamp-not", "dir.db", "mixed.db", "mixed.json", "notes.txt", "weird.db.bak", "x.db", "x.trim.json", "young.json"}
	if !reflect.DeepEqual(left, want) {
		t.Errorf("left\n %v\nwant\n %v", left, want)
	}
}

func TestSweepClosesCachedWriter(t *testing.T) {
	now := time.Now()
	r := newRoot(t)
	d := mustSession(t, r, "gone")
	if _, err := d.SyncRows(chain([4]string{"user", "text", "", "x"}), now); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{".db", ".db-wal", ".db-shm"} {
		age(t, d.Path()[:len(d.Path())-3]+s, now.AddDate(0, 0, -40))
	}
	rep, err := r.Sweep(30, now)
	if err != nil || !reflect.DeepEqual(rep.SessionsDeleted, []string{"gone"}) {
		t.Fatalf("Sweep = %+v, %v", rep, err)
	}
	for _, s := range []string{".db", ".db-wal", ".db-shm"} {
		if p := filepath.Join(r.Dir(), "sessions", "gone"+s); exists(p) {
			t.Errorf("%s survived", p)
		}
	}
	if _, err := d.SyncRows(chain([4]string{"user", "text", "", "y"}), now); !errors.Is(err, errClosed) {
		t.Errorf("cached writer still usable: %v", err)
	}
	d2 := mustSession(t, r, "gone")
	if res, err := d2.SyncRows(chain([4]string{"user", "text", "", "x"}), now); err != nil || res.Inserted != 1 {
		t.Errorf("new session after sweep: %+v, %v", res, err)
	}
}

func TestSweepBlobs(t *testing.T) {
	now := time.Now()
	setup := func(t *testing.T) (*Root, map[string]string) {
		r := newRoot(t)
		ids := map[string]string{}
		for _, name := range []string{"kept", "orphaned", "unreferenced", "fresh"} {
			id, err := r.WriteBlob("blob " + name)
			if err != nil {
				t.Fatal(err)
			}
			ids[name] = id
			mt := now.AddDate(0, 0, -60)
			if name == "fresh" {
				mt = now.Add(-10 * time.Minute) // written just now, its row not committed yet
			}
			age(t, filepath.Join(r.Dir(), "blobs", id+".txt"), mt)
		}
		for sid, blob := range map[string]string{"live": "kept", "expired": "orphaned"} {
			d := mustSession(t, r, sid)
			rows := chain([4]string{"tool", "tool_result", "Read", "text of " + blob})
			rows[0].BlobID = ids[blob]
			if _, err := d.SyncRows(rows, now); err != nil {
				t.Fatal(err)
			}
		}
		// Writers closed as in a fresh process; "expired" aged out.
		r2 := reopen(t, r)
		age(t, filepath.Join(r.Dir(), "sessions", "expired.db"), now.AddDate(0, 0, -40))
		writeAged(t, filepath.Join(r.Dir(), "blobs", "README"), now.AddDate(0, 0, -60))
		return r2, ids
	}
	blobExists := func(r *Root, id string) bool { return exists(filepath.Join(r.Dir(), "blobs", id+".txt")) }

	t.Run("orphans deleted", func(t *testing.T) {
		r, ids := setup(t)
		rep, err := r.Sweep(30, now)
		if err != nil {
			t.Fatal(err)
		}
		if rep.BlobPassSkipped || rep.BlobsDeleted != 2 || !reflect.DeepEqual(rep.SessionsDeleted, []string{"expired"}) {
			t.Errorf("report %+v", rep)
		}
		for name, want := range map[string]bool{"kept": true, "orphaned": false, "unreferenced": false, "fresh": true} {
			if got := blobExists(r, ids[name]); got != want {
				t.Errorf("blob %s exists %v, want %v", name, got, want)
			}
		}
		if !exists(filepath.Join(r.Dir(), "blobs", "README")) {
			t.Error("a non-blob file was deleted")
		}
	})
	for _, c := range []struct {
		name    string
		content func(t *testing.T, path string)
	}{
		{"unreadable database", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(strings.Repeat("this is not a database. ", 200)), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"newer schema", func(t *testing.T, path string) {
			buildFixtureSQL(t, path, "CREATE TABLE messages (blob_id TEXT); PRAGMA user_version = 4;")
		}},
	} {
		t.Run("skipped: "+c.name, func(t *testing.T) {
			r, ids := setup(t)
			c.content(t, filepath.Join(r.Dir(), "sessions", "bad.db"))
			rep, err := r.Sweep(30, now)
			if err == nil || !rep.BlobPassSkipped || rep.BlobsDeleted != 0 {
				t.Errorf("report %+v, %v; want the blob pass skipped", rep, err)
			}
			for _, name := range []string{"kept", "orphaned", "unreferenced", "fresh"} {
				if !blobExists(r, ids[name]) {
					t.Errorf("blob %s deleted although the pass was skipped", name)
				}
			}
			if !reflect.DeepEqual(rep.SessionsDeleted, []string{"expired"}) {
				t.Errorf("sessions deleted %v", rep.SessionsDeleted)
			}
		})
	}
}

// TestSweepDoesNotKeepSessionsAlive: the blob pass reads every remaining database; that read
// must not create or touch files whose mtimes decide retention, or no session would ever
// expire.
func TestSweepDoesNotKeepSessionsAlive(t *testing.T) {
	now := time.Now()
	t.Run("closed writer", func(t *testing.T) {
		r := newRoot(t)
		d := mustSession(t, r, "s")
		rows := chain([4]string{"tool", "tool_result", "Read", "x"})
		rows[0].BlobID = "0123456789abcdef"
		if _, err := d.SyncRows(rows, now); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		writeAged(t, filepath.Join(r.Dir(), "blobs", "0123456789abcdef.txt"), now.AddDate(0, 0, -10))
		age(t, d.Path(), now.AddDate(0, 0, -10))
		r2 := openRoot(t, r.Dir())
		rep, err := r2.Sweep(30, now)
		if err != nil || len(rep.SessionsDeleted) != 0 || rep.BlobsDeleted != 0 || rep.BlobPassSkipped {
			t.Fatalf("first sweep: %+v, %v", rep, err)
		}
		if got := sessionNames(t, r2); !equalStrings(got, []string{"s.db"}) {
			t.Errorf("the blob pass created files: %v", got)
		}
		// 21 days later the session is 31 days old and goes, and its blob with it.
		later := now.AddDate(0, 0, 21)
		rep, err = r2.Sweep(30, later)
		if err != nil || !reflect.DeepEqual(rep.SessionsDeleted, []string{"s"}) || rep.BlobsDeleted != 1 {
			t.Errorf("second sweep: %+v, %v; want s and its blob deleted", rep, err)
		}
	})
	t.Run("open writer elsewhere", func(t *testing.T) {
		r := newRoot(t)
		d := mustSession(t, r, "s") // stays open, as in another process
		if _, err := d.SyncRows(chain([4]string{"user", "text", "", "x"}), now); err != nil {
			t.Fatal(err)
		}
		old := now.AddDate(0, 0, -10).Truncate(time.Second)
		for _, s := range []string{"", "-wal", "-shm"} {
			age(t, d.Path()+s, old)
		}
		r2 := openRoot(t, r.Dir())
		if rep, err := r2.Sweep(30, now); err != nil || rep.BlobPassSkipped {
			t.Fatalf("sweep: %+v, %v", rep, err)
		}
		for _, s := range []string{"", "-wal", "-shm"} {
			fi, err := os.Stat(d.Path() + s)
			if err != nil || !fi.ModTime().Equal(old) {
				t.Errorf("s.db%s mtime %v (%v), want %v", s, fi.ModTime(), err, old)
			}
		}
	})
	t.Run("crashed writer", func(t *testing.T) {
		// A writer that died leaves db, -wal and a -shm the next reader must rebuild (here:
		// zeroed), which writes to -shm.
		r := newRoot(t)
		d := mustSession(t, r, "live")
		if _, err := d.SyncRows(chain([4]string{"user", "text", "", "x"}), now); err != nil {
			t.Fatal(err)
		}
		crashed := filepath.Join(r.Dir(), "sessions", "crashed.db")
		for _, s := range []string{"", "-wal"} {
			b, err := os.ReadFile(d.Path() + s)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(crashed+s, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(crashed+"-shm", make([]byte, 32768), 0o600); err != nil {
			t.Fatal(err)
		}
		old := now.AddDate(0, 0, -10).Truncate(time.Second)
		for _, s := range []string{"", "-wal", "-shm"} {
			age(t, crashed+s, old)
		}
		if rep, err := r.Sweep(30, now); err != nil || rep.BlobPassSkipped {
			t.Fatalf("sweep: %+v, %v", rep, err)
		}
		for _, s := range []string{"", "-wal", "-shm"} {
			fi, err := os.Stat(crashed + s)
			if err != nil || !fi.ModTime().Equal(old) {
				t.Errorf("crashed.db%s mtime %v (%v), want %v", s, fi.ModTime(), err, old)
			}
		}
	})
}
