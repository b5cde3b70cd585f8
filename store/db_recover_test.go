package store

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A session database that is not a database, or whose pages are corrupt, is moved aside to
// sessions/<sid>.db.corrupt-<time> with its bytes kept, a fresh database takes its place and
// takes the rows of the next write, a fail_open event says so, the hook hears of it, and the
// retention sweep's grouping leaves the moved file alone.
func TestBrokenSessionDBIsMovedAsideAndAFreshOneTakesTheRows(t *testing.T) {
	for _, tc := range []struct {
		name, kind string
		breakIt    func(t *testing.T, path string)
	}{
		{"not a database", "store_not_a_database", func(t *testing.T, path string) {
			if err := os.WriteFile(path, bytes.Repeat([]byte("this is not sqlite\n"), 300), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"corrupt pages", "store_corrupt", func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) < 3*4096 {
				t.Fatalf("fixture database is %d bytes; want several pages", len(b))
			}
			// keep the 100-byte header valid and scribble over the schema page and the next
			copy(b[100:], bytes.Repeat([]byte{0xa5}, 2*4096))
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRoot(t)
			sid := "ses-broken"
			d := mustSession(t, r, sid)
			if _, err := d.SyncRows(chainRows(t, "t", []string{"user text before", "assistant text reply before"}), time.Now()); err != nil {
				t.Fatal(err)
			}
			r = reopen(t, r) // closes the writer: the file is whole on disk, WAL checkpointed
			path := filepath.Join(r.Dir(), "sessions", sid+".db")
			tc.breakIt(t, path)
			broken, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var heard []Recovery
			r.SetOnRecovery(func(rc Recovery) { mu.Lock(); heard = append(heard, rc); mu.Unlock() })

			d = mustSession(t, r, sid)
			res, err := d.SyncRows(chainRows(t, "t", []string{"user text after", "assistant text second"}), time.Now())
			if err != nil {
				t.Fatalf("write after recovery: %v", err)
			}
			if res.Inserted != 2 {
				t.Fatalf("fresh database took %d rows, want 2", res.Inserted)
			}
			moved, err := filepath.Glob(path + ".corrupt-*")
			if err != nil || len(moved) != 1 {
				t.Fatalf("moved-aside files %v (%v), want one %s.corrupt-<time>", moved, err, filepath.Base(path))
			}
			if got, _ := os.ReadFile(moved[0]); !bytes.Equal(got, broken) {
				t.Fatalf("the moved file does not hold the broken bytes (%d vs %d bytes)", len(got), len(broken))
			}
			if _, _, ok := sessionSuffix(filepath.Base(moved[0])); ok {
				t.Fatalf("retention would group %s with a session", filepath.Base(moved[0]))
			}
			db := otherConn(t, path, "mode=ro")
			if n := queryInt(t, db, "SELECT count(*) FROM messages"); n != 2 {
				t.Fatalf("fresh database holds %d rows, want 2", n)
			}
			if n := queryInt(t, db, "SELECT count(*) FROM events WHERE kind = 'fail_open' AND error = ?", tc.kind); n != 1 {
				t.Fatalf("%d fail_open events of %s, want 1", n, tc.kind)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(heard) != 1 || heard[0].SID != sid || heard[0].MovedTo != moved[0] || !isBroken(heard[0].Cause) {
				t.Fatalf("recovery hook heard %+v", heard)
			}
		})
	}
}

// TestSessionDBThatBreaksWhileOpenIsRecoveredOnTheNextSession: garbage written over the file
// of an open session, its writer parked (the next write connects again to the broken file) or
// still connected (its -wal and -shm still there). The next write says not-a-database and the
// next Root.Session moves the file aside. The connected case failed before checkHeader: the
// write went into the WAL without an error and nothing was moved aside.
func TestSessionDBThatBreaksWhileOpenIsRecoveredOnTheNextSession(t *testing.T) {
	for _, park := range []bool{true, false} {
		t.Run(map[bool]string{true: "parked", false: "connected"}[park], func(t *testing.T) {
			r := newRoot(t)
			sid := "ses-breaks-later"
			d := mustSession(t, r, sid)
			if _, err := d.SyncRows(chainRows(t, "t", []string{"user one"}), time.Now()); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(r.Dir(), "sessions", sid+".db")
			if park {
				d.mu.Lock()
				_ = d.disconnect() // as if parked; the next write connects again to the broken file
				d.mu.Unlock()
				for _, s := range []string{"-wal", "-shm"} {
					_ = os.Remove(path + s)
				}
			}
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte(strings.Repeat("garbage!", 512)), 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if _, err := d.SyncRows(chainRows(t, "t", []string{"user one", "user two"}), time.Now()); err == nil || !isBroken(err) {
				t.Fatalf("write to the broken file: %v, want SQLite's not-a-database error", err)
			}
			d2 := mustSession(t, r, sid)
			if d2 == d {
				t.Fatal("Root.Session returned the broken writer again")
			}
			if res, err := d2.SyncRows(chainRows(t, "t", []string{"user one", "user two"}), time.Now()); err != nil || res.Inserted != 2 {
				t.Fatalf("write to the fresh database: %+v, %v", res, err)
			}
			if moved, _ := filepath.Glob(path + ".corrupt-*"); len(moved) != 1 {
				t.Fatalf("moved-aside files %v, want one", moved)
			}
		})
	}
}

// chainRows chains texts as rows of one thread ("role text..." picks the role).
func chainRows(t testing.TB, thread string, texts []string) []RowWrite {
	t.Helper()
	prev := ""
	out := make([]RowWrite, 0, len(texts))
	for _, s := range texts {
		role, text, _ := strings.Cut(s, " ")
		fp := Fingerprint(prev, role, "text", "", text)
		out = append(out, RowWrite{Fingerprint: fp, Thread: thread, Role: role, Kind: "text", Text: text, InContext: true})
		prev = fp
	}
	return out
}
