package web

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/smarter-compact/smarter-compact/web/ui"
)

// Wirer is the installer as the "Wire my agents" page sees it (issue 15, Deliver 4). app
// implements it with the engine of `install` and `uninstall` (DESIGN.md §8): the diff shown
// is the one `install --dry-run` prints, and the buttons run what the commands run.
type Wirer interface {
	// Plan says, per agent (claude-code, codex, opencode), whether it is installed and
	// wired, and what `install` and `uninstall` would change. It writes nothing. The error
	// is for a plan that could not be made at all (no home directory, a config.toml that
	// does not load); one agent's problem is its WirePlan.Problem.
	Plan(ctx context.Context) ([]WirePlan, error)
	// Install wires the agents named, as `smarter-compact install --agents …` does, and
	// returns the lines the command prints. An error says what failed and what to do;
	// the lines say what was done before it.
	Install(ctx context.Context, agents []string) (lines string, err error)
	// Uninstall puts the agents' files back, as `smarter-compact uninstall --agents …`.
	Uninstall(ctx context.Context, agents []string) (lines string, err error)
}

// WirePlan is one agent on the "Wire my agents" page.
type WirePlan struct {
	Agent string
	// Wiring is the agent's state now: WiringWired, WiringNotWired (installed, its
	// requests do not come here), WiringNotInstalled, or WiringUnknown.
	Wiring Wiring
	Detail string // the file checked, what was looked for, or why the state is unknown
	// InstallDiff is the unified diff `install` would apply ("" when nothing would
	// change); InstallFiles the files it would write.
	InstallDiff  string
	InstallFiles []string
	// UninstallDiff is what `uninstall` would change ("" when nothing is ours to undo).
	UninstallDiff string
	Notes         []string // the installer's notes (e.g. an upstream it would chain to)
	// Problem is why the installer cannot wire the agent now (a file that does not parse):
	// the message says what to fix. Nothing would be written for it.
	Problem string
}

// wireReports is how many reports of the wire buttons the server keeps for the page they
// redirect to.
const wireReports = 8

// wireReport is what one press of a wire button did.
type wireReport struct {
	id     uint64
	action string // "install" or "uninstall"
	agents []string
	lines  string
	err    string
}

// wire answers GET /ui/wire: the agents found, what install would change, and the buttons;
// ?report=<n> shows what a button just did.
func (s *Server) wire(w http.ResponseWriter, r *http.Request) error {
	p := ui.WirePage{Page: s.page("Wire my agents", "wire"), CSRF: s.csrf}
	if id, err := strconv.ParseUint(r.URL.Query().Get("report"), 10, 64); err == nil {
		s.mu.Lock()
		for _, rep := range s.wired {
			if rep.id == id {
				p.Report = &ui.WireReport{Action: rep.action, Agents: strings.Join(rep.agents, ", "), Lines: rep.lines, Error: rep.err}
			}
		}
		s.mu.Unlock()
	}
	if s.wirer == nil {
		p.Problem = "This service was started without the installer: run 'smarter-compact install --dry-run' in a terminal to see the changes, then 'smarter-compact install'."
		return s.render(w, r, http.StatusOK, ui.WireView(p))
	}
	plans, err := s.wirer.Plan(r.Context())
	if err != nil {
		if r.Context().Err() != nil {
			return r.Context().Err()
		}
		p.Problem = err.Error()
	}
	for _, pl := range plans {
		a := ui.WireAgent{
			Agent: pl.Agent, Name: agentTitle(pl.Agent), Wiring: string(pl.Wiring), Detail: pl.Detail,
			Meaning: wiringMeaning(pl), InstallDiff: pl.InstallDiff, InstallFiles: pl.InstallFiles,
			UninstallDiff: pl.UninstallDiff, Notes: pl.Notes, Problem: pl.Problem,
		}
		if a.InstallDiff != "" && a.Problem == "" {
			p.Wirable = append(p.Wirable, pl.Agent)
		}
		p.Agents = append(p.Agents, a)
	}
	return s.render(w, r, http.StatusOK, ui.WireView(p))
}

// wireAction answers POST /ui/wire/install and /ui/wire/uninstall (CSRF-checked), form
// field agent = one agent or "all" (install: the agents with a change to make;
// uninstall: every agent), then redirects (303) to the page with the report.
func (s *Server) wireAction(action string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.wirer == nil {
			return userError(http.StatusConflict, "this service was started without the installer: run 'smarter-compact %s' in a terminal", action)
		}
		agent := r.PostFormValue("agent")
		var agents []string
		switch {
		case agent == "all":
			agents = slices.Clone(wireAgents)
		case slices.Contains(wireAgents, agent):
			agents = []string{agent}
		default:
			return userError(http.StatusBadRequest, "agent %q: use %s or all (reload the page)", truncate(agent, 40), strings.Join(wireAgents, ", "))
		}
		run := s.wirer.Install
		if action == "uninstall" {
			run = s.wirer.Uninstall
		}
		lines, err := run(r.Context(), agents)
		rep := wireReport{action: action, agents: agents, lines: lines}
		if err != nil {
			rep.err = err.Error()
			s.log.Warn("dashboard: "+action+" failed", "agents", strings.Join(agents, ","), "err", err)
		} else {
			s.log.Info("dashboard: "+action, "agents", strings.Join(agents, ","))
		}
		s.mu.Lock()
		s.wireSeq++
		rep.id = s.wireSeq
		s.wired = append(s.wired, rep)
		if len(s.wired) > wireReports {
			s.wired = s.wired[len(s.wired)-wireReports:]
		}
		s.mu.Unlock()
		http.Redirect(w, r, "/ui/wire?report="+strconv.FormatUint(rep.id, 10), http.StatusSeeOther)
		return nil
	}
}

// wireAgents are the agents the installer wires, in display order.
var wireAgents = []string{"claude-code", "codex", "opencode"}

// agentTitle is the agent's product name.
func agentTitle(agent string) string {
	switch agent {
	case "claude-code":
		return "Claude Code"
	case "codex":
		return "Codex CLI"
	case "opencode":
		return "OpenCode"
	}
	return agent
}

// wiringMeaning says in words what an agent's wiring means for the user.
func wiringMeaning(p WirePlan) string {
	name := agentTitle(p.Agent)
	switch p.Wiring {
	case WiringWired:
		return name + " is wired: its requests go through smarter-compact, which stores and trims them."
	case WiringNotWired:
		return name + " is installed but not wired: its requests go straight to its model API, so nothing is stored or trimmed. Wire it below."
	case WiringNotInstalled:
		return name + " is not installed on this machine (no configuration of it was found): there is nothing to wire. Install it, start it once, then reload this page."
	}
	return "Whether " + name + " is wired could not be told."
}
