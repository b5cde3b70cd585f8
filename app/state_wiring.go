package app

import (
	"context"
	"errors"
	"maps"
	"strings"

	"github.com/smarter-compact/smarter-compact/assets"
	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/web"
)

// refreshWiring reads the agents' config files again and bumps Revision when an agent's
// wiring changed.
func (s *state) refreshWiring() {
	w := s.checkWiring() // outside s.mu: it reads files
	s.mu.Lock()
	defer s.mu.Unlock()
	if !maps.Equal(w, s.wiring) {
		s.wiring = w
		s.bump()
	}
}

// checkWiring judges each agent's wiring with doctor's checks (agentChecks) against this
// service, which answers: an ok check is wired unless another fails; a stale port, a
// binary a hook or MCP entry names that is gone, a JSONC settings.json, or a Codex provider
// that is defined but not selected, is not wired; an unreadable file is unknown; no route through
// us is not wired, or not installed when the installer finds no trace of the agent.
func (s *state) checkWiring() map[string]wiring {
	checks := agentChecks(context.Background(), s.sys, "", s.port, "", true)
	out := make(map[string]wiring, len(config.ConfiguredAgents))
	for _, agent := range config.ConfiguredAgents {
		var ok, fail, warn, info []installer.Finding
		for _, c := range checks {
			if c.Name != agent && !strings.HasPrefix(c.Name, agent+" (") {
				continue
			}
			switch c.Status {
			case installer.CheckOK:
				ok = append(ok, c)
			case installer.CheckFail:
				fail = append(fail, c)
			case installer.CheckWarn:
				warn = append(warn, c)
			default:
				info = append(info, c)
			}
		}
		switch {
		case len(warn) > 0 && len(ok) == 0:
			out[agent] = wiring{web.WiringUnknown, warn[0].Message}
		case len(warn) > 0:
			out[agent] = wiring{web.WiringNotWired, warn[0].Message}
		case len(fail) > 0: // a stale port, a binary gone, a settings.json Claude Code ignores
			out[agent] = wiring{web.WiringNotWired, fail[0].Message}
		case len(ok) > 0:
			out[agent] = wiring{web.WiringWired, ok[0].Message}
		case len(info) > 0:
			out[agent] = s.notWired(agent, info[0].Message)
		default:
			out[agent] = wiring{web.WiringUnknown, "no check ran"}
		}
	}
	return out
}

// notWired is an agent whose config sends nothing through us: not installed when its config
// file is missing and the installer does not find the agent either (installer.ErrNotInstalled).
func (s *state) notWired(agent, msg string) wiring {
	if !strings.HasPrefix(msg, "not wired (no ") { // the file exists: the agent is there
		return wiring{web.WiringNotWired, msg}
	}
	env, err := installEnv(s.sys, s.port)
	if err != nil {
		return wiring{web.WiringNotWired, msg}
	}
	for _, a := range installer.Agents(assets.OpenCodePlugin()) {
		if a.Name() != agent {
			continue
		}
		if _, err := a.Plan(env); errors.Is(err, installer.ErrNotInstalled) {
			return wiring{web.WiringNotInstalled, err.Error()}
		}
	}
	return wiring{web.WiringNotWired, msg}
}
