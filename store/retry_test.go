package store

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// errSimHeld stands for Windows' sharing violation in the simulated tests.
var errSimHeld = errors.New("simulated: the file is held by another process")

// simHold replaces fsOps for one test (never a parallel one): remove and rename of a path
// in held fail with errSimHeld while held[path] > 0, counting down one per call (-1: for
// ever). It returns the number of waits the retry made.
func simHold(t *testing.T, held map[string]int) *int {
	t.Helper()
	var mu sync.Mutex
	waits := new(int)
	check := func(p string) error {
		mu.Lock()
		defer mu.Unlock()
		n := held[p]
		if n == 0 {
			return nil
		}
		if n > 0 {
			held[p] = n - 1
		}
		return &os.PathError{Op: "remove", Path: p, Err: errSimHeld}
	}
	saved := fsOps
	fsOps = heldOps{
		remove: func(p string) error {
			if err := check(p); err != nil {
				return err
			}
			return os.Remove(p)
		},
		rename: func(from, to string) error {
			if err := check(to); err != nil {
				return err
			}
			return os.Rename(from, to)
		},
		held:  func(err error) bool { return errors.Is(err, errSimHeld) },
		sleep: func(time.Duration) { mu.Lock(); *waits++; mu.Unlock() },
	}
	t.Cleanup(func() { fsOps = saved })
	return waits
}

// expiredSession writes the files of a session last used 40 days before now.
func expiredSession(t *testing.T, r *Root, sid string, now time.Time) []string {
	t.Helper()
	var files []string
	for _, suffix := range []string{".db", ".json", ".trim.json"} {
		p := filepath.Join(r.Dir(), "sessions", sid+suffix)
		writeAged(t, p, now.AddDate(0, 0, -40))
		files = append(files, p)
	}
	return files
}

// TestSweepDefersHeldSession: a session database another process still holds stays whole,
// is reported as deferred (not as an error), and the next Sweep, due at once, deletes it
// once it is let go.
func TestSweepDefersHeldSession(t *testing.T) {
	now := time.Now()
	r := newRoot(t)
	files := expiredSession(t, r, "held", now)
	expiredSession(t, r, "free", now)
	waits := simHold(t, map[string]int{files[0]: -1})

	rep, err := r.Sweep(30, now)
	if err != nil {
		t.Fatalf("a held file failed the sweep: %v", err)
	}
	if !reflect.DeepEqual(rep.SessionsDeleted, []string{"free"}) || !reflect.DeepEqual(rep.Deferred, files[:1]) {
		t.Errorf("deleted %v, deferred %v; want [free] and the held database", rep.SessionsDeleted, rep.Deferred)
	}
	if *waits != len(heldBackoff) {
		t.Errorf("%d retries, want %d", *waits, len(heldBackoff))
	}
	for _, f := range files {
		if !exists(f) {
			t.Errorf("%s was deleted while its database was held: the session is no longer whole", filepath.Base(f))
		}
	}

	simHold(t, nil) // let go: the next remove succeeds
	rep, err = r.Sweep(30, now.Add(time.Minute))
	if err != nil || !rep.Ran || !reflect.DeepEqual(rep.SessionsDeleted, []string{"held"}) || len(rep.Deferred) != 0 {
		t.Fatalf("the next sweep: ran %v, deleted %v, deferred %v, err %v; want it due at once and deleting held", rep.Ran, rep.SessionsDeleted, rep.Deferred, err)
	}
	for _, f := range files {
		if exists(f) {
			t.Errorf("%s is still there", filepath.Base(f))
		}
	}
	rep, _ = r.Sweep(30, now.Add(2*time.Minute))
	if rep.Ran {
		t.Error("a sweep with nothing deferred left the next one due")
	}
}

// TestSweepRetriesHeldBlob: a blob held for a moment is deleted by the retry; one held for
// good is deferred.
func TestSweepRetriesHeldBlob(t *testing.T) {
	now := time.Now()
	r := newRoot(t)
	var blobs []string
	for _, text := range []string{"briefly held", "held for good"} {
		id, err := r.WriteBlob(text)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(r.Dir(), "blobs", id+".txt")
		age(t, p, now.AddDate(0, 0, -2))
		blobs = append(blobs, p)
	}
	waits := simHold(t, map[string]int{blobs[0]: 2, blobs[1]: -1})
	rep, err := r.Sweep(30, now)
	if err != nil {
		t.Fatal(err)
	}
	if rep.BlobsDeleted != 1 || !reflect.DeepEqual(rep.Deferred, blobs[1:]) {
		t.Errorf("blobs deleted %d, deferred %v; want 1 and the one held for good", rep.BlobsDeleted, rep.Deferred)
	}
	if exists(blobs[0]) || !exists(blobs[1]) {
		t.Errorf("briefly held exists %v (want false), held for good exists %v (want true)", exists(blobs[0]), exists(blobs[1]))
	}
	if *waits != 2+len(heldBackoff) {
		t.Errorf("%d waits, want %d", *waits, 2+len(heldBackoff))
	}
}

// TestAtomicWriteOverHeldFile: the trim state written while a reader holds the old file is
// written once the reader lets go; held for good, the write fails with an error, the old
// content is intact and no temp file is left.
func TestAtomicWriteOverHeldFile(t *testing.T) {
	r := newRoot(t)
	path := r.sessionFile("s", ".trim.json")
	if err := r.SaveTrimState("s", []byte("old")); err != nil {
		t.Fatal(err)
	}
	simHold(t, map[string]int{path: 3})
	if err := r.SaveTrimState("s", []byte("new")); err != nil {
		t.Fatalf("write over a briefly held file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("content %q, want new", b)
	}
	simHold(t, map[string]int{path: -1})
	err := r.SaveTrimState("s", []byte("newer"))
	if !errors.Is(err, errSimHeld) {
		t.Errorf("write over a file held for good: %v, want the held error", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("content %q, want the last written (new)", b)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if i := slices.IndexFunc(ents, func(e os.DirEntry) bool { return e.Name()[0] == '.' }); i >= 0 {
		t.Errorf("temp file %s left behind", ents[i].Name())
	}
}

// TestSweepRealHeldFile holds an expired session's database open with a real handle. On
// Windows (and wine) the handle blocks the delete: the session is deferred, then deleted
// after the handle closes. Elsewhere an open file is deleted at once.
func TestSweepRealHeldFile(t *testing.T) {
	now := time.Now()
	r := newRoot(t)
	files := expiredSession(t, r, "s", now)
	f, err := os.Open(files[0]) // Go opens without FILE_SHARE_DELETE on Windows
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := r.Sweep(30, now)
	if err != nil {
		t.Fatalf("sweep with an open database: %v", err)
	}
	if runtime.GOOS != "windows" {
		if !reflect.DeepEqual(rep.SessionsDeleted, []string{"s"}) {
			t.Errorf("deleted %v, want [s]: POSIX deletes open files", rep.SessionsDeleted)
		}
		return
	}
	if len(rep.SessionsDeleted) != 0 || !reflect.DeepEqual(rep.Deferred, files[:1]) {
		t.Fatalf("deleted %v, deferred %v; want the held database deferred", rep.SessionsDeleted, rep.Deferred)
	}
	f.Close()
	rep, err = r.Sweep(30, now.Add(time.Minute))
	if err != nil || !reflect.DeepEqual(rep.SessionsDeleted, []string{"s"}) {
		t.Errorf("after the handle closed: deleted %v, err %v; want [s]", rep.SessionsDeleted, err)
	}
}
