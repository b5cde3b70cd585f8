package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy/config/configtest"
)

// hangGuard bounds a call that must return at once: before ReadFile, a FIFO as
// config.toml blocked the open forever and /dev/zero was read until memory ran out.
const hangGuard = 30 * time.Second

// loadWithin runs LoadConfig on path and fails the test when it does not return within
// hangGuard.
func loadWithin(t *testing.T, path string) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := Load(path, true, env{}.Get)
		errc <- err
	}()
	select {
	case err := <-errc:
		return err
	case <-time.After(hangGuard):
		t.Fatalf("LoadConfig(%s) still running after %s", path, hangGuard)
		return nil
	}
}

func TestConfigTooLargeIsAnError(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.toml")
	// a sparse file: one byte past the cap, of TOML comments' worth of zeros
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = loadWithin(t, path)
	if err == nil || !strings.Contains(err.Error(), "larger than 1024 KiB") || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("LoadConfig of a %d-byte file = %v, want the size error saying what to do", MaxBytes+1, err)
	}
}

func TestConfigAtTheCapLoads(t *testing.T) {
	t.Parallel()
	text := "[context_proxy]\nport = 4242\n"
	text += strings.Repeat("#", MaxBytes-len(text)-1) + "\n"
	cfg, err := Load(configtest.WriteConfig(t, text), true, env{}.Get)
	if err != nil || cfg.Port != 4242 {
		t.Fatalf("LoadConfig of a %d-byte file = port %d, %v; want it read", len(text), cfg.Port, err)
	}
}

func TestConfigDirectoryIsAnError(t *testing.T) {
	t.Parallel()
	err := loadWithin(t, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "not a regular file (a directory)") {
		t.Fatalf("LoadConfig of a directory = %v, want the not-regular error", err)
	}
}

func TestConfigTimeouts(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, "[context_proxy]\nbody_read_timeout_s = 5\nupstream_idle_timeout_s = 90\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BodyReadTimeout != 5*time.Second || cfg.Proxy.IdleTimeout != 90*time.Second {
		t.Fatalf("file: body %s, idle %s; want 5s, 1m30s", cfg.BodyReadTimeout, cfg.Proxy.IdleTimeout)
	}
	cfg, err = load(t, "[context_proxy]\nbody_read_timeout_s = 5\n", env{"CONTEXT_PROXY_BODY_READ_TIMEOUT_S": "7", "CONTEXT_PROXY_UPSTREAM_IDLE_TIMEOUT_S": "8"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BodyReadTimeout != 7*time.Second || cfg.Proxy.IdleTimeout != 8*time.Second {
		t.Fatalf("env: body %s, idle %s; want 7s, 8s", cfg.BodyReadTimeout, cfg.Proxy.IdleTimeout)
	}
	for _, text := range []string{"body_read_timeout_s = 0", "upstream_idle_timeout_s = -1", `upstream_idle_timeout_s = "5"`} {
		_, err := load(t, "[context_proxy]\n"+text+"\n", nil)
		if err == nil || !strings.Contains(err.Error(), "an integer of at least 1 (seconds)") {
			t.Errorf("%s: err %v, want the range error", text, err)
		}
	}
}
