package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of size (mount -o size=…) on a new temp dir and unmounts it when
// the test ends. It skips, saying why, when the test does not run as root or the kernel
// refuses the mount (a container without CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting a tmpfs needs root (CI runs the tests as root)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("skipping: mount -t tmpfs -o size=%s: %v", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// bigRows returns n rows of about size bytes each, fingerprints unique to tag.
func bigRows(tag string, n, size int) []RowWrite {
	rows := make([]RowWrite, n)
	for i := range rows {
		text := fmt.Sprintf("%s row %d: ", tag, i) + strings.Repeat(fmt.Sprintf("%x", i*7919+len(tag)), size/4)
		rows[i] = RowWrite{Fingerprint: fmt.Sprintf("%032x", i+len(tag)*1000), Thread: "t", Role: "user", Kind: "text", Text: text, InContext: true}
	}
	return rows
}

// fill writes a file into dir until the file system is full and returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 16<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			return path
		}
	}
}

// TestHealthDiskFull: with the store on a full 2 MiB tmpfs, a row write fails with a
// *WriteError of class disk_full that announces once, the record (in memory and in
// health.json, written in place) holds it with what to do, and freeing space resolves it.
func TestHealthDiskFull(t *testing.T) {
	mnt := mountTmpfs(t, "2m")
	r := openRoot(t, filepath.Join(mnt, "context"))
	if err := r.KeepHealth(); err != nil {
		t.Fatal(err)
	}
	db, err := r.Session("full-disk")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := db.SyncRows(bigRows("a", 2, 1000), now); err != nil {
		t.Fatalf("a write with room: %v", err)
	}
	filler := fill(t, mnt)

	_, err = db.SyncRows(bigRows("b", 8, 64<<10), now)
	we := AsWriteError(err)
	if we == nil || we.Class != "disk_full" || !we.Announce || we.Session != "full-disk" {
		t.Fatalf("the write on a full disk: %v (%+v), want a *WriteError of class disk_full that announces", err, we)
	}
	if !strings.Contains(we.Hint, "is full: free space") {
		t.Errorf("hint %q does not say what to do", we.Hint)
	}
	_, err = db.SyncRows(bigRows("c", 8, 64<<10), now)
	if we := AsWriteError(err); we == nil || we.Class != "disk_full" || we.Announce {
		t.Fatalf("the second write on a full disk: %v (%+v), want disk_full, not announced again", err, we)
	}
	// an event of the same session fails the same way and is counted
	evErr := db.AddEvent(Event{Kind: "fail_open", Version: "proxy:test", Location: "x.go:1", Error: "parse"})
	t.Logf("the event on the full disk: %v", evErr)

	snap := r.Health().Snapshot()
	sw := snap.Kind(HealthStoreWrite)
	if sw.Count < 2 || sw.Active != 1 || sw.Entries[0].Key != "full-disk" || sw.Entries[0].Class != "disk_full" {
		t.Fatalf("the health record: %+v", sw)
	}
	if err := r.health.file.save(); err != nil {
		t.Fatalf("health.json on the full disk: %v (it should be written in place)", err)
	}
	saved, err := LoadHealth(r.Dir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := saved.Kind(HealthStoreWrite); got.Count != sw.Count || got.Active != 1 {
		t.Errorf("health.json holds %+v, want the %d failures", got, sw.Count)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SyncRows(bigRows("d", 2, 1000), now); err != nil {
		t.Fatalf("a write after space came back: %v", err)
	}
	if s := r.Health().Snapshot(); s.Active != 0 {
		t.Errorf("after a successful write the record still has %d active sources: %+v", s.Active, s.Kind(HealthStoreWrite))
	}
}

// TestHealthReadOnly: a store on a read-only file system (a read-only bind mount of a
// store that has a session) fails the session's open and a new session's create with class
// read_only, each hint naming its database file, each announced.
func TestHealthReadOnly(t *testing.T) {
	mnt := mountTmpfs(t, "4m")
	r, err := Open(filepath.Join(mnt, "context"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := r.Session("read-only")
	if err == nil {
		_, err = db.SyncRows(bigRows("a", 1, 100), time.Now())
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ro := t.TempDir()
	if err := syscall.Mount(mnt, ro, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("skipping: bind mount: %v", err)
	}
	defer syscall.Unmount(ro, syscall.MNT_DETACH)
	if err := syscall.Mount("", ro, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("skipping: remount the bind mount read-only: %v", err)
	}
	r, err = Open(filepath.Join(ro, "context"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, sid := range []string{"read-only", "read-only-new"} {
		_, err = r.Session(sid)
		we := AsWriteError(err)
		if we == nil || we.Class != "read_only" || !we.Announce || !strings.Contains(we.Hint, filepath.Join("sessions", sid+".db")) {
			t.Fatalf("session %s on a read-only file system: %v (%+v), want an announced read_only naming the database", sid, err, we)
		}
		t.Logf("%s: %v; hint: %s", sid, err, we.Hint)
	}
	if sw := r.Health().Snapshot().Kind(HealthStoreWrite); sw.Active != 2 {
		t.Errorf("the record: %+v, want both sessions active", sw)
	}
}
