package tray

import (
	"errors"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestAquaSession: the macOS host check shows the menu-bar icon only when launchd says
// this is a GUI login session, and otherwise says why.
func TestAquaSession(t *testing.T) {
	t.Parallel()
	// A real failed command, for the stderr the reason quotes (a made-up one on Windows,
	// which has no sh).
	var runErr error = &exec.ExitError{Stderr: []byte("Unrecognized subcommand: managername\n")}
	if runtime.GOOS != "windows" {
		_, runErr = exec.Command("sh", "-c", "echo 'Unrecognized subcommand: managername' >&2; exit 64").Output()
	}
	tests := []struct {
		name, out string
		err       error
		ok        bool
		why       []string
	}{
		{name: "GUI login", out: "Aqua\n", ok: true},
		{name: "ssh", out: "Background\n", why: []string{"says Background, not Aqua", "over ssh"}},
		{name: "login window", out: "LoginWindow\n", why: []string{"says LoginWindow"}},
		{name: "empty answer", out: "", why: []string{"says nothing"}},
		{name: "lower case is not Aqua", out: "aqua", why: []string{"says aqua"}},
		{name: "launchctl missing", err: exec.ErrNotFound, why: []string{"cannot tell", "executable file not found"}},
		{name: "launchctl fails", err: runErr, why: []string{"cannot tell", "Unrecognized subcommand"}},
		{name: "error beats output", out: "Aqua", err: errors.New("boom"), why: []string{"boom"}},
	}
	for _, tt := range tests {
		ok, why := aquaSession(tt.out, tt.err)
		if ok != tt.ok {
			t.Errorf("%s: ok %v, want %v (why %q)", tt.name, ok, tt.ok, why)
		}
		if ok && why != "" {
			t.Errorf("%s: a tray session with a reason %q", tt.name, why)
		}
		for _, w := range tt.why {
			if !strings.Contains(why, w) {
				t.Errorf("%s: why %q lacks %q", tt.name, why, w)
			}
		}
	}
}

// TestWindowsSession: session 0 (services) is headless; a user's session, or an id that
// cannot be read, gets the tray.
func TestWindowsSession(t *testing.T) {
	t.Parallel()
	if ok, why := windowsSession(0, nil); ok || !strings.Contains(why, "session 0") {
		t.Errorf("session 0: ok %v, why %q; want headless, naming session 0", ok, why)
	}
	for _, c := range []struct {
		id  uint32
		err error
	}{{1, nil}, {2, nil}, {0, errors.New("access denied")}} {
		if ok, why := windowsSession(c.id, c.err); !ok || why != "" {
			t.Errorf("session %d (err %v): ok %v, why %q; want the tray", c.id, c.err, ok, why)
		}
	}
}
