package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

// healthTimeout bounds the GET /healthz that tells whether the service answers.
const healthTimeout = 1500 * time.Millisecond

// statusReport is `status --json`: the context_status summary (the same keys) plus the
// config, the per-agent switches and whether the service answers on its port.
type statusReport struct {
	store.Status
	Config      string        `json:"config"` // the config.toml read; "" when none (defaults)
	ConfigError string        `json:"configError,omitempty"`
	Store       string        `json:"store"`
	Service     serviceStatus `json:"service"`
	Agents      []agentStatus `json:"agents"`
}

// serviceStatus is the answer of GET http://127.0.0.1:<port>/healthz.
type serviceStatus struct {
	URL       string `json:"url"`
	Answering bool   `json:"answering"`
	Error     string `json:"error,omitempty"`
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
	if err := parseFlags(fs, args, sys.stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *hours < store.StatusMinHours || *hours > store.StatusMaxHours {
		return usageError{fmt.Sprintf("status: --hours %d: must be an integer from %d to %d", *hours, store.StatusMinHours, store.StatusMaxHours)}
	}

	rep := statusReport{}
	port := 4100
	path, explicit, err := ConfigPath(*configFlag, sys.getenv, sys.configDir)
	if err == nil {
		var cfg Config
		if cfg, err = LoadConfig(path, explicit, sys.getenv); err == nil {
			rep.Config, port = cfg.Path, cfg.Port
			rep.Agents = agentStatuses(cfg, sys.getenv, port)
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
	if rep.Status, err = root.Status(ctx, time.Now(), *hours); err != nil {
		return err
	}
	if rep.Agents == nil {
		rep.Agents = []agentStatus{}
	}
	if *asJSON {
		return writeJSON(sys.stdout, rep)
	}
	writeStatus(sys.stdout, &rep)
	return nil
}

// agentStatuses lists the agents in display order with where their value comes from
// (switchState.rule), read again from the config file (LoadConfig keeps only the resolved
// value).
func agentStatuses(cfg Config, getenv func(string) string, port int) []agentStatus {
	var f fileConfig
	if cfg.Path != "" {
		if b, err := readConfigFile(cfg.Path); err == nil {
			_ = decodeFile(cfg.Path, b, &f) // LoadConfig already decoded it without error
		}
	}
	sw := switchesOf(&f.ContextProxy, getenv)
	var out []agentStatus
	for _, agent := range slices.Concat(configuredAgents, []string{agentUnknown}) {
		a := agentStatus{Agent: agent, On: cfg.Agents[agent], Route: fmt.Sprintf("http://127.0.0.1:%d/%s", port, agent)}
		_, a.Source = sw.rule(agent)
		if agent == agentUnknown {
			a.Route = fmt.Sprintf("http://127.0.0.1:%d (unprefixed routes)", port)
		}
		out = append(out, a)
	}
	return out
}

// findService probes the configured port and, when nothing of ours answers there, the
// address a running service recorded (serve --port; addrfile.go). Elsewhere is set when the
// service answers on that other address, which agents wired to the configured port do not
// reach.
func findService(ctx context.Context, configDir string, port int) (st serviceStatus, elsewhere bool) {
	st = probeService(ctx, port)
	if st.Answering {
		return st, false
	}
	b := readAddrFile(configDir)
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

// probeService asks GET /healthz on the loopback port, with a short timeout and no proxy
// or redirects.
func probeService(ctx context.Context, port int) serviceStatus {
	st := serviceStatus{URL: "http://127.0.0.1:" + strconv.Itoa(port)}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, st.URL+"/healthz", nil)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		st.Error = fmt.Sprintf("GET /healthz answered %s, not smarter-compact's ok: another program on this port?", resp.Status)
		return st
	}
	st.Answering = true
	return st
}

// writeStatus prints the short human summary.
func writeStatus(w io.Writer, rep *statusReport) {
	st := &rep.Status
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	config := rep.Config
	if config == "" {
		config = "none (defaults)"
	}
	p("Config: %s", config)
	if rep.ConfigError != "" {
		p("  error: %s", strings.ReplaceAll(rep.ConfigError, "\n", "\n         "))
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
	if rep.Service.Answering {
		p("Service: answering on %s", rep.Service.URL)
		if rep.Service.Error != "" {
			p("  but %s", rep.Service.Error)
		}
	} else {
		p("Service: not answering on %s (%s); start it with 'smarter-compact serve'", rep.Service.URL, rep.Service.Error)
	}
	p("Store: %s (%d sessions read, %d skipped)", rep.Store, st.Sessions, st.Skipped)
	for _, k := range st.SkippedSessions {
		p("  skipped %s: %s", k.Session, k.Reason)
	}

	p("")
	p("Last %d hours (since %s):", st.Hours, st.Since)
	p("  Trims: %d, estimated tokens saved: %d, messages dropped: %d", st.Trims, st.TokensSaved, st.MessagesDropped)
	p("  Fail-opens (request sent untrimmed): %d", st.FailOpens)
	for _, e := range st.LastErrors {
		p("    %s  %s  %s  %s", e.At, e.Session, e.Location, e.Error)
	}
	if len(st.Latest) > 0 {
		p("  Latest writers: %s", strings.Join(slices.Sorted(maps.Values(st.Latest)), ", "))
	}

	u := &st.Usage
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
	p("  Proxy version check: not available, this build has no proxy/ checkout to compare with (see note in --json)")
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
