package store

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A writer that connected while its file was immutable (chattr +i: SQLite opens it read-only)
// writes again once the file is writable: the read-only error parks it, and the next call
// connects read-write. Before, every write failed until the writer sat idle for writerIdle.
func TestReadOnlyWriterReconnectsOnceWritable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: chattr +i needs root")
	}
	chattr, err := exec.LookPath("chattr")
	if err != nil {
		t.Skipf("skipping: chattr is not installed (e2fsprogs): %v", err)
	}
	r := newRoot(t)
	sid := "ses-immutable"
	d := mustSession(t, r, sid)
	if _, err := d.SyncRows(chainRows(t, "t", []string{"user one"}), time.Now()); err != nil {
		t.Fatal(err)
	}
	if !d.park() {
		t.Fatal("park: the writer was not connected")
	}
	path := filepath.Join(r.Dir(), "sessions", sid+".db")
	if out, err := exec.Command(chattr, "+i", path).CombinedOutput(); err != nil {
		t.Skipf("skipping: chattr +i on the temp dir's file system: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command(chattr, "-i", path).Run() })
	rows := chainRows(t, "t", []string{"user one", "user two"})
	if _, err := d.SyncRows(rows, time.Now()); err == nil {
		t.Fatal("write to the immutable file succeeded")
	}
	if out, err := exec.Command(chattr, "-i", path).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v %s", err, out)
	}
	if res, err := d.SyncRows(rows, time.Now()); err != nil || res.Inserted != 1 {
		t.Fatalf("write once writable: %+v, %v; want the one new row", res, err)
	}
}
