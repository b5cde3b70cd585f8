package app

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// toggles is the per-agent trimming state the proxy reads on every request (proxy.Toggles;
// DESIGN.md §5). The tray and the dashboard flip it at run time through Set; a change takes
// effect on the next request. Safe for concurrent use.
type toggles struct {
	// on is built once and never changes shape, so reads need no lock.
	on map[string]*atomic.Bool
}

// newToggles starts from the resolved config (Config.Agents): claude-code, codex, opencode
// and unknown.
func newToggles(initial map[string]bool) *toggles {
	t := &toggles{on: make(map[string]*atomic.Bool, len(initial))}
	for agent, on := range initial {
		b := new(atomic.Bool)
		b.Store(on)
		t.on[agent] = b
	}
	return t
}

// Enabled reports whether trimming is on for agent; an agent name we do not know is treated
// as "unknown".
func (t *toggles) Enabled(agent string) bool {
	b, ok := t.on[agent]
	if !ok {
		b, ok = t.on[agentUnknown]
	}
	return ok && b.Load()
}

// Set turns trimming on or off for one agent; the error names the agents there are.
func (t *toggles) Set(agent string, on bool) error {
	b, ok := t.on[agent]
	if !ok {
		return fmt.Errorf("unknown agent %q: use one of %s, %s", agent, strings.Join(configuredAgents, ", "), agentUnknown)
	}
	b.Store(on)
	return nil
}

// String lists the state per agent for the startup line, e.g. "claude-code=on codex=off opencode=on unknown=on".
func (t *toggles) String() string {
	var sb strings.Builder
	for i, agent := range slices.Concat(configuredAgents, []string{agentUnknown}) {
		if i > 0 {
			sb.WriteByte(' ')
		}
		state := "off"
		if t.Enabled(agent) {
			state = "on"
		}
		sb.WriteString(agent + "=" + state)
	}
	return sb.String()
}
