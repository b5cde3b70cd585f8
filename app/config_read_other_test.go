//go:build !windows

package app

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConfigFIFOIsAnError: a named pipe as config.toml is refused at once. Before, the open
// blocked serve forever, waiting for a writer.
func TestConfigFIFOIsAnError(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	err := loadWithin(t, path)
	if err == nil || !strings.Contains(err.Error(), "not a regular file (a named pipe)") {
		t.Fatalf("LoadConfig of a FIFO = %v, want the not-regular error", err)
	}
}

// TestConfigDevZeroIsAnError: config.toml as a link to /dev/zero is refused at once.
// Before, it was read until Go ran out of memory.
func TestConfigDevZeroIsAnError(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skipf("no /dev/zero here: %v", err)
	}
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.Symlink("/dev/zero", path); err != nil {
		t.Fatal(err)
	}
	err := loadWithin(t, path)
	if err == nil || !strings.Contains(err.Error(), "not a regular file (a character device)") {
		t.Fatalf("LoadConfig of /dev/zero = %v, want the not-regular error", err)
	}
}

// TestConfigWatcherRefusesFIFO: the watcher's read of a FIFO put in place of config.toml
// returns at once with the error shown; before, it blocked the state's loop for good.
func TestConfigWatcherRefusesFIFO(t *testing.T) {
	t.Parallel()
	st, path, _ := testState(t, "[context_proxy.agents]\ncodex = false\n", nil)
	st.settle = 0
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { st.poll(); close(done) }()
	select {
	case <-done:
	case <-time.After(hangGuard):
		t.Fatalf("poll of a FIFO config still running after %s", hangGuard)
	}
	if msg := st.State().ConfigError; !strings.Contains(msg, "not a regular file (a named pipe)") {
		t.Fatalf("ConfigError = %q, want the not-regular error", msg)
	}
}
