//go:build e2e && !windows

package e2e_test

// The fault suite (issue 16), config.toml that is not a file: the built binary's serve with
// SMARTER_COMPACT_CONFIG at a FIFO or at /dev/zero exits at once with the reason, and a
// running serve whose config.toml turns into one keeps serving, says why once, and ends on
// SIGTERM. The loader's own tests are in proxy/config/read_other_test.go, the watcher's in
// app/state_watcher_other_test.go; these run the real binary.

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// faultConfigs are the config files that are not files: make(dir) puts one at the returned
// path, and want is the reason serve must give.
var faultConfigs = []struct {
	name string
	want string
	make func(t *testing.T, path string)
}{
	{"FIFO", "not a regular file (a named pipe)", func(t *testing.T, path string) {
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
	}},
	{"DevZero", "not a regular file (a character device)", func(t *testing.T, path string) {
		if _, err := os.Stat("/dev/zero"); err != nil {
			t.Skipf("skipping: no /dev/zero here: %v", err)
		}
		if err := os.Symlink("/dev/zero", path); err != nil {
			t.Fatal(err)
		}
	}},
}

// TestE2EFaultConfigAtStart: serve started with SMARTER_COMPACT_CONFIG at a FIFO, and at
// /dev/zero itself, exits within 10 s with status 1 and a message that names the file, what
// it is and what to do. Before the loader checked the file type, the FIFO blocked serve for
// good (waiting for a writer) and /dev/zero was read until memory ran out: then the test
// sends SIGTERM and checks that it ends serve.
func TestE2EFaultConfigAtStart(t *testing.T) {
	bin := buildBinary(t)
	for _, fc := range faultConfigs {
		t.Run(fc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "config.toml")
			fc.make(t, path)
			if fc.name == "DevZero" {
				path = "/dev/zero" // the variable names the device itself
			}
			cmd := exec.Command(bin, "serve", "--no-tray")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "home"),
				"SMARTER_COMPACT_STATE_DIR=" + filepath.Join(dir, "state"),
				"CONTEXT_PROXY_PORT=" + strconv.Itoa(freePort(t)), "SMARTER_COMPACT_CONFIG=" + path}
			var out syncBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Signal(syscall.SIGTERM)
				select {
				case err = <-done:
					t.Fatalf("serve with the config at a %s still ran after 10 s; SIGTERM ended it (%v):\n%s", fc.name, err, &out)
				case <-time.After(15 * time.Second):
					cmd.Process.Kill()
					<-done
					t.Fatalf("serve with the config at a %s still ran after 10 s and did not end within 15 s of SIGTERM:\n%s", fc.name, &out)
				}
			}
			took := time.Since(start)
			msg := out.String()
			t.Logf("exit %v after %s: %s", err, took.Round(time.Millisecond), strings.TrimSpace(msg))
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("exit: %v, want status 1", err)
			}
			for _, want := range []string{"read config: " + path, fc.want, "SMARTER_COMPACT_CONFIG"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the message %q lacks %q", msg, want)
				}
			}
		})
	}
}

// TestE2EFaultConfigWhileRunning: config.toml replaced by a FIFO, and by a link to /dev/zero,
// under a running serve. Within the watcher's poll (1 s, allowed 5) the log gives the reason;
// /healthz still answers (before the watcher checked the type, its read of the FIFO blocked
// the state's loop for good); SIGTERM ends serve with status 0 within 15 s.
func TestE2EFaultConfigWhileRunning(t *testing.T) {
	bin := buildBinary(t)
	for _, fc := range faultConfigs {
		t.Run(fc.name, func(t *testing.T) {
			srv := startServe(t, bin)
			logServeOnFailure(t, srv)
			config := filepath.Join(filepath.Dir(srv.stateDir), "config.toml")
			if err := os.Remove(config); err != nil {
				t.Fatal(err)
			}
			fc.make(t, config)
			if !waitFor(5*time.Second, func() bool { return strings.Contains(srv.log.String(), fc.want) }) {
				t.Fatalf("5 s after config.toml became a %s the log does not say %q:\n%s", fc.name, fc.want, srv.log)
			}
			resp, err := http.Get(srv.url() + "/healthz")
			if err != nil {
				t.Fatalf("/healthz with the config a %s: %v", fc.name, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("/healthz with the config a %s: %s", fc.name, resp.Status)
			}
			took, err := srv.sigterm()
			if err != nil {
				t.Fatalf("SIGTERM: %v\n%s", err, srv.log)
			}
			t.Logf("SIGTERM ended serve in %s", took.Round(time.Millisecond))
		})
	}
}
