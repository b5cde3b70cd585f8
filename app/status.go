package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/savings"
)

// statusReport is `status --json`: the context_status summary (the same keys) plus the
// config, the per-agent switches and whether the service answers on its port.
type statusReport struct {
	store.Status
	Config      string        `json:"config"` // the config.toml read; "" when none (defaults)
	ConfigError string        `json:"configError,omitempty"`
	Store       string        `json:"store"`
	Service     serviceStatus `json:"service"`
	Agents      []agentStatus `json:"agents"`
	Health      statusHealth  `json:"health"` // status_health.go
	// Savings is money saved today, this week and per session, agent and model, an
	// estimate (status_savings.go).
	Savings savings.Summary `json:"savings"`

	// Memory describes the [memory] table, never its API key (docs/memory.md).
	Memory string `json:"memory,omitempty"`
}

// serviceStatus is the answer of GET http://127.0.0.1:<port>/healthz.
type serviceStatus struct {
	URL       string `json:"url"`
	Answering bool   `json:"answering"`
	Error     string `json:"error,omitempty"`
	// Build is the running service's build (its healthz header); "" when it does not say,
	// as services older than the header do.
	Build string `json:"build,omitempty"`
	// Restart is the command that restarts a service older than the installed binary.
	Restart string `json:"restart,omitempty"`
}

// agentStatus is one agent's trimming switch in the config: on, and where the value comes
// from (CONTEXT_PROXY_ENABLED, saved, follows enabled, default).
type agentStatus struct {
	Agent  string `json:"agent"`
	On     bool   `json:"on"`
	Source string `json:"source"`
	Route  string `json:"route"` // where the agent's requests go through the service
}

// status is the `status` command (seed 001, `context status [--json]`): the per-agent
// switches, whether the service answers, and the events summary of the session store,
// without the service. --json prints the context_status JSON with those added.
func status(ctx context.Context, args []string, sys system) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON (the context_status MCP tool's keys plus config, store, service and agents)")
	hours := fs.Int("hours", store.StatusDefaultHours, fmt.Sprintf("summarize the last `N` hours of events (%d to %d)", store.StatusMinHours, store.StatusMaxHours))
	configFlag := fs.String("config", "", "read config.toml from `PATH` (default: SMARTER_COMPACT_CONFIG, else the user config dir)")
	verbose := fs.Bool("verbose", false, "after the summary, the diagnostics: config, routes, store, every fail-open, the prompt cache's counts")
	if err := parseFlags(fs, args, sys.stdout); err != nil {
		return err
	}
	if *hours < store.StatusMinHours || *hours > store.StatusMaxHours {
		return usageError{fmt.Sprintf("status: --hours %d: must be an integer from %d to %d", *hours, store.StatusMinHours, store.StatusMaxHours)}
	}

	rep := statusReport{}
	port := 4100
	prices := savings.DefaultPrices() // when the config does not load
	path, explicit, err := config.Path(*configFlag, sys.getenv, sys.configDir)
	if err == nil {
		var rc config.Resolved
		if rc, _, err = config.LoadText(path, explicit, sys.getenv); err == nil {
			cfg := rc.Config
			rep.Config, port, prices = cfg.Path, cfg.Port, cfg.Prices
			rep.Memory = "recall on trim: " + cfg.Memory.String()
			rep.Agents = agentStatuses(cfg, &rc.File, sys.getenv, port)
		}
	}
	if err != nil {
		// Still report the store and the default port: status is what one runs when
		// something is wrong.
		rep.ConfigError = err.Error()
	}
	rep.Service, _ = findService(ctx, sys.configDir, port)

	root, err := openStore(sys)
	if err != nil {
		return err
	}
	defer root.Close()
	rep.Store = root.Dir()
	rep.Health = readHealth(ctx, sys, rep.Service, root.Dir())
	if rep.Status, err = root.Status(ctx, time.Now(), *hours); err != nil {
		return err
	}
	if rep.Savings, err = readSavings(ctx, root, prices, time.Now()); err != nil {
		return err
	}
	if rep.Agents == nil {
		rep.Agents = []agentStatus{}
	}
	if exe, err := sys.executable(); err == nil && rep.Service.Answering {
		checkStale(&rep, proxy.FileVersion(exe))
	}
	if *asJSON {
		return installer.WriteJSON(sys.stdout, rep)
	}
	writeStatusSummary(sys.stdout, &rep, *verbose)
	if *verbose {
		fmt.Fprintln(sys.stdout)
		writeStatus(sys.stdout, &rep)
	}
	return nil
}

// writeStatusSummary prints the plain summary `status` leads with (issue 15, Deliver 6): the
// money saved, is the service up, which agents trim, what the last hours did, and what to do
// next. Every line says something only it says; the details are writeStatus's (--verbose).
// The pipeline's health (upstream and store failures) comes right after the service line,
// since an error there is what the user must see first.
func writeStatusSummary(w io.Writer, rep *statusReport, verbose bool) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	writeSavingsHeadline(w, &rep.Savings) // "you saved $X today" first (issue 15)
	switch {
	case rep.Service.Answering && rep.Service.Error != "":
		p("Service: running, but %s", rep.Service.Error)
	case rep.Service.Answering:
		p("Service: running at %s (dashboard: %s/)", rep.Service.URL, rep.Service.URL)
	default:
		p("Service: not running at %s: wired agents cannot reach their model API; start it with 'smarter-compact serve' (or at login: 'smarter-compact service install')", rep.Service.URL)
	}
	if st := &rep.Status; st.ProxyStale != nil && *st.ProxyStale {
		p("Upgrade: the service runs an older build than the installed binary; restart it: %s", rep.Service.Restart)
	}
	if rep.ConfigError != "" {
		first, _, _ := strings.Cut(rep.ConfigError, "\n")
		p("Config: does not load (%s)", first)
	}
	if !rep.Health.Missing {
		writeHealth(w, &rep.Health) // every active problem with what to do, right after the service
	}
	if len(rep.Agents) > 0 {
		var on, off []string
		for _, a := range rep.Agents {
			if a.Agent == config.AgentUnknown {
				continue
			}
			if a.On {
				on = append(on, a.Agent)
			} else {
				off = append(off, a.Agent)
			}
		}
		switch {
		case len(off) == 0:
			p("Trimming: on for every agent (%s)", strings.Join(on, ", "))
		case len(on) == 0:
			p("Trimming: off for every agent (%s)", strings.Join(off, ", "))
		default:
			p("Trimming: on for %s; off for %s", strings.Join(on, ", "), strings.Join(off, ", "))
		}
	}
	st := &rep.Status
	p("Last %d hours: %d trims, %d tokens saved (estimated), %d %s", st.Hours, st.Trims, st.TokensSaved, st.FailOpens, plural(st.FailOpens, "request sent untrimmed after an error", "requests sent untrimmed after an error"))
	if !verbose {
		p("More: 'smarter-compact status --verbose' (details), 'smarter-compact doctor' (checks the wiring)")
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// agentStatuses lists the agents in display order with where their value comes from
// (Switches.Rule of f, the file cfg was resolved from).
func agentStatuses(cfg config.Config, f *config.File, getenv func(string) string, port int) []agentStatus {
	sw := config.SwitchesOf(&f.ContextProxy, getenv)
	var out []agentStatus
	for _, agent := range slices.Concat(config.ConfiguredAgents, []string{config.AgentUnknown}) {
		a := agentStatus{Agent: agent, On: cfg.Agents[agent], Route: fmt.Sprintf("http://127.0.0.1:%d/%s", port, agent)}
		_, a.Source = sw.Rule(agent)
		if agent == config.AgentUnknown {
			a.Route = fmt.Sprintf("http://127.0.0.1:%d (unprefixed routes)", port)
		}
		out = append(out, a)
	}
	return out
}

// findService probes the configured port and, when nothing of ours answers there, the
// address a running service recorded (serve --port; installer/addrfile.go). Elsewhere is set when the
// service answers on that other address, which agents wired to the configured port do not
// reach.
func findService(ctx context.Context, configDir string, port int) (st serviceStatus, elsewhere bool) {
	st = probeService(ctx, port)
	if st.Answering {
		return st, false
	}
	b := installer.ReadAddrFile(configDir)
	if b == "" || b == st.URL {
		return st, false
	}
	u, err := url.Parse(b)
	if err != nil {
		return st, false
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		return st, false
	}
	if other := probeService(ctx, p); other.Answering {
		other.Error = fmt.Sprintf("the service runs on %s (serve --port), not on the configured port %d: agents wired to port %d do not reach it; restart it without --port, or set [context_proxy] port = %d and run 'smarter-compact install'", other.URL, port, port, p)
		return other, true
	}
	return st, false
}

// probeService asks GET /healthz on the loopback port (installer.ProbeHealth).
func probeService(ctx context.Context, port int) serviceStatus {
	h, err := installer.ProbeHealth(ctx, port)
	st := serviceStatus{URL: h.URL, Build: h.Build, Error: installer.HealthProblem(h, err)}
	st.Answering = st.Error == ""
	return st
}

// proxyStaleNote replaces the store's checkout note once status compared builds.
const proxyStaleNote = "checkout_proxy_version is the installed binary's build (proxy:<first 12 hex of SHA-256 of the executable>); " +
	"proxy_stale is true when the running service reports another build on /healthz, or none (a release older than that report): restart it then"

// checkStale fills the seed's checkout_proxy_version and proxy_stale from the installed
// binary's build and the one the answering service reports (issue 17: upgrades in place).
func checkStale(rep *statusReport, installed string) {
	if installed == "proxy:dev" {
		return // the installed binary cannot be read: nothing to compare
	}
	stale := rep.Service.Build != installed
	rep.Status.CheckoutProxyVersion, rep.Status.ProxyStale, rep.Status.Note = &installed, &stale, proxyStaleNote
	if stale {
		rep.Service.Restart = restartCommand
	}
}

// writeStatus prints the diagnostics of `status --verbose`.
func writeStatus(w io.Writer, rep *statusReport) {
	st := &rep.Status
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	config := rep.Config
	if config == "" {
		config = "none (defaults)"
	}
	writeSavings(w, &rep.Savings)
	p("Config: %s", config)
	if rep.ConfigError != "" {
		p("  error: %s", strings.ReplaceAll(rep.ConfigError, "\n", "\n         "))
	}
	if rep.Memory != "" {
		p("Memory: %s", rep.Memory)
	}
	if len(rep.Agents) > 0 {
		p("Agents:")
		for _, a := range rep.Agents {
			state := "off"
			if a.On {
				state = "on"
			}
			p("  %-12s %-3s  %-22s via %s", a.Agent, state, "("+a.Source+")", a.Route)
		}
	}
	writeServiceStatus(p, rep)
	p("Store: %s (%d sessions read, %d skipped)", rep.Store, st.Sessions, st.Skipped)
	for _, k := range st.SkippedSessions {
		p("  skipped %s: %s", k.Session, k.Reason)
	}
	if rep.Health.Missing {
		writeHealth(w, &rep.Health) // else it is in the summary: a fault must not hide behind --verbose
	}

	p("Last %d hours (since %s):", st.Hours, st.Since)
	p("  Trims: %d, estimated tokens saved: %d, messages dropped: %d", st.Trims, st.TokensSaved, st.MessagesDropped)
	p("  Fail-opens (request sent untrimmed): %d", st.FailOpens)
	for _, e := range st.LastErrors {
		p("    %s  %s  %s  %s", e.At, e.Session, e.Location, e.Error)
	}
	if len(st.Latest) > 0 {
		p("  Latest writers: %s", strings.Join(slices.Sorted(maps.Values(st.Latest)), ", "))
	}

	writeCacheUsage(p, &st.Usage)
	switch {
	case st.ProxyStale == nil:
		p("  Proxy version check: the service does not answer, so there is no running build to compare with the installed binary")
	case *st.ProxyStale:
		p("  Proxy version check: stale, the service runs an older build than the installed binary; restart it: %s", rep.Service.Restart)
	default:
		p("  Proxy version check: the service runs the installed binary (%s)", *st.CheckoutProxyVersion)
	}
}

// writeServiceStatus prints the Service lines of `status --verbose`.
func writeServiceStatus(p func(string, ...any), rep *statusReport) {
	if rep.Service.Answering {
		p("Service: answering on %s", rep.Service.URL)
		if rep.Service.Error != "" {
			p("  but %s", rep.Service.Error)
		}
		if rep.Status.ProxyStale != nil && *rep.Status.ProxyStale {
			running := rep.Service.Build
			if running == "" {
				running = "an older release"
			}
			p("  stale: it runs %s, not the installed binary (%s); restart it: %s", running, *rep.Status.CheckoutProxyVersion, rep.Service.Restart)
		}
	} else {
		p("Service: not answering on %s (%s); start it with 'smarter-compact serve'", rep.Service.URL, rep.Service.Error)
	}
}

// writeCacheUsage prints the prompt cache lines of `status --verbose`.
func writeCacheUsage(p func(string, ...any), u *store.UsageStatus) {
	p("  Prompt cache: %d requests, %d with cache counts, hit ratio %s", u.Requests, u.WithCacheCounts, percent(u.HitRatio))
	if u.Requests > 0 {
		p("    tokens: input %d, cache read %d, cache creation %d, output %d", u.InputTokens, u.CacheReadTokens, u.CacheCreation, u.OutputTokens)
		p("    cache creation: new cut %d on %d requests (avg %s), other %d on %d requests (avg %s)",
			u.NewCut.CacheCreationTokens, u.NewCut.Requests, average(u.NewCut.Average),
			u.Other.CacheCreationTokens, u.Other.Requests, average(u.Other.Average))
	}
	if len(u.Breakpoints) > 0 {
		counts := slices.SortedFunc(maps.Keys(u.Breakpoints), func(a, b string) int {
			x, _ := strconv.Atoi(a)
			y, _ := strconv.Atoi(b)
			return x - y
		})
		parts := make([]string, len(counts))
		for i, k := range counts {
			parts[i] = fmt.Sprintf("%s → %d", k, u.Breakpoints[k])
		}
		p("    breakpoints (count → requests): %s", strings.Join(parts, ", "))
	}
	if len(u.BreakpointLayouts) > 0 {
		layouts := slices.SortedFunc(maps.Keys(u.BreakpointLayouts), func(a, b string) int {
			if d := u.BreakpointLayouts[b] - u.BreakpointLayouts[a]; d != 0 {
				return d
			}
			return strings.Compare(a, b)
		})
		p("    most common layouts:")
		for _, k := range layouts {
			p("      %-30s %d", k, u.BreakpointLayouts[k])
		}
	}
}

func percent(r *float64) string {
	if r == nil {
		return "n/a (no cache counts)"
	}
	return strconv.FormatFloat(*r*100, 'f', 1, 64) + "%"
}

func average(a *float64) string {
	if a == nil {
		return "n/a"
	}
	return strconv.FormatFloat(*a, 'f', 0, 64)
}
