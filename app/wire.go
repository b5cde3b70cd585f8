package app

import (
	"bytes"
	"context"
	"strings"
	"sync"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/web"
)

// wirer is the installer behind the dashboard's "Wire my agents" page (web.Wirer; issue 15,
// Deliver 4). Plan shows the diffs of `install --dry-run`; Install and Uninstall run the
// `install` and `uninstall` commands themselves, with their output captured, so the page
// and the CLI cannot drift apart.
type wirer struct {
	st     *state
	sys    system
	config string // serve's --config, passed on ("" reads SMARTER_COMPACT_CONFIG, else the default)
	mu     sync.Mutex
}

// newWirer is the dashboard's installer for the service's state; config is serve's
// --config ("" when not given).
func newWirer(st *state, sys system, config string) *wirer {
	return &wirer{st: st, sys: sys, config: config}
}

// Plan reports every agent's wiring (doctor's checks, read again now) with the diffs that
// `install --dry-run` and `uninstall --dry-run` print for it. It writes nothing.
func (w *wirer) Plan(ctx context.Context) ([]web.WirePlan, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.st.refreshWiring()
	var plans []web.WirePlan
	for _, a := range w.st.State().Agents {
		if a.Agent != config.AgentUnknown {
			plans = append(plans, web.WirePlan{Agent: a.Agent, Wiring: a.Wiring, Detail: a.WiringDetail})
		}
	}
	cfgPath, cfg, err := installConfig(w.config, w.sys)
	if err != nil {
		return plans, err
	}
	// The diff names the executable install would write: the stable copy (placeBinary, dry
	// run: nothing is copied), not the build this service runs from.
	sys, _, err := placeBinary(w.sys, true)
	if err != nil {
		return plans, err
	}
	env, err := installEnv(sys, cfg.Port)
	if err != nil {
		return plans, err
	}
	agents, err := selectAgents("install", "")
	if err != nil {
		return plans, err
	}
	inst := installer.Install(env, agents, true)
	chained, _ := installer.ChainUpstreams(upstreamConfig(cfgPath, cfg.Port), inst, true, installer.UpstreamRecordPath(env))
	undo := installer.Uninstall(env, agents, true)
	for i := range plans {
		p := &plans[i]
		for _, r := range inst.Agents {
			if r.Agent != p.Agent {
				continue
			}
			switch {
			case r.Err != nil:
				p.Problem = r.Err.Error() + ": fix the file (or move it aside), then reload this page"
			case r.Skipped == "" && len(r.Files) > 0:
				p.InstallDiff, p.InstallFiles = r.Diff, r.Files
			}
			p.Notes = append(p.Notes, r.Notes...)
		}
		for _, l := range chained {
			if strings.Contains(l, p.Agent) {
				p.Notes = append(p.Notes, l)
			}
		}
		for _, r := range undo.Agents {
			if r.Agent == p.Agent && r.Err == nil && len(r.Files) > 0 {
				p.UninstallDiff = r.Diff
			}
		}
	}
	return plans, ctx.Err()
}

// Install runs `smarter-compact install --agents <agents>` and returns what it printed.
func (w *wirer) Install(ctx context.Context, agents []string) (string, error) {
	return w.run(ctx, install, agents)
}

// Uninstall runs `smarter-compact uninstall --agents <agents>` and returns what it printed.
func (w *wirer) Uninstall(ctx context.Context, agents []string) (string, error) {
	return w.run(ctx, uninstall, agents)
}

// run runs cmd (install or uninstall) for agents with its stdout captured, one at a time,
// then reads the wiring again so the overview shows it at once.
func (w *wirer) run(ctx context.Context, cmd func(context.Context, []string, system) error, agents []string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out bytes.Buffer
	sys := w.sys
	sys.stdout = &out
	args := []string{"--agents", strings.Join(agents, ",")}
	if w.config != "" {
		args = append(args, "--config", w.config)
	}
	err := cmd(ctx, args, sys)
	w.st.refreshWiring()
	return out.String(), err
}
