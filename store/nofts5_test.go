//go:build !sqlite_fts5

package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain, in a build without -tags sqlite_fts5, checks only that Open refuses to run and
// names the tag; every other test needs FTS5.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "store-nofts5")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	_, err = Open(filepath.Join(dir, "context"))
	if err == nil || !strings.Contains(err.Error(), "-tags sqlite_fts5") {
		fmt.Printf("FAIL: Open without FTS5 = %v, want an error naming -tags sqlite_fts5\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	fmt.Printf("store: built without -tags sqlite_fts5: only checked that Open fails with %q; run the tests with -tags sqlite_fts5\n", err)
}
