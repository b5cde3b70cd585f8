package app

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy/config"
)

// env is a fake environment for getenv.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// writeConfig writes text as config.toml in a fresh directory and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// load reads text as an explicitly named config.toml under e.
func load(t *testing.T, text string, e env) (config.Config, error) {
	t.Helper()
	return config.Load(writeConfig(t, text), true, e.get)
}

// hangGuard bounds a call that must return at once (as in proxy/config's read tests: a
// FIFO or a device as config.toml must not block).
const hangGuard = 30 * time.Second
