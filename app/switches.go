package app

import (
	"fmt"
	"slices"

	"github.com/smarter-compact/smarter-compact/web"
)

// switchState is the trimming switches of config.toml and the environment (DESIGN.md §5).
type switchState struct {
	master bool                // [context_proxy] enabled; unset means true
	saved  bool                // [context_proxy] enabled is set
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
		sw.master, sw.saved = *cp.Enabled, true
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
	if v, ok := envOverride(keyEnabled, getenv); ok {
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

// Where an agent's effective switch comes from (switchState.rule), as `status` names it;
// the fifth is keyEnabled.env, the environment variable's name.
const (
	sourcePaused  = "paused"
	sourceSaved   = "saved"
	sourceFollows = "follows enabled"
	sourceDefault = "default"
	sourceEnv     = "CONTEXT_PROXY_ENABLED" // keyEnabled.env
)

// rule is the effective rule and where its value comes from: pause wins over everything
// (every agent passes through untouched); then a set CONTEXT_PROXY_ENABLED is the master
// switch over every agent key (0 forwards every request unmodified, seed 001's proxy table);
// then the agent's key; an agent without one follows [context_proxy] enabled. Our decision
// for the Go product: with enabled unset every agent is on (the seed had only opencode2 on),
// because installing Smarter Compact is the opt-in.
func (sw switchState) rule(agent string) (on bool, source string) {
	switch m := sw.mode(agent); {
	case sw.paused:
		return false, sourcePaused
	case sw.env != "":
		return sw.envOn, keyEnabled.env
	case m != web.ModeFollow:
		return m == web.ModeOn, sourceSaved
	case sw.saved:
		return sw.master, sourceFollows
	default:
		return sw.master, sourceDefault
	}
}

// trimming is rule with the reason in words.
func (sw switchState) trimming(agent string) (on bool, why string) {
	on, source := sw.rule(agent)
	switch source {
	case sourcePaused:
		return on, "off: paused"
	case keyEnabled.env:
		return on, fmt.Sprintf("%s: %s=%s overrides", onOffWord(on), keyEnabled.env, sw.env)
	case sourceSaved:
		return on, onOffWord(on) + " (saved)"
	}
	return on, onOffWord(on) + " (follows the master switch)"
}
