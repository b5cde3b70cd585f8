package installer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// Outcomes of a Finding: CheckFail makes `doctor` exit 1; CheckWarn and CheckInfo only
// inform.
const (
	CheckOK   = "ok"
	CheckFail = "fail"
	CheckWarn = "warn"
	CheckInfo = "info"
)

// Finding is one line of `doctor` (about an agent, the login service, or app's other
// checks): what was checked, the outcome, and for anything but CheckOK the command (or edit)
// that fixes it. Its JSON is a line of `doctor --json`.
type Finding struct {
	Name    string `json:"name"`   // the agent, or "opencode (provider.anthropic.options.baseURL)"
	Status  string `json:"status"` // CheckOK, CheckFail, CheckWarn, CheckInfo
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// CheckOptions is what CheckAgents judges the agents' wiring against.
type CheckOptions struct {
	// Port is the proxy's configured port.
	Port int
	// Version is the first two words this build's `version` prints ("smarter-compact 1.4.0",
	// "smarter-compact dev"): every binary a hook or MCP entry names must print the same.
	Version string
	// Self is this executable. With a development Version ("… dev"), which every dev build
	// prints, a named binary must also have Self's bytes; "" skips that comparison.
	Self string
	// Timeout bounds each `<binary> version` run and each /healthz probe (default 5 s).
	Timeout time.Duration
	// HealthHeader is the response header by which GET /healthz names smarter-compact
	// ("X-Smarter-Compact").
	HealthHeader string
	// StartAdvice is what to run when the service does not answer: the one piece of advice
	// app gives everywhere (with or without a login service manager).
	StartAdvice string
	// Serving: the caller is the service answering on Port (the dashboard's wiring view,
	// every few seconds): base URLs on Port are not probed, and binaries are only checked
	// to exist, neither run nor hashed.
	Serving bool
}

// CheckAgents is `doctor` for each agent, in the order of Agents (issue 15, Deliver 3): its
// config file is one the agent can read (Claude Code's settings.json and ~/.claude.json are
// strict JSON: JSONC fails and the agent is not called wired); every base URL that goes
// through smarter-compact is on the configured port and answers GET /healthz with
// HealthHeader; every binary a hook, MCP entry or the OpenCode plugin names exists and is
// this version. It reads the files and changes nothing. Each failing Finding names the
// command that fixes it.
func CheckAgents(ctx context.Context, env Env, opts CheckOptions) []Finding {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	c := &checker{ctx: ctx, opts: opts, probed: map[string]error{}, ran: map[string]binaryVerdict{}}
	var out []Finding
	for _, w := range ReadWiring(env) {
		out = append(out, c.agent(env, w)...)
	}
	return out
}

type checker struct {
	ctx    context.Context
	opts   CheckOptions
	probed map[string]error         // origin → the /healthz verdict
	ran    map[string]binaryVerdict // binary → its verdict
}

// installFix is the command that rewires agent.
func installFix(agent string) string {
	return fmt.Sprintf("'smarter-compact install --agents %s'", agent)
}

func (c *checker) agent(env Env, w Wiring) []Finding {
	fix := installFix(w.Agent) + " routes it through smarter-compact"
	switch {
	case errors.Is(w.Err, fs.ErrNotExist):
		return []Finding{{Name: w.Agent, Status: CheckInfo, Message: "not wired (no " + w.File + ")", Fix: fix}}
	case w.Err != nil:
		return []Finding{{Name: w.Agent, Status: CheckWarn, Message: fmt.Sprintf("cannot read %s: %v", w.File, w.Err),
			Fix: "fix the file's syntax; the agent cannot read it either"}}
	}
	if w.Agent == (ClaudeCode{}).Name() {
		for _, path := range []string{w.File, claudeStatePath(env)} {
			b, err := os.ReadFile(path)
			if err != nil {
				continue
			}
			if err := strictJSON(path, b); err != nil {
				return []Finding{{Name: w.Agent, Status: CheckFail,
					Message: fmt.Sprintf("not wired: %s has comments or trailing commas: Claude Code reads strict JSON and ignores the whole file, wiring included", path),
					Fix:     fmt.Sprintf("remove the comments and trailing commas from %s (%v), then %s", path, lineOf(err), installFix(w.Agent))}}
			}
		}
	}
	var out []Finding
	for _, u := range w.URLs {
		if f, ours := c.url(w, u); ours {
			out = append(out, f)
		}
	}
	bins := namedBinaries(env, w)
	if len(out) == 0 && len(bins) == 0 {
		out = append(out, Finding{Name: w.Agent, Status: CheckInfo, Message: "not wired (" + w.File + " sends nothing through smarter-compact)", Fix: fix})
	}
	for _, exe := range slices.Sorted(maps.Keys(bins)) {
		out = append(out, c.binary(w.Agent, exe, bins[exe]))
	}
	if w.Unselected {
		out = append(out, Finding{Name: w.Agent, Status: CheckWarn,
			Message: fmt.Sprintf("%s defines model_providers.%s, but model_provider is %q: Codex does not use it", w.File, codexProvider, w.Selected),
			Fix:     "'smarter-compact install --agents codex' selects it; 'smarter-compact uninstall --agents codex' removes it"})
	}
	return out
}

// lineRE finds "line N" in a strictJSON error.
var lineRE = regexp.MustCompile(`: (line \d+):`)

// lineOf is where a strictJSON error says the first comment or trailing comma is.
func lineOf(err error) string {
	if m := lineRE.FindStringSubmatch(err.Error()); m != nil {
		return "first at " + m[1]
	}
	return "see the file"
}

// url judges one base URL of w that is ours (AgentURL.Ours): on the configured port, and
// answering GET /healthz as smarter-compact.
func (c *checker) url(w Wiring, u AgentURL) (Finding, bool) {
	p, ours := u.Ours(w.Agent, c.opts.Port)
	if !ours {
		return Finding{}, false
	}
	name := w.Agent
	if w.Agent == (OpenCode{}).Name() {
		name += " (" + u.Where + ")"
	}
	where := fmt.Sprintf("%s %s = %s", w.File, u.Where, u.URL)
	if p != strconv.Itoa(c.opts.Port) {
		return Finding{Name: name, Status: CheckFail,
			Message: fmt.Sprintf("stale: %s points at port %s, but smarter-compact is configured for port %d", where, p, c.opts.Port),
			Fix:     fmt.Sprintf("%s points it at port %d; 'smarter-compact uninstall --agents %s' removes the wiring", installFix(w.Agent), c.opts.Port, w.Agent),
		}, true
	}
	if c.opts.Serving {
		return Finding{Name: name, Status: CheckOK, Message: "wired to the live service: " + where}, true
	}
	if err := c.health(u.URL); err != nil {
		return Finding{Name: name, Status: CheckFail,
			Message: fmt.Sprintf("%s, but smarter-compact does not answer there (%v): the agent's requests fail", where, err),
			Fix:     fmt.Sprintf("%s; or 'smarter-compact uninstall --agents %s' to stop routing it through smarter-compact", c.opts.StartAdvice, w.Agent),
		}, true
	}
	return Finding{Name: name, Status: CheckOK, Message: "wired to the live service: " + where}, true
}

// health asks GET <origin of base>/healthz, bounded by the timeout, without proxies or
// redirects: nil when it answers 200 with the smarter-compact header.
func (c *checker) health(base string) error {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil {
		return err
	}
	origin := u.Scheme + "://" + u.Host
	if err, ok := c.probed[origin]; ok {
		return err
	}
	err = probeHealth(c.ctx, origin, c.opts.HealthHeader, c.opts.Timeout)
	c.probed[origin] = err
	return err
}

func probeHealth(ctx context.Context, origin, header string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, origin+"/healthz", nil)
	if err != nil {
		return err
	}
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err
		}
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || (header != "" && resp.Header.Get(header) == "") {
		return fmt.Errorf("GET /healthz answered %s without the %s header: another program on this port", resp.Status, header)
	}
	return nil
}

// binaryVerdict is what running one named binary found.
type binaryVerdict struct {
	status, msg string
}

// binary judges one executable that wheres of agent name: it exists, runs `version` within
// the timeout, prints this build's version and, for a development build, has Self's bytes.
func (c *checker) binary(agent, exe string, wheres []string) Finding {
	v, ok := c.ran[exe]
	if !ok {
		v = c.runVersion(exe)
		c.ran[exe] = v
	}
	what := strings.Join(wheres, ", ") + " run " + exe
	f := Finding{Name: agent, Status: v.status, Message: what + ": " + v.msg}
	if v.status != CheckOK {
		f.Fix = installFix(agent) + " writes the path of this build's stable copy into them"
	}
	return f
}

func (c *checker) runVersion(exe string) binaryVerdict {
	st, err := os.Stat(exe)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return binaryVerdict{CheckFail, "it does not exist (moved, or removed by a clean or an upgrade): the agent's hooks and recall tools fail"}
	case err != nil:
		return binaryVerdict{CheckFail, err.Error()}
	case st.IsDir():
		return binaryVerdict{CheckFail, "it is a directory, not an executable"}
	}
	if c.opts.Serving {
		return binaryVerdict{CheckOK, "it exists"}
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "version")
	cmd.WaitDelay = time.Second
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return binaryVerdict{CheckFail, fmt.Sprintf("`version` did not finish within %s", c.opts.Timeout)}
		}
		return binaryVerdict{CheckFail, fmt.Sprintf("`version` failed: %v", err)}
	}
	words := strings.Fields(stdout.String())
	got := strings.Join(words[:min(2, len(words))], " ") // "smarter-compact 1.4.0"
	if got != c.opts.Version {
		if got == "" {
			got = "nothing"
		}
		return binaryVerdict{CheckFail, fmt.Sprintf("it is %s, this is %s", got, c.opts.Version)}
	}
	if strings.HasSuffix(c.opts.Version, " dev") && c.opts.Self != "" {
		same, err := sameBytes(exe, c.opts.Self)
		if err != nil {
			return binaryVerdict{CheckWarn, "cannot compare it with this build: " + err.Error()}
		}
		if !same {
			return binaryVerdict{CheckFail, "it is another development build than this one (" + c.opts.Self + ")"}
		}
	}
	return binaryVerdict{CheckOK, "this version (" + c.opts.Version + ")"}
}

// sameBytes reports whether files a and b hold the same bytes.
func sameBytes(a, b string) (bool, error) {
	sum := func(p string) ([]byte, int64, error) {
		f, err := os.Open(p)
		if err != nil {
			return nil, 0, err
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(h, f)
		return h.Sum(nil), n, err
	}
	ha, na, err := sum(a)
	if err != nil {
		return false, err
	}
	hb, nb, err := sum(b)
	if err != nil {
		return false, err
	}
	return na == nb && bytes.Equal(ha, hb), nil
}

// namedBinaries are the smarter-compact executables w's agent runs, each with where it is
// named: Claude Code's hooks in settings.json and its MCP server in ~/.claude.json; Codex's
// [mcp_servers.smarter-compact]; OpenCode's mcp.smarter-compact and its plugin file.
func namedBinaries(env Env, w Wiring) map[string][]string {
	out := map[string][]string{}
	add := func(exe, where string) {
		if exe != "" && !slices.Contains(out[exe], where) {
			out[exe] = append(out[exe], where)
		}
	}
	switch w.Agent {
	case (ClaudeCode{}).Name():
		var settings struct {
			Hooks map[string][]json.RawMessage `json:"hooks"`
		}
		if readJSONC(w.File, &settings) == nil {
			for _, h := range claudeHooks {
				for _, e := range settings.Hooks[h.event] {
					if isOurHook(e, h.sub) {
						add(unquoteShell(strings.TrimSuffix(hookCommands(e)[0], " hook "+h.sub)), "the hooks ("+w.File+")")
					}
				}
			}
		}
		var state struct {
			MCPServers map[string]struct {
				Command string `json:"command"`
			} `json:"mcpServers"`
		}
		if readJSONC(claudeStatePath(env), &state) == nil {
			add(state.MCPServers[mcpServerName].Command, "the MCP server ("+claudeStatePath(env)+")")
		}
	case (Codex{}).Name():
		var conf struct {
			MCPServers map[string]struct {
				Command string `toml:"command"`
			} `toml:"mcp_servers"`
		}
		if b, err := os.ReadFile(w.File); err == nil && toml.Unmarshal(b, &conf) == nil {
			add(conf.MCPServers[mcpServerName].Command, "the MCP server ("+w.File+")")
		}
	case (OpenCode{}).Name():
		var conf struct {
			MCP map[string]struct {
				Command []string `json:"command"`
			} `json:"mcp"`
		}
		if readJSONC(w.File, &conf) == nil {
			if cmd := conf.MCP[mcpServerName].Command; len(cmd) > 0 {
				add(cmd[0], "the MCP server ("+w.File+")")
			}
		}
		plugin := openCodePluginPath(openCodeDir(env))
		if b, err := os.ReadFile(plugin); err == nil && bytes.Contains(b, []byte(pluginMarker)) {
			if m := pluginExeRE.FindSubmatch(b); m != nil {
				var exe string
				if json.Unmarshal(m[1], &exe) == nil {
					add(exe, "the plugin ("+plugin+")")
				}
			}
		}
	}
	return out
}

// pluginExeRE finds the executable in an OpenCode plugin file we wrote: the JSON string that
// replaced pluginExePlaceholder in `const exe = "__SMARTER_COMPACT_EXE__"`.
var pluginExeRE = regexp.MustCompile(`const exe = ("(?:[^"\\]|\\.)*")`)

// unquoteShell is shellQuote's inverse: a double-quoted word with \ " $ ` escaped; a bare
// word is returned as it is.
func unquoteShell(s string) string {
	s = strings.TrimSpace(s)
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	var b strings.Builder
	in := s[1 : len(s)-1]
	for i := 0; i < len(in); i++ {
		if in[i] == '\\' && i+1 < len(in) && strings.IndexByte("\\\"$`", in[i+1]) >= 0 {
			i++
		}
		b.WriteByte(in[i])
	}
	return b.String()
}
