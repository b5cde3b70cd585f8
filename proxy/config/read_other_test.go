//go:build !windows

package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
