// Package configtest holds the config.toml helpers shared by the tests of proxy/config and
// app: a fake environment (Env) and a config.toml written to a test's temporary folder
// (WriteConfig). It imports nothing of ours, so proxy/config's own tests can use it without
// an import cycle.
package configtest

import (
	"os"
	"path/filepath"
	"testing"
)

// Env is a fake environment: Get is its getenv ("" for a variable not in it).
type Env map[string]string

// Get returns the value of the variable k, "" when it is not set.
func (e Env) Get(k string) string { return e[k] }

// WriteConfig writes text as config.toml (mode 0600) in a fresh temporary folder of t and
// returns its path.
func WriteConfig(t testing.TB, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
