package store

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

func TestOpenToOthers(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows modes carry no group or other bits: nothing to find")
	}
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "context")
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	private := filepath.Join(dir, "sessions", "a.db")
	loose := filepath.Join(dir, "sessions", "b.db")
	for p, mode := range map[string]os.FileMode{private: 0o600, loose: 0o644} {
		if err := os.WriteFile(p, nil, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if got := OpenToOthers(dir); !slices.Equal(got, []string{loose + " (644)"}) {
		t.Errorf("OpenToOthers = %q, want only %s (644)", got, loose)
	}
	if err := os.Chmod(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if got := OpenToOthers(dir); !slices.Equal(got, []string{dir + " (750)", loose + " (644)"}) {
		t.Errorf("OpenToOthers after chmod 750 = %q", got)
	}
	if got := OpenToOthers(filepath.Join(dir, "missing")); len(got) != 1 {
		t.Errorf("OpenToOthers(missing) = %q, want the one unreadable entry", got)
	}
}
