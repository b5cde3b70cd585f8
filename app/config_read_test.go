package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hangGuard bounds a call that must return at once: before readConfigFile, a FIFO as
// config.toml blocked the open forever and /dev/zero was read until memory ran out.
const hangGuard = 30 * time.Second

// loadWithin runs LoadConfig on path and fails the test when it does not return within
// hangGuard.
func loadWithin(t *testing.T, path string) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := Load(path, true, env{}.get)
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
	cfg, err := Load(writeConfig(t, text), true, env{}.get)
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

// TestConfigWatcherRefusesLargeFile: the watcher reads config.toml every second; a file
// swapped for something no config is shows as the config error and the settings stay.
func TestConfigWatcherRefusesLargeFile(t *testing.T) {
	t.Parallel()
	st, path, _ := testState(t, "[context_proxy.agents]\ncodex = false\n", nil)
	st.settle = 0
	big := bytes.Repeat([]byte("# padding\n"), MaxBytes/10+1)
	if err := os.WriteFile(path, append([]byte("[context_proxy.agents]\ncodex = true\n"), big...), 0o600); err != nil {
		t.Fatal(err)
	}
	st.poll()
	if msg := st.State().ConfigError; !strings.Contains(msg, "larger than 1024 KiB") {
		t.Fatalf("ConfigError = %q, want the size error", msg)
	}
	if st.Enabled(AgentCodex) {
		t.Fatal("the oversized file was applied")
	}
}

// TestEndAfterSignal: once the signal context is done, a command that does not return
// within the grace ends the process (exit 1, one line); one that returns does not.
func TestEndAfterSignal(t *testing.T) {
	t.Parallel()
	t.Run("stuck command exits", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		stopped, exited := make(chan struct{}), make(chan int, 1)
		var stderr syncBuffer
		go EndAfterSignal(ctx, func() { close(stopped) }, make(chan struct{}), time.Millisecond, func(c int) { exited <- c }, &stderr)
		<-stopped // a second signal now gets the default action
		if code := <-exited; code != 1 {
			t.Fatalf("exit code %d, want 1", code)
		}
		if !strings.Contains(stderr.String(), "after the signal to stop; exiting now") {
			t.Fatalf("stderr %q", stderr.String())
		}
	})
	t.Run("command that returns", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		done := make(chan struct{})
		close(done)
		returned := make(chan struct{})
		go func() {
			EndAfterSignal(ctx, func() {}, done, time.Hour, func(c int) { t.Errorf("exit(%d) after the command returned", c) }, &syncBuffer{})
			close(returned)
		}()
		<-returned
	})
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
