//go:build !windows

package app

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

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
