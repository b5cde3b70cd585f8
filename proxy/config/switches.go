package config

import (
	"slices"
)

// Mode is an agent's saved switch: its [context_proxy.agents] key true (on), false (off) or
// absent (follow). Its values are web.Mode's, which app converts to.
type Mode string

// The three modes.
const (
	ModeOn     Mode = "on"
	ModeOff    Mode = "off"
	ModeFollow Mode = "follow"
)

// Switches is the trimming switches of config.toml and the environment (DESIGN.md §5).
type Switches struct {
	Master bool            // [context_proxy] enabled; unset means true
	saved  bool            // [context_proxy] enabled is set
	Paused bool            // [context_proxy] paused; unset means false
	modes  map[string]Mode // configured agent → on (key true), off (key false), follow (no key)
	// Env is CONTEXT_PROXY_ENABLED when set to a valid value ("" otherwise), envOn its value.
	Env   string
	envOn bool
}

// SwitchesOf reads the switches from the decoded [context_proxy] table and getenv.
func SwitchesOf(cp *FileContextProxy, getenv func(string) string) Switches {
	sw := Switches{Master: true, modes: map[string]Mode{}}
	if cp.Enabled != nil {
		sw.Master, sw.saved = *cp.Enabled, true
	}
	if cp.Paused != nil {
		sw.Paused = *cp.Paused
	}
	for agent, v := range map[string]*bool{AgentClaudeCode: cp.Agents.ClaudeCode, AgentCodex: cp.Agents.Codex, AgentOpenCode: cp.Agents.OpenCode} {
		switch {
		case v == nil:
			sw.modes[agent] = ModeFollow
		case *v:
			sw.modes[agent] = ModeOn
		default:
			sw.modes[agent] = ModeOff
		}
	}
	if v, ok := EnvOverride(KeyEnabled, getenv); ok {
		if on, err := ParseBool(v); err == nil {
			sw.Env, sw.envOn = v, on
		}
	}
	return sw
}

// Mode is agent's saved Mode; "unknown" and any agent without a key follow the master.
func (sw Switches) Mode(agent string) Mode {
	if m, ok := sw.modes[agent]; ok {
		return m
	}
	return ModeFollow
}

// Effective is whether trimming is on for every configured agent and "unknown".
func (sw Switches) Effective() map[string]bool {
	agents := make(map[string]bool, len(ConfiguredAgents)+1)
	for _, a := range append(slices.Clone(ConfiguredAgents), AgentUnknown) {
		agents[a], _ = sw.Rule(a)
	}
	return agents
}

// Where an agent's effective switch comes from (Switches.Rule), as `status` names it;
// the fifth is keyEnabled.env, the environment variable's name.
const (
	SourcePaused  = "paused"
	SourceSaved   = "saved"
	SourceFollows = "follows enabled"
	SourceDefault = "default"
	SourceEnv     = "CONTEXT_PROXY_ENABLED" // keyEnabled.env
)

// Rule is the effective Rule and where its value comes from: pause wins over everything
// (every agent passes through untouched); then a set CONTEXT_PROXY_ENABLED is the master
// switch over every agent key (0 forwards every request unmodified, seed 001's proxy table);
// then the agent's key; an agent without one follows [context_proxy] enabled. Our decision
// for the Go product: with enabled unset every agent is on (the seed had only opencode2 on),
// because installing Smarter Compact is the opt-in.
func (sw Switches) Rule(agent string) (on bool, source string) {
	switch m := sw.Mode(agent); {
	case sw.Paused:
		return false, SourcePaused
	case sw.Env != "":
		return sw.envOn, KeyEnabled.Env
	case m != ModeFollow:
		return m == ModeOn, SourceSaved
	case sw.saved:
		return sw.Master, SourceFollows
	default:
		return sw.Master, SourceDefault
	}
}
