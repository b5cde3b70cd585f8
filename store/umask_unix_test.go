//go:build unix

package store

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestModesIgnoreUmask: with a permissive umask, everything the store creates is still 700 or
// 600 (contract: Location). Not parallel: the umask is process-wide.
func TestModesIgnoreUmask(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)

	dir := filepath.Join(t.TempDir(), "state", "context")
	r := openRoot(t, dir)
	d := mustSession(t, r, "s")
	if _, err := d.SyncRows(chain([4]string{"user", "text", "", "x"}), time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteBlob("blob"); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(Registration{SessionID: "s", Agent: "a", Cwd: "/"}); err != nil {
		t.Fatal(err)
	}
	if err := r.SetForce("s"); err != nil {
		t.Fatal(err)
	}
	if err := r.SaveTrimState("s", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Sweep(30, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(dir), dir, filepath.Join(dir, "sessions"), filepath.Join(dir, "blobs")} {
		if got := perm(t, p); got != 0o700 {
			t.Errorf("%s mode %o, want 700", p, got)
		}
	}
	for _, p := range []string{"sessions/s.db", "sessions/s.db-wal", "sessions/s.db-shm", "sessions/s.json", "sessions/s.force",
		"sessions/s.trim.json", "blobs/" + BlobID("blob") + ".txt", ".ttl-stamp"} {
		if got := perm(t, filepath.Join(dir, p)); got != 0o600 {
			t.Errorf("%s mode %o, want 600", p, got)
		}
	}
}
