package proxy

import (
	"bytes"
	"encoding/json"
	"path/filepath"

	"github.com/smarter-compact/smarter-compact/store"
)

// cwdMarkers are where the agents name their working directory in a request: Codex's
// environment context (<cwd>…</cwd>), Claude Code's and OpenCode's system prompt lines. The
// text after a marker runs to the first of the ends, in the request's raw JSON text.
var cwdMarkers = []struct {
	open string
	ends []string
}{
	{"<cwd>", []string{"</cwd>"}},
	{`\u003ccwd\u003e`, []string{`\u003c/cwd\u003e`}}, // a JSON encoder that escapes HTML
	{"Primary working directory: ", []string{`\n`, `"`}},
	{"Working directory: ", []string{`\n`, `"`}},
}

// registerFirstSeen registers a session no hook or plugin registered, with the bank of its
// working directory, once a request names that directory (issue 17: registrations carry
// the bank). It runs only when Settings.BankFor is set ([memory] configured), checks the
// registration once per session, and scans the request's raw bytes only while the session
// has none (s.mu held).
func (p *Proxy) registerFirstSeen(s *session, agent string, raw []byte) {
	bankFor := p.cfg().BankFor
	if bankFor == nil || s.registered {
		return
	}
	if !s.regChecked {
		s.regChecked = true
		if reg, err := p.root.Registration(s.sid); err != nil || reg != nil {
			s.registered = true // registered by a hook or plugin (or unreadable: leave it alone)
			return
		}
	}
	cwd := cwdOf(raw)
	if cwd == "" {
		return // a later request may name it
	}
	s.registered = true
	if agent == "unknown" {
		agent = s.state.Agent
	}
	reg := store.Registration{SessionID: s.sid, Agent: agent, Cwd: cwd, Bank: bankFor(cwd)}
	if err := p.root.Register(reg); err != nil {
		p.log.Warn("smarter-compact: registering the session failed", "session", s.sid, "err", errorClass(err))
		return
	}
	p.log.Info("session registered", "session", s.sid, "agent", agent, "bank", reg.Bank)
}

// cwdOf returns the first absolute working directory a request's JSON text names
// (cwdMarkers), JSON escapes decoded; "" when none.
func cwdOf(raw []byte) string {
	for _, m := range cwdMarkers {
		rest := raw
		for {
			i := bytes.Index(rest, []byte(m.open))
			if i < 0 {
				break
			}
			rest = rest[i+len(m.open):]
			end := len(rest)
			for _, e := range m.ends {
				if j := bytes.Index(rest, []byte(e)); j >= 0 && j < end {
					end = j
				}
			}
			if end > 4096 {
				continue
			}
			var dir string
			if json.Unmarshal(append(append([]byte{'"'}, rest[:end]...), '"'), &dir) == nil && filepath.IsAbs(dir) {
				return filepath.Clean(dir)
			}
		}
	}
	return ""
}
