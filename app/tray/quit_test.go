package tray

import (
	"testing"

	"github.com/smarter-compact/smarter-compact/web"
)

func TestQuitWarning(t *testing.T) {
	st := web.State{Agents: []web.AgentSwitch{
		{Agent: "claude-code", Wiring: web.WiringWired},
		{Agent: "codex", Wiring: web.WiringNotWired},
		{Agent: "opencode", Wiring: web.WiringWired},
		{Agent: "unknown", Wiring: web.WiringUnknown},
	}}
	if got, want := quitWarning(st), "Wired agents (claude-code, opencode) cannot reach their API until the service runs again"; got != want {
		t.Errorf("quitWarning = %q, want %q", got, want)
	}
	st.Agents[0].Wiring, st.Agents[2].Wiring = web.WiringNotInstalled, web.WiringNotWired
	if got := quitWarning(st); got != "" {
		t.Errorf("quitWarning with nothing wired = %q, want none (Quit quits at once)", got)
	}
}
