package store

// The store's files are the user's alone: OpenToOthers lists what others could read, and Open
// makes a store left readable by others private again.

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

// A store left readable by others (an older install, a manual mkdir) is made private again.
func TestOpenTightensLoosePermissions(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows file modes carry no group or other bits")
	}
	dir := filepath.Join(t.TempDir(), "context")
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "sessions", "s1.db")
	if err := os.WriteFile(db, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	root := openRoot(t, dir)
	if _, err := root.Session("s1"); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "sessions"): 0o700, db: 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", filepath.Base(path), got, want)
		}
	}
}
