package installer

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := ReadToken(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadToken before serve made one = %v, want fs.ErrNotExist", err)
	}
	tok, err := EnsureToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hex.DecodeString(tok); err != nil || len(tok) != 64 {
		t.Fatalf("token %q: want 64 hex characters", tok)
	}
	path := filepath.Join(dir, "smarter-compact", "api-token")
	if runtime.GOOS != "windows" {
		fi, _ := os.Stat(path)
		di, _ := os.Stat(filepath.Dir(path))
		if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
			t.Errorf("modes: file %o, dir %o; want 600 and 700", fi.Mode().Perm(), di.Mode().Perm())
		}
	}
	again, err := EnsureToken(dir)
	if err != nil || again != tok {
		t.Errorf("second EnsureToken = %q, %v; want the same token", again, err)
	}
	if got, err := ReadToken(dir); err != nil || got != tok {
		t.Errorf("ReadToken = %q, %v; want the token", got, err)
	}
	other, err := EnsureToken(t.TempDir())
	if err != nil || other == tok {
		t.Errorf("another install's token = %q, %v: want a different one", other, err)
	}

	if runtime.GOOS != "windows" {
		// A token open to others is tightened.
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := EnsureToken(dir); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Errorf("mode after EnsureToken %o, want 600", fi.Mode().Perm())
		}
	}
	// A file that does not hold a token: ReadToken says so, EnsureToken replaces it.
	if err := os.WriteFile(path, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadToken(dir); err == nil || !strings.Contains(err.Error(), "restart the service") {
		t.Errorf("ReadToken of a bad file = %v", err)
	}
	fresh, err := EnsureToken(dir)
	if err != nil || fresh == tok || len(fresh) != 64 {
		t.Errorf("EnsureToken over a bad file = %q, %v; want a new token", fresh, err)
	}
	if _, err := EnsureToken(""); err == nil || !strings.Contains(err.Error(), "config directory") {
		t.Errorf("EnsureToken without a config dir = %v", err)
	}
}
