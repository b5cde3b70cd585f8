//go:build windows

package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGUILogRotates: the GUI log is appended to below its cap, and a process starting with
// it at the cap begins a new file, keeping the old one as .1 (replacing an older .1).
func TestGUILogRotates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	path := filepath.Join(dir, "smarter-compact.log")
	write := func(max int64, s string) {
		t.Helper()
		f, err := openGUILog(dir, max)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return string(b)
	}
	write(10, "first\n")
	write(10, "second\n") // 6 bytes < 10: appended
	if got := read(path); got != "first\nsecond\n" {
		t.Fatalf("log %q, want both lines appended", got)
	}
	write(10, "third\n") // 13 bytes >= 10: rotated first
	if got, old := read(path), read(path+".1"); got != "third\n" || old != "first\nsecond\n" {
		t.Errorf("after rotation: log %q, .1 %q", got, old)
	}
	write(5, "fourth\n")
	if got, old := read(path), read(path+".1"); got != "fourth\n" || old != "third\n" {
		t.Errorf("second rotation: log %q, .1 %q (want the older .1 replaced)", got, old)
	}
	if _, err := openGUILog(filepath.Join(path, "not-a-dir"), 10); err == nil || !strings.Contains(err.Error(), "log folder") {
		t.Errorf("a folder that cannot be made: %v, want a log folder error", err)
	}
}
