package web

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSetAgentMode runs the client against the real handlers on a loopback listener, and
// against listeners that are not the control API.
func TestSetAgentMode(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ts := httptest.NewServer(h.h)
	t.Cleanup(ts.Close)

	got, err := SetAgentMode(t.Context(), ts.URL, testToken, "codex", ModeOff)
	if err != nil {
		t.Fatalf("SetAgentMode codex off: %v", err)
	}
	if got.Agent != "codex" || got.Mode != ModeOff || got.Trimming {
		t.Errorf("answer %+v, want codex off", got)
	}
	if got.ConfigPath != h.ctl.State().ConfigPath {
		t.Errorf("ConfigPath %q, want the state's %q", got.ConfigPath, h.ctl.State().ConfigPath)
	}
	if c := h.ctl.lastCall(); !strings.Contains(c, "codex") {
		t.Errorf("the control's last call %q does not switch codex", c)
	}

	// A wrong token: the service changes nothing and the client says it was not taken.
	if _, err := SetAgentMode(t.Context(), ts.URL, "wrong", "codex", ModeOn); !errors.Is(err, ErrNotTaken) || !strings.HasPrefix(err.Error(), "401 Unauthorized: ") {
		t.Errorf("wrong token: %v, want a 401 that Is ErrNotTaken", err)
	}
	// The service's own refusal is an error of its own, not ErrNotTaken.
	if _, err := SetAgentMode(t.Context(), ts.URL, testToken, "nobody", ModeOn); err == nil || errors.Is(err, ErrNotTaken) || !strings.HasPrefix(err.Error(), "4") {
		t.Errorf("unknown agent: %v, want the service's 4xx message", err)
	}

	// Another program on the port.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("hello")) }))
	t.Cleanup(other.Close)
	if _, err := SetAgentMode(t.Context(), other.URL, testToken, "codex", ModeOn); !errors.Is(err, ErrNotTaken) || !strings.Contains(err.Error(), `unexpected answer "hello"`) {
		t.Errorf("another program: %v, want an unexpected answer that Is ErrNotTaken", err)
	}

	// Nothing listens: a closed listener's port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var down *ServiceDownError
	if _, err := SetAgentMode(t.Context(), "http://"+addr, testToken, "codex", ModeOn); !errors.As(err, &down) {
		t.Errorf("nothing listening: %v (%T), want a *ServiceDownError", err, err)
	}
}
