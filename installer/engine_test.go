package installer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeAgent wires a made-up agent through the edit engine, the way the real agents do: a
// JSON(C) settings file, a TOML config and a file of its own that install creates. It is
// installed when its directory exists.
type fakeAgent struct {
	name    string
	jsonSet map[string]string // pointer → JSON value ("{port}" becomes the port)
	tomlKey map[string]string // top-level key → JSON value
	tables  map[string]string // header → table text
	plugin  bool              // also create plugin.js
	extra   []FileEdit        // appended to the plan as they are
	// read reads a file for Plan (nil: from disk); the property tests plan from memory.
	read func(path string) ([]byte, os.FileMode, error)
}

func (f fakeAgent) Name() string { return f.name }

func (f fakeAgent) dir(env Env) string      { return filepath.Join(env.Home, "."+f.name) }
func (f fakeAgent) jsonPath(env Env) string { return filepath.Join(f.dir(env), "settings.json") }
func (f fakeAgent) tomlPath(env Env) string { return filepath.Join(f.dir(env), "config.toml") }
func (f fakeAgent) pluginPath(env Env) string {
	return filepath.Join(f.dir(env), "plugin", "smarter-compact.js")
}

func (f fakeAgent) Files(env Env) []string {
	return []string{f.jsonPath(env), f.tomlPath(env), f.pluginPath(env)}
}

func (f fakeAgent) Plan(env Env) (*AgentPlan, error) {
	if _, err := os.Stat(f.dir(env)); err != nil && f.read == nil {
		return nil, fmt.Errorf("%s: %w (looked for %s)", f.name, ErrNotInstalled, f.dir(env))
	}
	port := func(s string) string { return strings.ReplaceAll(s, "{port}", fmt.Sprint(env.Port)) }
	readForPlan := readForPlan
	if f.read != nil {
		readForPlan = f.read
	}
	plan := &AgentPlan{Agent: f.name}
	if len(f.jsonSet) > 0 {
		fe, doc, err := openForPlan(readForPlan, f.jsonPath(env), ParseJSONDoc)
		if err != nil {
			return nil, err
		}
		for _, ptr := range slices.Sorted(maps.Keys(f.jsonSet)) {
			if old, ok := doc.Get(ptr); ok && ptr == "/env/ANTHROPIC_BASE_URL" && !strings.Contains(string(old), "127.0.0.1") {
				plan.Upstreams = map[string]string{"anthropic": strings.Trim(string(old), `"`)}
			}
			value := json.RawMessage(port(f.jsonSet[ptr]))
			if parent, ok := strings.CutSuffix(ptr, "/-"); ok { // append once, like the real agents
				var elems []json.RawMessage
				if raw, ok := doc.Get(parent); ok && json.Unmarshal(raw, &elems) == nil &&
					slices.ContainsFunc(elems, func(e json.RawMessage) bool { return sameValue(e, value) }) {
					continue
				}
			}
			op, err := doc.Set(ptr, value)
			if err != nil {
				return nil, err
			}
			fe.Ops = append(fe.Ops, op)
		}
		fe.After = doc.Bytes()
		if fe.Before == nil && len(fe.Ops) == 0 {
			fe.After = nil
		}
		plan.Files = append(plan.Files, fe)
	}
	if len(f.tomlKey)+len(f.tables) > 0 {
		fe, doc, err := openForPlan(readForPlan, f.tomlPath(env), ParseTOMLDoc)
		if err != nil {
			return nil, err
		}
		for _, k := range slices.Sorted(maps.Keys(f.tomlKey)) {
			op, err := doc.SetKey(k, json.RawMessage(port(f.tomlKey[k])))
			if err != nil {
				return nil, err
			}
			fe.Ops = append(fe.Ops, op)
		}
		for _, h := range slices.Sorted(maps.Keys(f.tables)) {
			want := port(f.tables[h])
			if cur, ok := doc.Table(h); ok && sameTOML(cur, want) {
				continue
			}
			op, err := doc.SetTable(h, want)
			if err != nil {
				return nil, err
			}
			fe.Ops = append(fe.Ops, op)
		}
		fe.After = doc.Bytes()
		plan.Files = append(plan.Files, fe)
	}
	if f.plugin {
		before, _, err := readForPlan(f.pluginPath(env))
		if err != nil {
			return nil, err
		}
		content := port("// smarter-compact plugin, port {port}\n")
		fe := FileEdit{Path: f.pluginPath(env), Before: before, After: []byte(content), Mode: 0o600}
		if before == nil || string(before) != content {
			fe.Ops = []Op{{Format: "file", New: quoteJSON(content)}}
		}
		plan.Files = append(plan.Files, fe)
	}
	plan.Files = append(plan.Files, f.extra...)
	return plan, nil
}

func readForPlan(path string) ([]byte, os.FileMode, error) {
	b, ok, err := readFile(path)
	if err != nil || !ok {
		return nil, 0o600, err
	}
	return b, fileMode(path, 0o600), nil
}

// openForPlan reads path with read and parses it with parse; the FileEdit it returns
// holds the path, the bytes before and the mode. A parse error names the path.
func openForPlan[D any](read func(string) ([]byte, os.FileMode, error), path string, parse func([]byte) (D, error)) (FileEdit, D, error) {
	var doc D
	before, mode, err := read(path)
	if err != nil {
		return FileEdit{}, doc, err
	}
	if doc, err = parse(before); err != nil {
		return FileEdit{}, doc, fmt.Errorf("%s: %w", path, err)
	}
	return FileEdit{Path: path, Before: before, Mode: mode}, doc, nil
}

// theFake is the fake agent most tests use.
func theFake() fakeAgent {
	return fakeAgent{
		name: "fake",
		jsonSet: map[string]string{
			"/env/ANTHROPIC_BASE_URL":        `"http://127.0.0.1:{port}/claude-code"`,
			"/mcpServers/smarter-compact":    `{"command":"/opt/sc","args":["mcp"]}`,
			"/hooks/SessionStart/-":          `{"hooks":[{"type":"command","command":"sc hook session-start"}]}`,
			"/permissions/allow/-":           `"mcp__smarter-compact"`,
			"/statusLine/padding":            `0`,
			"/plugins/~1opt~1sc/enabled":     `true`,
			"/deeply/nested/parents/created": `"<&>"`,
		},
		tomlKey: map[string]string{"model_provider": `"smarter-compact"`},
		tables: map[string]string{
			"[model_providers.smarter-compact]": "name = \"Smarter Compact\"\nbase_url = \"http://127.0.0.1:{port}/codex\"\n",
			"[mcp_servers.smarter-compact]":     "command = \"/opt/sc\"\nargs = [\"mcp\"]\n",
		},
		plugin: true,
	}
}

const fakeSettings = "{\r\n" +
	"  // my settings\r\n" +
	"  \"env\": {\r\n" +
	"    \"ANTHROPIC_BASE_URL\": \"https://gateway.example.com\", // company gateway\r\n" +
	"    \"DISABLE_TELEMETRY\": \"1\",\r\n" +
	"  },\r\n" +
	"  \"hooks\": {\"SessionStart\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"echo hi\"}]}]},\r\n" +
	"  \"permissions\": {\r\n" +
	"    \"allow\": [\"Read\"]\r\n" +
	"  },\r\n" +
	"  \"model\":   \"opus\"\r\n" +
	"}\r\n"

const fakeConfig = `# Codex config
model = "gpt-5-codex" # default
model_provider = "openai"

[projects."/home/u/code"]
trust_level = "trusted"
`

// fakeEnv makes a home with the fake agent's directory and files in it.
func fakeEnv(t *testing.T, files map[string]string) Env {
	t.Helper()
	home, cfg := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".fake"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		p := filepath.Join(home, ".fake", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Env{
		Home: home, ConfigDir: cfg, Port: 4100, Exe: "/opt/sc",
		StateDir: filepath.Join(cfg, "smarter-compact", "install"),
		Now:      func() time.Time { return time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC) },
	}
}

// snapshotTree reads every file under root (relative slash paths → bytes).
func snapshotTree(t *testing.T, root string) map[string]string {
	t.Helper()
	files, err := walkTree(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	tree := map[string]string{}
	for name, b := range files {
		tree[name] = string(b)
	}
	return tree
}

// walkTree reads every regular file under root by its slash path; on an error it
// returns what it read so far with the error.
func walkTree(root string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	return out, err
}

func sameTree(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: %s is missing", what, k)
		} else if g != w {
			t.Errorf("%s: %s is\n%q\nwant\n%q", what, k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: %s should not exist", what, k)
		}
	}
}

func one(t *testing.T, r Report) AgentReport {
	t.Helper()
	if len(r.Agents) != 1 {
		t.Fatalf("report has %d agents", len(r.Agents))
	}
	return r.Agents[0]
}

func mustOK(t *testing.T, what string, rep AgentReport) AgentReport {
	t.Helper()
	if rep.Err != nil || rep.Skipped != "" {
		t.Fatalf("%s: err %v, skipped %q", what, rep.Err, rep.Skipped)
	}
	return rep
}

// posixModes: the system keeps POSIX permission bits. Windows does not (os.Chmod sets only
// the read-only flag), so the tests check modes only elsewhere; checkModes says so.
const posixModes = runtime.GOOS != "windows"

func checkModes(t *testing.T) {
	t.Helper()
	if !posixModes {
		t.Log("file modes not checked: Windows has no POSIX permission bits")
	}
}

func perm(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestEngineInstallUninstall: install edits the files (modes kept, new files 0600), keeps a
// diff and snapshots private; uninstall with no edits in between gives back every byte and
// removes what install created, the state included.
func TestEngineInstallUninstall(t *testing.T) {
	t.Parallel()
	env := fakeEnv(t, map[string]string{"settings.json": fakeSettings, "config.toml": fakeConfig})
	agent := theFake()
	before := snapshotTree(t, env.Home)

	rep := mustOK(t, "Install", one(t, Install(env, []Agent{agent}, false)))
	if len(rep.Files) != 3 {
		t.Errorf("Files = %v, want the three files", rep.Files)
	}
	if rep.Upstreams["anthropic"] != "https://gateway.example.com" {
		t.Errorf("Upstreams = %v", rep.Upstreams)
	}
	after := snapshotTree(t, env.Home)
	settings := after[".fake/settings.json"]
	for _, want := range []string{
		"\"ANTHROPIC_BASE_URL\": \"http://127.0.0.1:4100/claude-code\", // company gateway\r\n",
		"\"created\": \"<&>\"",
		"  // my settings\r\n",
	} {
		if !strings.Contains(settings, want) {
			t.Errorf("settings.json lacks %q:\n%s", want, settings)
		}
	}
	if strings.Contains(strings.ReplaceAll(settings, "\r\n", ""), "\n") {
		t.Errorf("settings.json got a bare LF line end:\n%q", settings)
	}
	if !strings.Contains(after[".fake/config.toml"], "model_provider = \"smarter-compact\"\n") ||
		!strings.Contains(after[".fake/config.toml"], "[mcp_servers.smarter-compact]\n") {
		t.Errorf("config.toml:\n%s", after[".fake/config.toml"])
	}
	// Modes: kept for existing files, 0600 for ours, 0700 for directories we made.
	checkModes(t)
	if m := perm(t, agent.jsonPath(env)); posixModes && m != 0o644 {
		t.Errorf("settings.json mode %v, want 0644 (kept)", m)
	}
	if m := perm(t, agent.pluginPath(env)); posixModes && m != 0o600 {
		t.Errorf("plugin mode %v, want 0600", m)
	}
	if m := perm(t, filepath.Dir(agent.pluginPath(env))); posixModes && m != 0o700 {
		t.Errorf("plugin dir mode %v, want 0700", m)
	}
	for _, p := range []string{diffPath(env, "fake"), indexPath(env, "fake"), filepath.Join(snapshotDir(env, "fake"), "1.snapshot")} {
		if m := perm(t, p); posixModes && m != 0o600 {
			t.Errorf("%s mode %v, want 0600", p, m)
		}
	}
	if m := perm(t, snapshotDir(env, "fake")); posixModes && m != 0o700 {
		t.Errorf("snapshot dir mode %v, want 0700", m)
	}

	// The diff records what was there before.
	diff, err := readDiff(env, "fake")
	if err != nil || diff == nil {
		t.Fatalf("readDiff: %v", err)
	}
	if diff.InstalledAt != "2026-05-01T12:00:00Z" || len(diff.Files) != 3 || diff.Upstreams["anthropic"] == "" {
		t.Errorf("diff = %+v", diff)
	}
	var sawOld bool
	for _, op := range diff.Files[0].Ops {
		if op.Path == "/env/ANTHROPIC_BASE_URL" && string(op.Old) == `"https://gateway.example.com"` {
			sawOld = true
		}
	}
	if !sawOld {
		t.Errorf("the diff does not record the old base URL: %+v", diff.Files[0].Ops)
	}
	if diff.Files[2].Existed || diff.Files[2].Snapshot != "" {
		t.Errorf("created file recorded as %+v", diff.Files[2])
	}

	rep = mustOK(t, "Uninstall", one(t, Uninstall(env, []Agent{agent}, false)))
	if rep.Tier != 1 {
		t.Errorf("Tier = %d, want 1", rep.Tier)
	}
	sameTree(t, "after uninstall", snapshotTree(t, env.Home), before)
	if _, err := os.Stat(diffPath(env, "fake")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the diff is still there: %v", err)
	}
	if _, err := os.Stat(snapshotDir(env, "fake")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the snapshots are still there: %v", err)
	}
	if m := perm(t, agent.jsonPath(env)); posixModes && m != 0o644 {
		t.Errorf("settings.json mode after uninstall %v, want 0644", m)
	}
}

// TestEngineIdempotent: a second install writes nothing; an install with a new port keeps
// the first snapshot and the first Old values, so uninstall still gives back the original.
func TestEngineIdempotent(t *testing.T) {
	t.Parallel()
	env := fakeEnv(t, map[string]string{"settings.json": fakeSettings, "config.toml": fakeConfig})
	agent := theFake()
	before := snapshotTree(t, env.Home)
	mustOK(t, "Install", one(t, Install(env, []Agent{agent}, false)))
	installed := snapshotTree(t, env.Home)
	state := snapshotTree(t, env.StateDir)

	rep := mustOK(t, "second Install", one(t, Install(env, []Agent{agent}, false)))
	if len(rep.Files) != 0 || rep.Diff != "" || !slices.Contains(rep.Notes, "already installed: nothing to change") {
		t.Errorf("second Install: files %v, notes %v, diff\n%s", rep.Files, rep.Notes, rep.Diff)
	}
	sameTree(t, "after a second install", snapshotTree(t, env.Home), installed)
	sameTree(t, "state after a second install", snapshotTree(t, env.StateDir), state)

	env.Port = 4200
	rep = mustOK(t, "Install on a new port", one(t, Install(env, []Agent{agent}, false)))
	if len(rep.Files) != 3 || !strings.Contains(rep.Diff, "+    \"ANTHROPIC_BASE_URL\": \"http://127.0.0.1:4200/claude-code\"") {
		t.Errorf("new port: files %v, diff\n%s", rep.Files, rep.Diff)
	}
	if rep.Upstreams["anthropic"] != "https://gateway.example.com" {
		t.Errorf("the first upstream was lost: %v", rep.Upstreams)
	}
	diff, _ := readDiff(env, "fake")
	for _, op := range diff.Files[0].Ops {
		if op.Path == "/env/ANTHROPIC_BASE_URL" && (string(op.Old) != `"https://gateway.example.com"` || !strings.Contains(string(op.New), "4200")) {
			t.Errorf("merged op %s: old %s new %s", op.Path, op.Old, op.New)
		}
	}
	newState := snapshotTree(t, env.StateDir)
	if newState["fake/1.snapshot"] != state["fake/1.snapshot"] || newState["fake/2.snapshot"] != state["fake/2.snapshot"] {
		t.Error("the snapshots changed on a second install")
	}
	mustOK(t, "Uninstall", one(t, Uninstall(env, []Agent{agent}, false)))
	sameTree(t, "after uninstall", snapshotTree(t, env.Home), before)
}

// TestEngineUserEditKept: the user edits our files between install and uninstall (their own
// keys, one of our values, comments); uninstall takes out what is still ours and leaves all
// of theirs.
func TestEngineUserEditKept(t *testing.T) {
	t.Parallel()
	env := fakeEnv(t, map[string]string{"settings.json": fakeSettings, "config.toml": fakeConfig})
	agent := theFake()
	mustOK(t, "Install", one(t, Install(env, []Agent{agent}, false)))

	// The user's edits, made with the editors (as text edits a person could make).
	jdoc, err := ParseJSONDoc(mustRead(t, agent.jsonPath(env)))
	if err != nil {
		t.Fatal(err)
	}
	for ptr, v := range map[string]string{
		"/theme":                         `"dark"`,
		"/env/MAX_THINKING_TOKENS":       `"8000"`,
		"/statusLine/command":            `"my-status"`,
		"/mcpServers/smarter-compact/x":  `1`, // our server, changed by the user: theirs now
		"/deeply/nested/parents/created": `"mine"`,
	} {
		if _, err := jdoc.Set(ptr, json.RawMessage(v)); err != nil {
			t.Fatal(err)
		}
	}
	writeBytes(t, agent.jsonPath(env), jdoc.Bytes())
	toml := "# my note\n" + string(mustRead(t, agent.tomlPath(env))) + "\n[profiles.work]\nmodel = \"o3\"\n"
	toml = strings.Replace(toml, "[mcp_servers.smarter-compact]\n", "[mcp_servers.smarter-compact]\nenv = { A = \"1\" }\n", 1)
	writeBytes(t, agent.tomlPath(env), []byte(toml))
	writeBytes(t, agent.pluginPath(env), []byte("// my own plugin now\n"))

	rep := mustOK(t, "Uninstall", one(t, Uninstall(env, []Agent{agent}, false)))
	if rep.Tier != 1 {
		t.Errorf("Tier = %d, want 1", rep.Tier)
	}
	got, err := ParseJSONDoc(mustRead(t, agent.jsonPath(env)))
	if err != nil {
		t.Fatal(err)
	}
	for ptr, want := range map[string]string{
		"/theme":                         `"dark"`,
		"/env":                           `{"ANTHROPIC_BASE_URL":"https://gateway.example.com","DISABLE_TELEMETRY":"1","MAX_THINKING_TOKENS":"8000"}`,
		"/statusLine":                    `{"command":"my-status"}`,
		"/mcpServers/smarter-compact":    `{"command":"/opt/sc","args":["mcp"],"x":1}`,
		"/deeply/nested/parents/created": `"mine"`,
		"/hooks/SessionStart":            `[{"hooks":[{"type":"command","command":"echo hi"}]}]`,
		"/permissions/allow":             `["Read"]`,
		"/model":                         `"opus"`,
	} {
		if v, ok := got.Get(ptr); !ok || string(v) != want {
			t.Errorf("%s = %s, want %s", ptr, v, want)
		}
	}
	if _, ok := got.Get("/plugins"); ok {
		t.Error("/plugins, made by install and untouched, is still there")
	}
	if !strings.Contains(string(got.Bytes()), "  // my settings\r\n") {
		t.Error("the user's comment is gone")
	}
	wantTOML := "# my note\n" + fakeConfig +
		"\n[mcp_servers.smarter-compact]\nenv = { A = \"1\" }\ncommand = \"/opt/sc\"\nargs = [\"mcp\"]\n\n[profiles.work]\nmodel = \"o3\"\n"
	if g := string(mustRead(t, agent.tomlPath(env))); g != wantTOML {
		t.Errorf("config.toml:\n%s\nwant\n%s", g, wantTOML)
	}
	if g := string(mustRead(t, agent.pluginPath(env))); g != "// my own plugin now\n" {
		t.Errorf("the user's plugin file is %q", g)
	}
	for _, want := range []string{"/mcpServers", "/deeply", "[mcp_servers.smarter-compact]", "the file"} {
		if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "left "+want+" as it is") }) {
			t.Errorf("no note about %s: %v", want, rep.Notes)
		}
	}
	if !strings.Contains(rep.Diff, "--- "+agent.jsonPath(env)) || !strings.Contains(rep.Diff, "+++ "+agent.tomlPath(env)) {
		t.Errorf("uninstall diff:\n%s", rep.Diff)
	}
}

// TestEngineBrokenFile: a file that does not parse stops that agent with the position, writes
// nothing for it (no state either), and other agents still install.
func TestEngineBrokenFile(t *testing.T) {
	t.Parallel()
	env := fakeEnv(t, map[string]string{
		"settings.json": "{\n  \"env\": {\n    \"A\": \"1\",,\n  }\n}\n",
		"config.toml":   fakeConfig,
	})
	other := fakeAgent{name: "other", jsonSet: map[string]string{"/a": `1`}}
	if err := os.MkdirAll(other.dir(env), 0o755); err != nil {
		t.Fatal(err)
	}
	before := snapshotTree(t, env.Home)
	r := Install(env, []Agent{theFake(), other}, false)
	if len(r.Agents) != 2 {
		t.Fatalf("%d reports", len(r.Agents))
	}
	if err := r.Agents[0].Err; err == nil || !strings.Contains(err.Error(), "line 3, column 14") || !strings.Contains(err.Error(), "fix the file") {
		t.Errorf("broken agent: err %v", err)
	}
	for p, b := range before {
		if got := snapshotTree(t, env.Home)[p]; got != b {
			t.Errorf("%s changed after a failed install", p)
		}
	}
	if _, err := os.Stat(filepath.Join(env.StateDir, "fake.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed install left a diff: %v", err)
	}
	if _, err := os.Stat(snapshotDir(env, "fake")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed install left snapshots: %v", err)
	}
	mustOK(t, "other agent", r.Agents[1])
	if got := string(mustRead(t, other.jsonPath(env))); got != "{\n  \"a\": 1\n}\n" {
		t.Errorf("other agent's new file: %q", got)
	}
}

// TestEngineWriteFailsRollsBack: when one file cannot be written, the ones written before it
// are put back and no install record or snapshot stays.
func TestEngineWriteFailsRollsBack(t *testing.T) {
	t.Parallel()
	env := fakeEnv(t, map[string]string{"settings.json": fakeSettings, "config.toml": fakeConfig, "blocker": "a file, not a directory\n"})
	agent := theFake()
	agent.extra = []FileEdit{{Path: filepath.Join(agent.dir(env), "blocker", "x.js"), After: []byte("x"), Mode: 0o600}}
	before := snapshotTree(t, env.Home)
	rep := one(t, Install(env, []Agent{agent}, false))
	if rep.Err == nil || !strings.Contains(rep.Err.Error(), "put back") {
		t.Fatalf("Install: err %v", rep.Err)
	}
	sameTree(t, "after a failed write", snapshotTree(t, env.Home), before)
	sameTree(t, "state after a failed write", snapshotTree(t, env.StateDir), map[string]string{})
}

// TestEngineDryRun: a dry run shows a unified diff of every file and writes nothing at all,
// for install and for uninstall.
func TestEngineDryRun(t *testing.T) {
	t.Parallel()
	env := fakeEnv(t, map[string]string{"settings.json": fakeSettings, "config.toml": fakeConfig})
	agent := theFake()
	before := snapshotTree(t, env.Home)
	rep := mustOK(t, "dry Install", one(t, Install(env, []Agent{agent}, true)))
	for _, p := range agent.Files(env) {
		if !strings.Contains(rep.Diff, "--- "+p+"\n+++ "+p+"\n") {
			t.Errorf("dry-run diff lacks the headers of %s:\n%s", p, rep.Diff)
		}
	}
	if !strings.Contains(rep.Diff, "-model_provider = \"openai\"\n+model_provider = \"smarter-compact\"\n") ||
		!strings.Contains(rep.Diff, "+// smarter-compact plugin, port 4100\n") {
		t.Errorf("dry-run diff:\n%s", rep.Diff)
	}
	if len(rep.Files) != 3 {
		t.Errorf("dry-run Files = %v", rep.Files)
	}
	sameTree(t, "after a dry install", snapshotTree(t, env.Home), before)
	if _, err := os.Stat(filepath.Dir(env.StateDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a dry run made the state directory: %v", err)
	}

	mustOK(t, "Install", one(t, Install(env, []Agent{agent}, false)))
	installed, state := snapshotTree(t, env.Home), snapshotTree(t, env.StateDir)
	rep = mustOK(t, "dry Uninstall", one(t, Uninstall(env, []Agent{agent}, true)))
	if rep.Tier != 1 || len(rep.Files) != 3 || !strings.Contains(rep.Diff, "+model_provider = \"openai\"\n") {
		t.Errorf("dry Uninstall: tier %d files %v diff\n%s", rep.Tier, rep.Files, rep.Diff)
	}
	sameTree(t, "after a dry uninstall", snapshotTree(t, env.Home), installed)
	sameTree(t, "state after a dry uninstall", snapshotTree(t, env.StateDir), state)
}

// TestEngineTier2: with the diff gone or corrupt, uninstall restores the snapshots, says what
// it overwrites and removes the file install created.
func TestEngineTier2(t *testing.T) {
	t.Parallel()
	for _, damage := range []string{"missing", "corrupt"} {
		t.Run(damage, func(t *testing.T) {
			t.Parallel()
			env := fakeEnv(t, map[string]string{"settings.json": fakeSettings, "config.toml": fakeConfig})
			agent := theFake()
			before := snapshotTree(t, env.Home)
			mustOK(t, "Install", one(t, Install(env, []Agent{agent}, false)))
			if damage == "missing" {
				if err := os.Remove(diffPath(env, "fake")); err != nil {
					t.Fatal(err)
				}
			} else {
				writeBytes(t, diffPath(env, "fake"), []byte(`{"version": 1, "files": [`))
			}
			// A later edit of the user's, which tier 2 cannot keep and must say so.
			writeBytes(t, agent.tomlPath(env), append(mustRead(t, agent.tomlPath(env)), "\n[later]\nx = 1\n"...))

			dry := mustOK(t, "dry Uninstall", one(t, Uninstall(env, []Agent{agent}, true)))
			if dry.Tier != 2 || !strings.Contains(dry.Diff, "-[later]\n") {
				t.Errorf("dry tier 2: tier %d diff\n%s", dry.Tier, dry.Diff)
			}
			rep := mustOK(t, "Uninstall", one(t, Uninstall(env, []Agent{agent}, false)))
			if rep.Tier != 2 {
				t.Errorf("Tier = %d, want 2", rep.Tier)
			}
			for _, want := range []string{"restoring " + agent.tomlPath(env), "overwrites", "removing " + agent.pluginPath(env)} {
				if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, want) }) {
					t.Errorf("no note with %q: %v", want, rep.Notes)
				}
			}
			if damage == "corrupt" && !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "corrupt") }) {
				t.Errorf("no note about the corrupt record: %v", rep.Notes)
			}
			sameTree(t, "after tier 2", snapshotTree(t, env.Home), before)
			if _, err := os.Stat(filepath.Join(env.StateDir, "fake")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("snapshots still there: %v", err)
			}
		})
	}
}

// TestEngineNothingToDo: an agent that is not installed is skipped with what was looked
// for; uninstall without a record does nothing.
func TestEngineNothingToDo(t *testing.T) {
	t.Parallel()
	env := fakeEnv(t, nil)
	missing := fakeAgent{name: "missing", jsonSet: map[string]string{"/a": `1`}}
	rep := one(t, Install(env, []Agent{missing}, false))
	if rep.Err != nil || !strings.Contains(rep.Skipped, "not installed") || !strings.Contains(rep.Skipped, missing.dir(env)) {
		t.Errorf("Install of a missing agent: %+v", rep)
	}
	rep = one(t, Uninstall(env, []Agent{theFake()}, false))
	if rep.Err != nil || rep.Tier != 0 || !strings.Contains(rep.Skipped, "nothing to undo") {
		t.Errorf("Uninstall without a record: %+v", rep)
	}
	if _, err := os.Stat(env.StateDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state dir made: %v", err)
	}
}

// TestEngineUninstallBrokenFile: a file the user broke after install stops uninstall with the
// position; nothing changes and the record stays for a second try.
func TestEngineUninstallBrokenFile(t *testing.T) {
	t.Parallel()
	env := fakeEnv(t, map[string]string{"settings.json": fakeSettings, "config.toml": fakeConfig})
	agent := theFake()
	mustOK(t, "Install", one(t, Install(env, []Agent{agent}, false)))
	writeBytes(t, agent.jsonPath(env), []byte("{\n  \"a\": \n}\n"))
	home, state := snapshotTree(t, env.Home), snapshotTree(t, env.StateDir)
	rep := one(t, Uninstall(env, []Agent{agent}, false))
	if rep.Err == nil || !strings.Contains(rep.Err.Error(), "line 3, column 1") || !strings.Contains(rep.Err.Error(), "run uninstall again") {
		t.Errorf("err %v", rep.Err)
	}
	sameTree(t, "home", snapshotTree(t, env.Home), home)
	sameTree(t, "state", snapshotTree(t, env.StateDir), state)
}

// TestEngineSymlink: a settings file that is a symlink (a dotfiles repository) stays a link;
// its target is edited and restored.
func TestEngineSymlink(t *testing.T) {
	t.Parallel()
	env := fakeEnv(t, nil)
	agent := fakeAgent{name: "fake", jsonSet: map[string]string{"/a": `1`}}
	target := filepath.Join(env.Home, "dotfiles", "settings.json")
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	writeBytes(t, target, []byte("{\"b\": 2}\n"))
	if err := os.Symlink(target, agent.jsonPath(env)); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	if fi, err := os.Lstat(agent.jsonPath(env)); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		// wine: os.Symlink succeeds, but the link reads back as a plain file
		t.Skipf("os.Symlink succeeded, but Lstat does not see a symlink here (%v): no real symlinks on this system", err)
	}
	mustOK(t, "Install", one(t, Install(env, []Agent{agent}, false)))
	if fi, err := os.Lstat(agent.jsonPath(env)); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v", err)
	}
	if got := string(mustRead(t, target)); got != "{\"b\": 2, \"a\": 1}\n" {
		t.Errorf("target = %q", got)
	}
	mustOK(t, "Uninstall", one(t, Uninstall(env, []Agent{agent}, false)))
	if fi, err := os.Lstat(agent.jsonPath(env)); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the link was replaced by uninstall: %v", err)
	}
	if got := string(mustRead(t, target)); got != "{\"b\": 2}\n" {
		t.Errorf("target after uninstall = %q", got)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeBytes(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestMergeOps: a later install's ops fold into the recorded ones, keeping the first Old.
func TestMergeOps(t *testing.T) {
	t.Parallel()
	prev := []Op{
		{Format: "json", Path: "/env", New: json.RawMessage(`{"URL":"a"}`)},
		{Format: "toml", Path: "model_provider", Old: json.RawMessage(`"openai"`), New: json.RawMessage(`"sc"`)},
	}
	next := []Op{
		{Format: "json", Path: "/env/URL", Old: json.RawMessage(`"a"`), New: json.RawMessage(`"b"`)},
		{Format: "toml", Path: "model_provider", Old: json.RawMessage(`"sc"`), New: json.RawMessage(`"sc2"`)},
		{Format: "json", Path: "/new", New: json.RawMessage(`1`)},
	}
	got := mergeOps(prev, keptOps(next))
	want := []Op{
		{Format: "json", Path: "/env", New: json.RawMessage(`{"URL":"b"}`)},
		{Format: "toml", Path: "model_provider", Old: json.RawMessage(`"openai"`), New: json.RawMessage(`"sc2"`)},
		{Format: "json", Path: "/new", New: json.RawMessage(`1`)},
	}
	if opsText(got) != opsText(want) {
		t.Errorf("merged\n%s\nwant\n%s", opsText(got), opsText(want))
	}
	if len(keptOps([]Op{{Format: "json", Path: "/x", Old: json.RawMessage(`1`), New: json.RawMessage(`1.0`)}})) != 0 {
		t.Error("an op that changed nothing was kept")
	}
}

func opsText(ops []Op) string {
	var b bytes.Buffer
	for _, op := range ops {
		fmt.Fprintf(&b, "%s %s old=%s new=%s\n", op.Format, op.Path, op.Old, op.New)
	}
	return b.String()
}
