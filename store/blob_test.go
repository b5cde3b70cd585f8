package store

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBlobs(t *testing.T) {
	r := newRoot(t)
	text := strings.Repeat("tool output é\n", 1000)
	sum := sha256.Sum256([]byte(text))
	wantID := fmt.Sprintf("%x", sum[:])[:16]

	id, err := r.WriteBlob(text)
	if err != nil {
		t.Fatal(err)
	}
	if id != wantID || BlobID(text) != wantID {
		t.Fatalf("id %s, want %s", id, wantID)
	}
	path := filepath.Join(r.Dir(), "blobs", id+".txt")
	raw, err := os.ReadFile(path)
	if err != nil || string(raw) != text {
		t.Fatalf("blob file: %v", err)
	}
	if p := perm(t, path); wrongMode(t, p, 0o600) {
		t.Errorf("mode %o, want 600", p)
	}
	first, _ := os.Stat(path)

	// Writing it again does not rewrite it, but marks it fresh for the sweep.
	old := time.Now().Add(-48 * time.Hour)
	age(t, path, old)
	if id2, err := r.WriteBlob(text); err != nil || id2 != id {
		t.Fatalf("second write = %s, %v", id2, err)
	}
	second, _ := os.Stat(path)
	if !os.SameFile(first, second) {
		t.Error("an existing blob was rewritten")
	}
	if time.Since(second.ModTime()) > time.Minute {
		t.Errorf("mtime %v not refreshed", second.ModTime())
	}

	// A truncated blob (a crash mid-write) is repaired.
	if err := os.WriteFile(path, []byte(text[:10]), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteBlob(text); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadBlob(id); err != nil || got != text {
		t.Errorf("ReadBlob after repair: %d bytes, %v", len(got), err)
	}

	if _, err := r.ReadBlob("0000000000000000"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing blob: %v, want fs.ErrNotExist", err)
	}
	for _, bad := range []string{"", "../../x", "0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0", "0123456789abcdeg"} {
		if _, err := r.ReadBlob(bad); err == nil || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadBlob(%q) = %v, want an invalid-id error", bad, err)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(r.Dir(), "blobs"))
	if len(ents) != 1 {
		t.Errorf("blobs/ holds %d entries, want 1 (temp files left?)", len(ents))
	}
}
