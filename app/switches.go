package app

import (
	"fmt"
	"slices"
	"strings"

	"github.com/smarter-compact/smarter-compact/web"
)

// switchState is the trimming switches of config.toml and the environment (DESIGN.md §5).
type switchState struct {
	master bool                // [context_proxy] enabled; unset means true
	paused bool                // [context_proxy] paused; unset means false
	modes  map[string]web.Mode // configured agent → on (key true), off (key false), follow (no key)
	// env is CONTEXT_PROXY_ENABLED when set to a valid value ("" otherwise), envOn its value.
	env   string
	envOn bool
}

// switchesOf reads the switches from the decoded [context_proxy] table and getenv.
func switchesOf(cp *fileContextProxy, getenv func(string) string) switchState {
	sw := switchState{master: true, modes: map[string]web.Mode{}}
	if cp.Enabled != nil {
		sw.master = *cp.Enabled
	}
	if cp.Paused != nil {
		sw.paused = *cp.Paused
	}
	for agent, v := range map[string]*bool{agentClaudeCode: cp.Agents.ClaudeCode, agentCodex: cp.Agents.Codex, agentOpenCode: cp.Agents.OpenCode} {
		switch {
		case v == nil:
			sw.modes[agent] = web.ModeFollow
		case *v:
			sw.modes[agent] = web.ModeOn
		default:
			sw.modes[agent] = web.ModeOff
		}
	}
	if v := strings.TrimSpace(getenv(keyEnabled.env)); v != "" {
		if on, err := parseBool(v); err == nil {
			sw.env, sw.envOn = v, on
		}
	}
	return sw
}

// mode is agent's saved mode; "unknown" and any agent without a key follow the master.
func (sw switchState) mode(agent string) web.Mode {
	if m, ok := sw.modes[agent]; ok {
		return m
	}
	return web.ModeFollow
}

// effective is whether trimming is on for every configured agent and "unknown".
func (sw switchState) effective() map[string]bool {
	agents := make(map[string]bool, len(configuredAgents)+1)
	for _, a := range append(slices.Clone(configuredAgents), agentUnknown) {
		agents[a], _ = sw.trimming(a)
	}
	return agents
}

// trimming is the effective rule, with the reason in words: pause wins over everything (every
// agent passes through untouched); then a set CONTEXT_PROXY_ENABLED is the master switch
// over every agent key (0 forwards every request unmodified, seed 001's proxy table); then
// the agent's key; an agent without one follows [context_proxy] enabled. Our decision for
// the Go product: with enabled unset every agent is on (the seed had only opencode2 on),
// because installing Smarter Compact is the opt-in.
func (sw switchState) trimming(agent string) (on bool, why string) {
	switch m := sw.mode(agent); {
	case sw.paused:
		return false, "off: paused"
	case sw.env != "":
		return sw.envOn, fmt.Sprintf("%s: %s=%s overrides", onOffWord(sw.envOn), keyEnabled.env, sw.env)
	case m == web.ModeOn:
		return true, "on (saved)"
	case m == web.ModeOff:
		return false, "off (saved)"
	default:
		return sw.master, onOffWord(sw.master) + " (follows the master switch)"
	}
}
