package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/smarter-compact/smarter-compact/assets"
	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy"
)

// installFlags are the flags install and uninstall share.
type installFlags struct {
	agents  string
	service bool
	dryRun  bool
	config  string
}

func parseInstallFlags(name string, args []string, sys system) (installFlags, error) {
	var f installFlags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&f.agents, "agents", "", "only these agents, comma-separated (default: every installed one)")
	fs.BoolVar(&f.service, "service", false, "also "+name+" the login service")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the unified diff of every file it would touch, and write nothing")
	fs.StringVar(&f.config, "config", "", "smarter-compact's config.toml at `PATH` (default: SMARTER_COMPACT_CONFIG, else the user config dir)")
	err := parseFlags(fs, args, sys.stdout)
	return f, err
}

// install is the `install` command (DESIGN.md §2, §8; issue 5): it wires every installed
// agent (or those of --agents) to the proxy on the configured port, writes the upstreams the
// agents pointed at before into config.toml's [upstream.agents.<agent>] tables, and with --service registers
// the login service first, so the proxy runs before agents point at it. --dry-run prints the
// diffs and writes nothing. An agent that failed (a file that does not parse, a failed write)
// makes the exit status 1; its files are untouched.
func install(ctx context.Context, args []string, sys system) error {
	f, err := parseInstallFlags("install", args, sys)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	agents, err := selectAgents("install", f.agents)
	if err != nil {
		return err
	}
	cfgPath, cfg, err := installConfig(f.config, sys)
	if err != nil {
		return err
	}
	env, err := installEnv(sys, cfg.Port)
	if err != nil {
		return err
	}
	w := sys.stdout
	if f.service {
		if f.dryRun {
			fmt.Fprintln(w, "service: would register the login service (smarter-compact service install)")
		} else if err := serviceCmd(ctx, serviceArgs("install", f.config), sys); err != nil {
			return fmt.Errorf("login service: %w\nno agent was wired; fix this, or run install without --service", err)
		}
	}
	rep := installer.Install(env, agents, f.dryRun)
	failed := printReport(w, rep, "install", f.dryRun)
	if err := chainUpstreams(w, rep, cfgPath, cfg.Port, f.dryRun, upstreamRecordPath(env.StateDir)); err != nil {
		failed = append(failed, err)
	}
	if f.dryRun {
		fmt.Fprintln(w, "dry run: nothing written")
	} else if wired(rep) {
		if st := probeService(ctx, cfg.Port); !st.Answering {
			fmt.Fprintf(w, "the service does not answer at %s: the wired agents cannot reach their model API until it runs.\n"+
				"  start it at login: smarter-compact service install (or: smarter-compact install --service)\n"+
				"  or now, in a terminal: smarter-compact serve\n", st.URL)
		}
	}
	return errors.Join(failed...)
}

// uninstall is the `uninstall` command: it puts every agent's files back (the inverse diff,
// else the snapshots; issue 5, Deliver 6) and, with --service, removes the login service
// afterwards. It works with the service down.
func uninstall(ctx context.Context, args []string, sys system) error {
	f, err := parseInstallFlags("uninstall", args, sys)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	agents, err := selectAgents("uninstall", f.agents)
	if err != nil {
		return err
	}
	// The port only names the proxy in the agents' files; a broken config must not stop
	// anyone from unwiring, so it falls back to the default.
	port := 4100
	if _, cfg, err := installConfig(f.config, sys); err == nil {
		port = cfg.Port
	}
	env, err := installEnv(sys, port)
	if err != nil {
		return err
	}
	w := sys.stdout
	rep := installer.Uninstall(env, agents, f.dryRun)
	failed := printReport(w, rep, "uninstall", f.dryRun)
	if cfgPath, _, err := ConfigPath(f.config, sys.getenv, sys.configDir); err == nil {
		var unwired []string
		for _, a := range rep.Agents {
			if a.Err == nil {
				unwired = append(unwired, a.Agent)
			}
		}
		if err := unchainUpstreams(w, unwired, cfgPath, upstreamRecordPath(env.StateDir), f.dryRun); err != nil {
			failed = append(failed, err)
		}
	}
	if f.service {
		if f.dryRun {
			fmt.Fprintln(w, "service: would remove the login service (smarter-compact service uninstall)")
		} else if err := serviceCmd(ctx, serviceArgs("uninstall", f.config), sys); err != nil {
			failed = append(failed, fmt.Errorf("login service: %w", err))
		}
	}
	if f.dryRun {
		fmt.Fprintln(w, "dry run: nothing written")
	}
	return errors.Join(failed...)
}

// serviceArgs is the `service` command line for install and uninstall --service, with the
// config they were given.
func serviceArgs(sub, config string) []string {
	if config != "" {
		return []string{sub, "--config", config}
	}
	return []string{sub}
}

// selectAgents returns installer's agents, only those named in list (comma-separated) when
// it is not empty.
func selectAgents(cmd, list string) ([]installer.Agent, error) {
	all := installer.Agents(assets.OpenCodePlugin())
	var names []string
	for _, a := range all {
		names = append(names, a.Name())
	}
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	var want []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(names, n) {
			return nil, usageError{fmt.Sprintf("%s: --agents: unknown agent %q: use %s", cmd, n, strings.Join(names, ", "))}
		}
		want = append(want, n)
	}
	if len(want) == 0 {
		return nil, usageError{fmt.Sprintf("%s: --agents names no agent: use %s", cmd, strings.Join(names, ", "))}
	}
	var out []installer.Agent
	for _, a := range all {
		if slices.Contains(want, a.Name()) {
			out = append(out, a)
		}
	}
	return out, nil
}

// installConfig reads smarter-compact's own config: the port the agents are pointed at, and
// the file the chained upstreams go to. A missing file is fine (defaults), even one named.
func installConfig(flagPath string, sys system) (string, Config, error) {
	path, _, err := ConfigPath(flagPath, sys.getenv, sys.configDir)
	if err != nil {
		return "", Config{}, err
	}
	cfg, err := LoadConfig(path, false, sys.getenv)
	if err != nil {
		return "", Config{}, fmt.Errorf("%w\nnothing changed: fix the config first (the port the agents are pointed at comes from it)", err)
	}
	return path, cfg, nil
}

// installEnv is the installer's view of this machine (installer.Env).
func installEnv(sys system, port int) (installer.Env, error) {
	if sys.home == "" || !filepath.IsAbs(sys.home) {
		return installer.Env{}, errors.New("cannot find your home directory: set HOME (USERPROFILE on Windows)")
	}
	if sys.configDir == "" || !filepath.IsAbs(sys.configDir) {
		return installer.Env{}, errors.New("cannot find the user config directory: set XDG_CONFIG_HOME or HOME (APPDATA on Windows)")
	}
	exe, err := sys.executable()
	if err != nil {
		return installer.Env{}, err
	}
	return installer.Env{
		Home:      sys.home,
		ConfigDir: sys.configDir,
		Getenv:    sys.getenv,
		Port:      port,
		Exe:       exe,
		StateDir:  filepath.Join(sys.configDir, "smarter-compact", "install"),
		Now:       time.Now,
	}, nil
}

// printReport prints one block per agent and returns an error per failed agent.
func printReport(w io.Writer, rep installer.Report, cmd string, dryRun bool) []error {
	var failed []error
	would := func(done, planned string) string {
		if dryRun {
			return planned
		}
		return done
	}
	for _, a := range rep.Agents {
		switch {
		case a.Err != nil:
			fmt.Fprintf(w, "%s: failed, nothing written for it: %v\n", a.Agent, a.Err)
			failed = append(failed, fmt.Errorf("%s: %w\nfix the file named above (or move it aside), then run: smarter-compact %s --agents %s", a.Agent, a.Err, cmd, a.Agent))
			continue
		case a.Skipped != "":
			fmt.Fprintf(w, "%s: %s\n", a.Agent, strings.TrimPrefix(a.Skipped, a.Agent+": "))
			continue
		}
		fmt.Fprintf(w, "%s: %s\n", a.Agent, reportHeadline(a, cmd, would))
		for _, file := range a.Files {
			fmt.Fprintf(w, "  %s\n", reportFileLine(a, file, cmd, dryRun, would))
		}
		for _, n := range a.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		if dryRun && a.Diff != "" {
			io.WriteString(w, a.Diff)
			if !strings.HasSuffix(a.Diff, "\n") {
				io.WriteString(w, "\n")
			}
		}
	}
	return failed
}

// reportHeadline is what happened to a wired or unwired agent, the line after its name.
func reportHeadline(a installer.AgentReport, cmd string, would func(done, planned string) string) string {
	switch {
	case cmd == "install" && len(a.Files) == 0:
		return "already wired, nothing to change"
	case cmd == "install":
		return would("wired", "would wire")
	case a.Tier == 1:
		return would("unwired: removed what install added", "would remove what install added")
	case a.Tier == 2:
		return would("no usable install diff: restored the snapshots taken at install", "no usable install diff: would restore the snapshots taken at install")
	case a.Tier == 3:
		return would("no install record: removed the smarter-compact wiring found in the files", "no install record: would remove the smarter-compact wiring found in the files")
	default:
		return "nothing to undo"
	}
}

// reportFileLine is what happened to one of the agent's files.
func reportFileLine(a installer.AgentReport, file, cmd string, dryRun bool, would func(done, planned string) string) string {
	switch {
	case cmd == "install":
		return would("wrote", "would write") + " " + file
	case dryRun:
		return "would put back " + file
	case exists(file) && a.Tier == 3:
		return "edited " + file
	case exists(file):
		return "restored " + file
	default:
		return "removed " + file + " (install had created it)"
	}
}

// wired reports whether an install report has an agent that is wired now.
func wired(rep installer.Report) bool {
	for _, a := range rep.Agents {
		if a.Err == nil && a.Skipped == "" {
			return true
		}
	}
	return false
}

// chainUpstreams writes the base URLs the agents pointed at before install into config.toml's
// per-agent tables [upstream.agents.<agent>] (DESIGN.md §5: we chain instead of replacing),
// so that one agent's gateway never takes another agent's traffic of the same API family. A
// key already set to another URL is kept and the conflict reported; a URL equal to the
// family's upstream ([upstream] or the default) needs no key; a URL that points back at the
// proxy itself is dropped (it would loop). What it wrote goes to the record at recordPath
// ("" records nothing), for uninstall (unchainUpstreams).
func chainUpstreams(w io.Writer, rep installer.Report, cfgPath string, port int, dryRun bool, recordPath string) error {
	var f fileConfig
	if b, err := readConfigText(cfgPath); err == nil && b != nil {
		if decodeFile(cfgPath, b, &f) != nil {
			f = fileConfig{}
		}
	}
	family := proxy.DefaultSettings().Upstreams
	for fam, p := range f.families() {
		if p != nil {
			family[fam] = strings.TrimRight(*p, "/")
		}
	}
	keys := map[string][]configKey{}       // by agent
	urls := map[string]map[string]string{} // by agent, family: what the keys hold
	var lines []string
	for _, a := range rep.Agents {
		if a.Err != nil || a.Skipped != "" {
			continue
		}
		current := f.agentUpstreams(a.Agent).byFamily()
		for _, fam := range slices.Sorted(maps.Keys(a.Upstreams)) {
			u := strings.TrimRight(a.Upstreams[fam], "/")
			k := agentUpstreamKey(a.Agent, fam)
			if why := notChained(a.Agent, fam, u, port); why != "" {
				fmt.Fprintln(w, why)
				continue
			}
			if p := current[fam]; p != nil {
				if old := strings.TrimRight(*p, "/"); old != u {
					fmt.Fprintf(w, "%s: pointed at %s before; %s keeps %q from %s (edit it there to chain to %s)\n", a.Agent, u, k, old, cfgPath, u)
				}
				continue
			}
			if family[fam] == u {
				continue // the family's upstream already
			}
			keys[a.Agent] = append(keys[a.Agent], configKey{fam, tomlString(u)})
			if urls[a.Agent] == nil {
				urls[a.Agent] = map[string]string{}
			}
			urls[a.Agent][fam] = u
			lines = append(lines, fmt.Sprintf("%s: chained to its previous base URL: %s = %s", a.Agent, k, tomlString(u)))
		}
	}
	if len(keys) == 0 {
		return nil
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	if dryRun {
		fmt.Fprintf(w, "would write those keys to %s\n", cfgPath)
		return nil
	}
	old, err := readConfigText(cfgPath)
	rec := upstreamRecord{CreatedFile: old == nil, Tables: map[string]*upstreamTable{}}
	text := old
	for _, agent := range slices.Sorted(maps.Keys(keys)) {
		if err != nil {
			break
		}
		section := "upstream.agents." + agent
		created := !hasTable(text, section)
		last := text[bytes.LastIndexByte(text[:max(len(text)-1, 0)], '\n')+1:] // the last line
		rec.Tables[agent] = &upstreamTable{Keys: urls[agent], Created: created,
			Blank: created && len(text) > 0 && len(bytes.TrimSpace(last)) > 0,
			EOL:   created && len(text) > 0 && !bytes.HasSuffix(last, []byte("\n"))}
		text, err = setConfigKeys(text, section, keys[agent])
	}
	if err == nil && !bytes.Equal(text, old) {
		err = writeConfigFile(cfgPath, text)
	}
	if err != nil {
		return fmt.Errorf("config %s: %v\nthe agents are wired, but requests go to the default upstreams until you add:%s", cfgPath, err, keysText(keys))
	}
	fmt.Fprintf(w, "wrote those keys to %s (restart the service to use them)\n", cfgPath)
	if recordPath != "" {
		if err := mergeUpstreamRecord(recordPath, cfgPath, rec); err != nil {
			return fmt.Errorf("record %s: %v\nuninstall will not remove the keys written to %s; remove them by hand then", recordPath, err, cfgPath)
		}
	}
	return nil
}

// notChained is why agent's previous base URL u for family fam is not chained, one line
// for the report; "" when it may be.
func notChained(agent, fam, u string, port int) string {
	switch {
	case !slices.Contains(upstreamFamilies, fam):
		return fmt.Sprintf("%s: its previous %s base URL %s has no [upstream] key: requests go to the default", agent, fam, u)
	case !upstreamURL(u):
		return fmt.Sprintf("%s: its previous base URL %q is not an http(s) URL without query: not chained", agent, u)
	case loopsBack(u, port):
		return fmt.Sprintf("%s: its previous base URL %s is this proxy: not chained", agent, u)
	case !slices.Contains(configuredAgents, agent):
		return fmt.Sprintf("%s: has no [upstream.agents] table: its previous base URL %s is not chained", agent, u)
	}
	return ""
}

// keysText is keys as the tables to add by hand, each line indented: "\n  [upstream.agents.codex]\n  openai = …".
func keysText(keys map[string][]configKey) string {
	var add strings.Builder
	for _, agent := range slices.Sorted(maps.Keys(keys)) {
		fmt.Fprintf(&add, "\n  [upstream.agents.%s]", agent)
		for _, k := range keys[agent] {
			fmt.Fprintf(&add, "\n  %s = %s", k.name, k.value)
		}
	}
	return add.String()
}

// upstreamRecord is what install wrote into one config.toml's [upstream.agents.<agent>]
// tables. The records live in <configDir>/smarter-compact/install/upstreams.json (0600), an
// object from config.toml path to upstreamRecord, so that uninstall removes exactly those
// keys, and only while they still hold the URL install wrote.
type upstreamRecord struct {
	// CreatedFile: install created config.toml; uninstall removes it when it is left empty.
	CreatedFile bool `json:"created_file,omitempty"`
	// Tables are by agent.
	Tables map[string]*upstreamTable `json:"tables"`
}

// upstreamTable is what install wrote into one [upstream.agents.<agent>] table.
type upstreamTable struct {
	// Keys are family to the URL written.
	Keys map[string]string `json:"keys"`
	// Created: install appended the table header; Blank: and a blank line before it; EOL:
	// and a line end to the file's last line. All go again when uninstall leaves the table
	// empty.
	Created bool `json:"created,omitempty"`
	Blank   bool `json:"blank,omitempty"`
	EOL     bool `json:"eol,omitempty"`
}

func upstreamRecordPath(stateDir string) string { return filepath.Join(stateDir, "upstreams.json") }

func readUpstreamRecords(path string) (map[string]*upstreamRecord, error) {
	recs := map[string]*upstreamRecord{}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return recs, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	return recs, nil
}

func writeUpstreamRecords(path string, recs map[string]*upstreamRecord) error {
	if len(recs) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return err
	}
	return writeConfigFile(path, append(b, '\n'))
}

// mergeUpstreamRecord adds what one install wrote to the record; what an earlier install
// recorded for the same table keeps its Created and Blank.
func mergeUpstreamRecord(path, cfgPath string, add upstreamRecord) error {
	recs, err := readUpstreamRecords(path)
	if err != nil {
		return err
	}
	rec := recs[cfgPath]
	if rec == nil {
		rec = &upstreamRecord{CreatedFile: add.CreatedFile, Tables: map[string]*upstreamTable{}}
		recs[cfgPath] = rec
	}
	for agent, t := range add.Tables {
		if old := rec.Tables[agent]; old != nil {
			maps.Copy(old.Keys, t.Keys)
			continue
		}
		rec.Tables[agent] = t
	}
	return writeUpstreamRecords(path, recs)
}

// unchainUpstreams is chainUpstreams' inverse for uninstall: for each agent it removes from
// config.toml the [upstream.agents.<agent>] keys install recorded, each only while it still
// holds the URL install wrote (a key changed since is kept, and reported), and the table
// header (and file) install created once nothing else is left in it.
func unchainUpstreams(w io.Writer, agents []string, cfgPath, recordPath string, dryRun bool) error {
	recs, err := readUpstreamRecords(recordPath)
	if err != nil {
		return fmt.Errorf("record %s: %v\nthe [upstream.agents] keys install wrote to %s stay: remove them by hand", recordPath, err, cfgPath)
	}
	rec := recs[cfgPath]
	if rec == nil {
		return nil
	}
	old, err := readConfigText(cfgPath)
	if err != nil {
		return fmt.Errorf("config %s: %v", cfgPath, err)
	}
	var f fileConfig
	if old != nil {
		if err := decodeFile(cfgPath, old, &f); err != nil {
			return fmt.Errorf("%w\nthe [upstream.agents] keys install wrote there stay: fix the file, then run uninstall again", err)
		}
	}
	text := old
	var done []string
	for _, agent := range agents {
		t := rec.Tables[agent]
		if t == nil {
			continue
		}
		section := "upstream.agents." + agent
		current := f.agentUpstreams(agent).byFamily()
		var names []string
		for _, fam := range slices.Sorted(maps.Keys(t.Keys)) {
			k := agentUpstreamKey(agent, fam)
			switch p := current[fam]; {
			case p == nil:
			case strings.TrimRight(*p, "/") == t.Keys[fam]:
				names = append(names, fam)
				done = append(done, fmt.Sprintf("%s: %s the upstream install chained: %s = %s", agent, map[bool]string{true: "would remove", false: "removed"}[dryRun], k, tomlString(t.Keys[fam])))
			default:
				fmt.Fprintf(w, "%s: kept %s = %q in %s: changed since install wrote %q\n", agent, k, *p, cfgPath, t.Keys[fam])
			}
		}
		if len(names) > 0 && text != nil {
			next, err := removeConfigKeys(text, section, names, t.Created, t.Blank, t.EOL)
			if err != nil {
				return fmt.Errorf("config %s: %v", cfgPath, err)
			}
			text = next
		}
		delete(rec.Tables, agent)
	}
	for _, l := range done {
		fmt.Fprintln(w, l)
	}
	if dryRun {
		return nil
	}
	switch {
	case old == nil || bytes.Equal(text, old):
	case len(text) == 0 && rec.CreatedFile:
		err = os.Remove(cfgPath)
	default:
		err = writeConfigFile(cfgPath, text)
	}
	if err != nil {
		return fmt.Errorf("config %s: %v", cfgPath, err)
	}
	if len(rec.Tables) == 0 {
		delete(recs, cfgPath)
	}
	if err := writeUpstreamRecords(recordPath, recs); err != nil {
		return fmt.Errorf("record %s: %v", recordPath, err)
	}
	return nil
}

// upstreamURL accepts what config.toml's [upstream] keys accept (resolver.urlKey).
func upstreamURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.RawQuery == "" && u.Fragment == ""
}

// loopsBack reports a URL on this machine's loopback at the proxy's port.
func loopsBack(s string, port int) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	p := u.Port()
	if p == "" {
		p = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if p != strconv.Itoa(port) {
		return false
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback() || ip.IsUnspecified()
	}
	return strings.EqualFold(host, "localhost")
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
