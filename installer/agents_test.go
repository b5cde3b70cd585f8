package installer

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/assets"
)

var update = flag.Bool("update", false, "rewrite the install/ and uninstall/ sections of testdata/agents/*.txtar from the output (read every change before committing it)")

const (
	testPort = 4100
	testExe  = "/opt/smarter-compact/bin/smarter-compact"
)

// testPlugin stands in for the real plugin file in the goldens, so they show where the
// executable goes without repeating the whole module; TestOpenCodePluginRuns covers the real
// one.
var testPlugin = []byte("// smarter-compact OpenCode plugin (test template)\nconst exe = \"__SMARTER_COMPACT_EXE__\"\n")

func testAgent(name string) Agent {
	for _, a := range Agents(testPlugin) {
		if a.Name() == name {
			return a
		}
	}
	panic("no agent " + name)
}

// TestAgentGolden runs each testdata/agents/*.txtar through Plan, Install, a second Plan and
// Install (nothing may change), the user's edits, and Uninstall, comparing every file under
// the temporary home with the archive. The archive's comment holds directives, one a line:
//
//	agent: claude-code|codex|opencode
//	exe: <path>                  the executable (default testExe)
//	env: KEY=VALUE               Env.Getenv; "~/" at the start of VALUE is the temp home
//	crlf: <path>                 that file's sections have "\r\n" line ends on disk
//	error: <text>                Plan and Install fail with text; nothing is written
//	upstream: <family> <url>     AgentPlan.Upstreams, exactly (none: no upstreams)
//	note: <text>                 some note contains text
//	no-uninstall                 skip the uninstall step
//	gone: <path>                 that file is absent after uninstall (one of ours found
//	                             without an install record)
//
// Sections, named by path relative to the home directory:
//
//	before/<path>      the file before install (a name ending in "/" is an empty directory)
//	install/<path>     the file after install; a file without one must be unchanged
//	edit/<path>        the user's edit between install and uninstall
//	uninstall/<path>   the file after uninstall; a file without one must be exactly as in
//	                   before/ (absent when it was absent)
func TestAgentGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "agents", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/agents/*.txtar")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			t.Parallel()
			runGolden(t, file)
		})
	}
}

type golden struct {
	agent     string
	exe       string
	env       map[string]string
	crlf      map[string]bool
	wantErr   string
	upstreams map[string]string
	notes     []string
	noUninst  bool
	gone      []string          // paths absent after uninstall
	before    map[string][]byte // path -> bytes; nil bytes: a directory
	install   map[string][]byte
	edit      map[string][]byte
	uninstall map[string][]byte
	archive   *archive
}

func readGolden(t *testing.T, file string) *golden {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ar := parseArchive(data)
	g := &golden{
		exe: testExe, env: map[string]string{}, upstreams: map[string]string{}, crlf: map[string]bool{}, archive: ar,
		before: map[string][]byte{}, install: map[string][]byte{}, edit: map[string][]byte{}, uninstall: map[string][]byte{},
	}
	for _, line := range strings.Split(string(ar.comment), "\n") {
		line = strings.TrimSpace(line)
		key, val, _ := strings.Cut(line, ":")
		val = strings.TrimSpace(val)
		switch key {
		case "agent":
			g.agent = val
		case "exe":
			g.exe = val
		case "env":
			k, v, _ := strings.Cut(val, "=")
			g.env[k] = v
		case "crlf":
			g.crlf[val] = true
		case "error":
			g.wantErr = val
		case "upstream":
			fam, u, _ := strings.Cut(val, " ")
			g.upstreams[fam] = strings.TrimSpace(u)
		case "note":
			g.notes = append(g.notes, val)
		case "no-uninstall":
			g.noUninst = true
		case "gone":
			g.gone = append(g.gone, val)
		}
	}
	if g.agent == "" {
		t.Fatalf("%s: no agent: directive", file)
	}
	for _, f := range ar.files {
		stage, path, ok := strings.Cut(f.name, "/")
		if !ok {
			t.Fatalf("%s: section %q is not <stage>/<path>", file, f.name)
		}
		data := f.data
		if g.crlf[path] {
			data = bytes.ReplaceAll(data, []byte("\n"), []byte("\r\n"))
		}
		if strings.HasSuffix(path, "/") {
			data = nil
		}
		m := map[string]map[string][]byte{"before": g.before, "install": g.install, "edit": g.edit, "uninstall": g.uninstall}[stage]
		if m == nil {
			t.Fatalf("%s: unknown stage in section %q", file, f.name)
		}
		m[path] = data
	}
	return g
}

func (g *golden) testEnv(home, cfg string) Env {
	env := map[string]string{}
	for k, v := range g.env {
		if rest, ok := strings.CutPrefix(v, "~/"); ok {
			v = filepath.Join(home, filepath.FromSlash(rest))
		}
		env[k] = v
	}
	return Env{
		Home:      home,
		ConfigDir: cfg,
		Getenv:    func(k string) string { return env[k] },
		Port:      testPort,
		Exe:       g.exe,
		StateDir:  filepath.Join(cfg, "smarter-compact", "install"),
		Now:       func() time.Time { return time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC) },
	}
}

func runGolden(t *testing.T, file string) {
	g := readGolden(t, file)
	home, cfg := t.TempDir(), t.TempDir()
	writeTree(t, home, g.before)
	env := g.testEnv(home, cfg)
	agent := testAgent(g.agent)
	beforeTree := readTree(t, home)

	plan, err := agent.Plan(env)
	if g.wantErr != "" {
		// The golden files name paths with '/'; Windows reports them with '\\'.
		if err == nil || !strings.Contains(filepath.ToSlash(err.Error()), g.wantErr) {
			t.Fatalf("Plan: got error %v, want one containing %q", err, g.wantErr)
		}
		rep := Install(env, []Agent{agent}, false)
		if len(rep.Agents) != 1 || rep.Agents[0].Err == nil || !strings.Contains(filepath.ToSlash(rep.Agents[0].Err.Error()), g.wantErr) {
			t.Fatalf("Install: got %+v, want an error containing %q", rep.Agents, g.wantErr)
		}
		compareTree(t, "after a failed install", readTree(t, home), beforeTree)
		return
	}
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	checkPlan(t, g, home, plan)

	// The plan's bytes are what install writes.
	wantInstalled := overlay(beforeTree, g.install)
	for _, fe := range plan.Files {
		rel := relPath(t, home, fe.Path)
		if want, ok := wantInstalled[rel]; !ok && !bytes.Equal(fe.After, fe.Before) {
			t.Errorf("Plan: %s: new file not in install/", rel)
		} else if ok && !bytes.Equal(fe.After, want) && !*update {
			t.Errorf("Plan: %s:\n%s", rel, lineDiff(want, fe.After))
		}
	}

	rep := Install(env, []Agent{agent}, false)
	checkReport(t, "Install", rep)
	installed := readTree(t, home)
	if *update {
		g.setStage("install", beforeTree, installed)
	} else {
		compareTree(t, "after install", installed, wantInstalled)
	}

	// Idempotent: planned again, nothing changes; installed again, nothing is written.
	again, err := agent.Plan(env)
	if err != nil {
		t.Fatalf("second Plan: %v", err)
	}
	for _, fe := range again.Files {
		if !bytes.Equal(fe.Before, fe.After) || len(fe.Ops) != 0 {
			t.Errorf("second Plan changes %s (ops %v):\n%s", relPath(t, home, fe.Path), fe.Ops, lineDiff(fe.Before, fe.After))
		}
	}
	checkReport(t, "second Install", Install(env, []Agent{agent}, false))
	compareTree(t, "after a second install", readTree(t, home), installed)

	if g.noUninst {
		g.save(t, file)
		return
	}
	writeTree(t, home, g.edit)
	checkReport(t, "Uninstall", Uninstall(env, []Agent{agent}, false))
	got := readTree(t, home)
	if *update {
		g.setStage("uninstall", beforeTree, got)
	} else {
		want := overlay(beforeTree, g.uninstall)
		for _, p := range g.gone {
			delete(want, p)
		}
		compareTree(t, "after uninstall", got, want)
	}
	g.save(t, file)
}

// checkPlan compares the plan's upstreams and notes with the directives.
func checkPlan(t *testing.T, g *golden, home string, plan *AgentPlan) {
	t.Helper()
	if plan.Agent != g.agent {
		t.Errorf("plan.Agent = %q, want %q", plan.Agent, g.agent)
	}
	got := plan.Upstreams
	if got == nil {
		got = map[string]string{}
	}
	if !maps.Equal(got, g.upstreams) {
		t.Errorf("Upstreams = %v, want %v", got, g.upstreams)
	}
	for _, want := range g.notes {
		if !slices.ContainsFunc(plan.Notes, func(n string) bool { return strings.Contains(n, want) }) {
			t.Errorf("no note contains %q; notes:\n%s", want, strings.Join(plan.Notes, "\n"))
		}
	}
	for _, fe := range plan.Files {
		if !filepath.IsAbs(fe.Path) || !strings.HasPrefix(fe.Path, home) {
			t.Errorf("plan file %s is not under the home directory", fe.Path)
		}
		if fe.Before == nil && fe.Mode != 0o600 {
			t.Errorf("%s: new file mode %v, want 0600", fe.Path, fe.Mode)
		}
	}
}

func checkReport(t *testing.T, what string, rep Report) {
	t.Helper()
	for _, a := range rep.Agents {
		if a.Err != nil {
			t.Fatalf("%s: %s: %v", what, a.Agent, a.Err)
		}
		if a.Skipped != "" {
			t.Fatalf("%s: %s skipped: %s", what, a.Agent, a.Skipped)
		}
	}
}

// overlay is base with the files of top replacing or adding to it.
func overlay(base, top map[string][]byte) map[string][]byte {
	out := maps.Clone(base)
	for k, v := range top {
		if v != nil {
			out[k] = v
		}
	}
	return out
}

func relPath(t *testing.T, home, p string) string {
	t.Helper()
	rel, err := filepath.Rel(home, p)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.ToSlash(rel)
}

func writeTree(t *testing.T, root string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if data == nil {
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree returns every regular file under root by its slash path.
func readTree(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out, err := walkTree(root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func compareTree(t *testing.T, what string, got, want map[string][]byte) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: %s missing", what, name)
		case !bytes.Equal(g, want[name]):
			t.Errorf("%s: %s:\n%s", what, name, lineDiff(want[name], g))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: unexpected file %s:\n%s", what, name, got[name])
		}
	}
}

// lineDiff is a line diff of want and got ("-" want only, "+" got only), line ends shown.
func lineDiff(want, got []byte) string {
	lines := func(b []byte) []string {
		l := strings.SplitAfter(string(b), "\n")
		if l[len(l)-1] == "" {
			l = l[:len(l)-1]
		}
		return l
	}
	w, g := lines(want), lines(got)
	// lcs[i][j] is the length of the longest common subsequence of w[i:] and g[j:].
	lcs := make([][]int, len(w)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(g)+1)
	}
	for i := len(w) - 1; i >= 0; i-- {
		for j := len(g) - 1; j >= 0; j-- {
			if w[i] == g[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var b strings.Builder
	i, j := 0, 0
	for i < len(w) || j < len(g) {
		switch {
		case i < len(w) && j < len(g) && w[i] == g[j]:
			fmt.Fprintf(&b, "   %q\n", w[i])
			i, j = i+1, j+1
		case i < len(w) && (j == len(g) || lcs[i+1][j] >= lcs[i][j+1]):
			fmt.Fprintf(&b, " - %q\n", w[i])
			i++
		default:
			fmt.Fprintf(&b, " + %q\n", g[j])
			j++
		}
	}
	return b.String()
}

// setStage records, for -update, the files of got that differ from before as the stage's
// sections: existing sections keep their place, new ones go after the stage's last.
func (g *golden) setStage(stage string, before, got map[string][]byte) {
	changed := map[string][]byte{}
	for name, data := range got {
		if b, ok := before[name]; ok && bytes.Equal(b, data) {
			continue
		}
		if g.crlf[name] {
			data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
		}
		changed[name] = data
	}
	order := map[string]int{"before": 0, "install": 1, "edit": 2, "uninstall": 3}
	var out []archiveFile
	insertAt := 0
	for _, f := range g.archive.files {
		st, name, _ := strings.Cut(f.name, "/")
		if st == stage {
			if data, ok := changed[name]; ok {
				out = append(out, archiveFile{name: f.name, data: data})
				delete(changed, name)
			}
			insertAt = len(out)
			continue
		}
		out = append(out, f)
		if order[st] < order[stage] {
			insertAt = len(out)
		}
	}
	var added []archiveFile
	for _, name := range slices.Sorted(maps.Keys(changed)) {
		added = append(added, archiveFile{name: stage + "/" + name, data: changed[name]})
	}
	g.archive.files = slices.Insert(out, insertAt, added...)
}

func (g *golden) save(t *testing.T, file string) {
	t.Helper()
	if !*update {
		return
	}
	if err := os.WriteFile(file, formatArchive(g.archive), 0o644); err != nil {
		t.Fatal(err)
	}
}

// archive is a txtar archive (golang.org/x/tools/txtar's format, parsed here to keep the
// module's dependencies as they are): a comment, then files each introduced by a
// "-- name --" line.
type archive struct {
	comment []byte
	files   []archiveFile
}

type archiveFile struct {
	name string
	data []byte
}

func parseArchive(data []byte) *archive {
	a := &archive{}
	var cur *archiveFile
	for len(data) > 0 {
		line, rest, found := bytes.Cut(data, []byte("\n"))
		if found {
			line = append(line, '\n')
		}
		data = rest
		if name, ok := fileMarker(line); ok {
			a.files = append(a.files, archiveFile{name: name})
			cur = &a.files[len(a.files)-1]
			continue
		}
		if cur == nil {
			a.comment = append(a.comment, line...)
		} else {
			cur.data = append(cur.data, line...)
		}
	}
	return a
}

func fileMarker(line []byte) (string, bool) {
	s := strings.TrimRight(string(line), "\n")
	if !strings.HasPrefix(s, "-- ") || !strings.HasSuffix(s, " --") || len(s) < 7 {
		return "", false
	}
	return strings.TrimSpace(s[3 : len(s)-3]), true
}

func formatArchive(a *archive) []byte {
	var b bytes.Buffer
	b.Write(a.comment)
	for _, f := range a.files {
		fmt.Fprintf(&b, "-- %s --\n", f.name)
		b.Write(f.data)
		if len(f.data) > 0 && f.data[len(f.data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// TestNotInstalled: an agent whose files are absent is ErrNotInstalled, naming what was
// looked for, and plans nothing.
func TestNotInstalled(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	env := Env{Home: home, ConfigDir: t.TempDir(), Port: testPort, Exe: testExe}
	for _, a := range Agents(testPlugin) {
		plan, err := a.Plan(env)
		if !errors.Is(err, ErrNotInstalled) || plan != nil {
			t.Errorf("%s: Plan = %v, %v; want ErrNotInstalled", a.Name(), plan, err)
			continue
		}
		if !strings.Contains(err.Error(), home) {
			t.Errorf("%s: error %q does not say where it looked", a.Name(), err)
		}
	}
}

// TestConfigDirs: CODEX_HOME and XDG_CONFIG_HOME move the files; OPENCODE_CONFIG_DIR does not.
func TestConfigDirs(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	vars := map[string]string{}
	env := Env{Home: home, Getenv: func(k string) string { return vars[k] }}
	check := func(a Agent, want ...string) {
		t.Helper()
		if got := a.Files(env); !slices.Equal(got, want) {
			t.Errorf("%s Files = %q, want %q", a.Name(), got, want)
		}
	}
	oc := filepath.Join(home, ".config", "opencode")
	check(Codex{}, filepath.Join(home, ".codex", "config.toml"))
	check(OpenCode{}, filepath.Join(oc, "opencode.jsonc"), filepath.Join(oc, "opencode.json"), filepath.Join(oc, "config.json"), filepath.Join(oc, "plugin", "smarter-compact.js"))
	check(ClaudeCode{}, filepath.Join(home, ".claude", "settings.json"), filepath.Join(home, ".claude.json"), filepath.Join(home, ".claude", "commands", "smarter-compact.md"))

	vars["CODEX_HOME"] = "/srv/codex"
	vars["XDG_CONFIG_HOME"] = "/srv/xdg"
	oc = filepath.Join("/srv/xdg", "opencode")
	check(Codex{}, filepath.Join("/srv/codex", "config.toml"))
	check(OpenCode{}, filepath.Join(oc, "opencode.jsonc"), filepath.Join(oc, "opencode.json"), filepath.Join(oc, "config.json"), filepath.Join(oc, "plugin", "smarter-compact.js"))
	// OPENCODE_CONFIG_DIR is an extra directory for OpenCode, not its config dir: the
	// files stay in the global one
	vars["OPENCODE_CONFIG_DIR"] = "/srv/oc"
	check(OpenCode{}, filepath.Join(oc, "opencode.jsonc"), filepath.Join(oc, "opencode.json"), filepath.Join(oc, "config.json"), filepath.Join(oc, "plugin", "smarter-compact.js"))
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{testExe, `"/opt/smarter-compact/bin/smarter-compact"`},
		{`/home/a b/it's $HOME/x"y` + "`", `"/home/a b/it's \$HOME/x\"y\` + "`" + `"`},
		{`C:\Program Files\Smarter Compact\smarter-compact.exe`, `"C:/Program Files/Smarter Compact/smarter-compact.exe"`},
		{`\\server\share\smarter-compact.exe`, `"//server/share/smarter-compact.exe"`},
		{`/usr/local/bin/back\slash`, `"/usr/local/bin/back\\slash"`},
	} {
		if got := shellQuote(tc.in); got != tc.want {
			t.Errorf("shellQuote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestShellQuoteRuns runs the quoted command through sh: the shell must hand the program
// its path unchanged, spaces, quotes and dollars included.
func TestShellQuoteRuns(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil || runtime.GOOS == "windows" {
		t.Skip("no POSIX sh here: shellQuote's quoting is covered by TestShellQuote only")
	}
	dir := filepath.Join(t.TempDir(), `a b $HOME "q" it's`)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "smarter-compact")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nprintf '%s|' \"$0\" \"$@\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sh, "-c", shellQuote(exe)+" hook session-start").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := exe + "|hook|session-start|"; string(out) != want {
		t.Errorf("sh ran %q, want %q", out, want)
	}
}

func TestIsOurs(t *testing.T) {
	t.Parallel()
	env := Env{Port: testPort}
	for raw, want := range map[string]bool{
		"http://127.0.0.1:4100/claude-code":         true,
		"http://127.0.0.1:4100":                     true, // the seed's proxy on our port: chaining would loop
		"http://localhost:4100/v1":                  true,
		"http://[::1]:4100":                         true,
		"http://127.0.0.1:4200/claude-code":         true, // an earlier install on another port
		"http://127.0.0.1:4200/opencode/openai/v1":  true,
		"http://127.0.0.1:3456":                     false, // another local proxy (claude-code-router)
		"https://gateway.example.com/claude-code":   false,
		"https://api.anthropic.com":                 false,
		"not a url":                                 false,
		"http://127.0.0.2:4100/x":                   true,
		"http://127.0.0.1:41000/claude-codex/thing": false,
	} {
		if got := isOurs(env, raw); got != want {
			t.Errorf("isOurs(%q) = %v, want %v", raw, got, want)
		}
	}
}

// TestOpenCodePluginAsset checks the real plugin file: one executable placeholder, our
// marker, and the header name the proxy reads.
func TestOpenCodePluginAsset(t *testing.T) {
	t.Parallel()
	p := assets.OpenCodePlugin()
	for _, want := range []string{pluginExePlaceholder, pluginMarker, "x-smarter-compact-session-id", `"chat.headers"`} {
		if !bytes.Contains(p, []byte(want)) {
			t.Errorf("plugin lacks %s", want)
		}
	}
	if n := bytes.Count(p, []byte(pluginExePlaceholder)); n != 1 {
		t.Errorf("plugin has %d placeholders, want 1", n)
	}
}

// TestOpenCodePluginRuns loads the installed plugin in Node the way OpenCode does (every
// export is a plugin function, called with the plugin input; hooks called with input and
// output) and checks what it does: the header on every request, one registration per
// session, the force flag for "/smarter-compact", nothing for other prompts.
func TestOpenCodePluginRuns(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil || runtime.GOOS == "windows" {
		t.Skip("node not on PATH (or Windows): the plugin's behaviour is not run here; TestOpenCodePluginAsset still checks its text")
	}
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	exe := filepath.Join(dir, "bin dir", "smarter-compact")
	if err := os.MkdirAll(filepath.Dir(exe), 0o700); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '" + calls + "'\n"
	if err := os.WriteFile(exe, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	ocDir := filepath.Join(dir, "opencode")
	if err := os.MkdirAll(ocDir, 0o700); err != nil {
		t.Fatal(err)
	}
	env := Env{Home: dir, ConfigDir: dir, Port: testPort, Exe: exe, Getenv: func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return dir
		}
		return ""
	}}
	plan, err := OpenCode{Plugin: assets.OpenCodePlugin()}.Plan(env)
	if err != nil {
		t.Fatal(err)
	}
	var plugin []byte
	for _, fe := range plan.Files {
		if strings.HasSuffix(fe.Path, ".js") {
			plugin = fe.After
		}
	}
	mod := filepath.Join(dir, "smarter-compact.mjs")
	if err := os.WriteFile(mod, plugin, 0o600); err != nil {
		t.Fatal(err)
	}
	driver := `
const mod = await import(process.argv[1])
const names = Object.keys(mod)
if (names.length !== 1 || typeof mod[names[0]] !== "function") throw new Error("exports: " + names)
const hooks = await mod[names[0]]({ directory: "/work/proj" })
const seen = []
for (const sid of ["ses_A", "ses_A", "ses_B"]) {
  const out = { headers: {} }
  await hooks["chat.headers"]({ sessionID: sid, agent: "build" }, out)
  seen.push(out.headers["x-smarter-compact-session-id"])
}
await hooks["chat.message"]({ sessionID: "ses_A" }, { message: {}, parts: [{ type: "text", text: "  /smarter-compact\n" }] })
await hooks["chat.message"]({ sessionID: "ses_B" }, { message: {}, parts: [{ type: "text", text: "/smarter-compact please" }] })
await hooks["chat.headers"]({}, { headers: {} })
console.log(JSON.stringify(seen))
`
	cmd := exec.Command(node, "--input-type=module", "-e", driver, mod)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != `["ses_A","ses_A","ses_B"]` {
		t.Errorf("headers sent: %s", got)
	}
	// The plugin does not wait for its commands; give them a moment to finish.
	want := []string{"hook force ses_A", "hook opencode-session --cwd /work/proj ses_A", "hook opencode-session --cwd /work/proj ses_B"}
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(calls)
		got = strings.Split(strings.TrimSpace(string(b)), "\n")
		slices.Sort(got)
		if len(got) >= len(want) {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("commands run:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
