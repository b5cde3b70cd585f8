package installer

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// The property tests generate config files (JSON and JSONC with comments, trailing commas,
// odd indentation, CRLF, values already at our paths; TOML with comments, quoted keys,
// multi-line arrays and strings, sub-tables, our table already there) and check, for each:
//
//  1. undoing the recorded ops on the installed bytes gives back the original bytes (by
//     value where an old composite value is written back re-indented);
//  2. Install then Uninstall through the engine gives back every byte;
//  3. after a random user edit between install and uninstall, the user's edit survives and
//     our values are gone (compared by value).

const propertyRuns = 300

// propAgent sets a few pointers, keys and tables, like the real agents.
func propAgent() fakeAgent {
	return fakeAgent{
		name: "fake",
		jsonSet: map[string]string{
			"/env/ANTHROPIC_BASE_URL":     `"http://127.0.0.1:{port}/claude-code"`,
			"/mcpServers/smarter-compact": `{"command":"/opt/sc","args":["mcp"]}`,
			"/hooks/SessionStart/-":       `{"hooks":[{"type":"command","command":"sc hook session-start"}]}`,
			"/permissions/allow/-":        `"mcp__smarter-compact"`,
			"/deep/er/value":              `"<&> é"`,
		},
		tomlKey: map[string]string{"model_provider": `"smarter-compact"`},
		tables: map[string]string{
			"[model_providers.smarter-compact]": "name = \"Smarter Compact\"\nbase_url = \"http://127.0.0.1:{port}/codex\"\nwire_api = \"responses\"\n",
			"[mcp_servers.smarter-compact]":     "command = \"/opt/sc\"\nargs = [\"mcp\"]\n",
		},
	}
}

func TestPropertyJSON(t *testing.T) {
	t.Parallel()
	agent := propAgent()
	agent.tomlKey, agent.tables = nil, nil
	runProperty(t, agent, "settings.json", genJSON, userEditJSON)
}

func TestPropertyTOML(t *testing.T) {
	t.Parallel()
	agent := propAgent()
	agent.jsonSet = nil
	runProperty(t, agent, "config.toml", genTOML, userEditTOML)
}

// runProperty checks the three properties on propertyRuns generated files; the engine runs
// (which sync files to disk, so they are slow) on every 25th.
func runProperty(t *testing.T, agent fakeAgent, file string, gen func(*rand.Rand) (string, bool),
	edit func(r *rand.Rand, installed []byte, ops []Op) ([]byte, []string, error)) {
	for seed := range uint64(propertyRuns) {
		r := rand.New(rand.NewPCG(seed, 7))
		in, exact := gen(r)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d: %s\ninput:\n%s", seed, fmt.Sprintf(format, args...), in)
		}
		env := Env{Home: "/nowhere", Port: 4100, Exe: "/opt/sc"}
		memory := agent
		memory.read = func(string) ([]byte, os.FileMode, error) { return []byte(in), 0o644, nil }
		plan, err := memory.Plan(env)
		if err != nil {
			fail("plan: %v", err)
		}
		fe := plan.Files[0]
		if strings.Contains(in, "\r\n") && strings.Contains(strings.ReplaceAll(string(fe.After), "\r\n", ""), "\n") {
			fail("a CRLF file got a bare LF:\n%q", fe.After)
		}
		format := "json"
		if strings.HasSuffix(file, ".toml") {
			format = "toml"
		}
		// 1. The inverse ops give back the bytes.
		back, kept, err := revertOps(fe.After, fe.Ops)
		if err != nil || len(kept) > 0 {
			fail("revert: %v (kept %v)\ninstalled:\n%s", err, kept, fe.After)
		}
		if exact && string(back) != in {
			fail("reverted bytes differ:\n%q\nwant\n%q", back, in)
		}
		if !sameByValue(format, back, []byte(in)) {
			fail("reverted value differs:\n%s", back)
		}
		// 3. A user edit between install and uninstall.
		edited, paths, err := edit(r, fe.After, fe.Ops)
		if err != nil {
			fail("user edit: %v", err)
		}
		got, _, err := revertOps(edited, fe.Ops)
		if err != nil {
			fail("revert after a user edit: %v\nedited:\n%s", err, edited)
		}
		want, err := expectedValue(format, []byte(in), edited, paths)
		if err != nil {
			fail("expected value: %v", err)
		}
		if gotV, err := decodeValue(format, got); err != nil || !reflect.DeepEqual(gotV, want) {
			fail("after the user edit of %v and uninstall:\n%s\nvalue %v\nwant %v\nedited:\n%s", paths, got, gotV, want, edited)
		}
		// 2. Through the engine, on disk.
		if seed%25 == 0 {
			engineRoundTrip(t, agent, file, in, seed)
		}
	}
}

func engineRoundTrip(t *testing.T, agent fakeAgent, file, in string, seed uint64) {
	t.Helper()
	env := fakeEnv(t, map[string]string{file: in})
	p := filepath.Join(agent.dir(env), file)
	if rep := one(t, Install(env, []Agent{agent}, false)); rep.Err != nil || len(rep.Files) != 1 {
		t.Fatalf("seed %d: Install: %v, files %v", seed, rep.Err, rep.Files)
	}
	if string(mustRead(t, p)) == in {
		t.Fatalf("seed %d: install changed nothing", seed)
	}
	if rep := one(t, Uninstall(env, []Agent{agent}, false)); rep.Err != nil || rep.Tier != 1 {
		t.Fatalf("seed %d: Uninstall: %v, tier %d", seed, rep.Err, rep.Tier)
	}
	if got := string(mustRead(t, p)); got != in {
		t.Fatalf("seed %d: after install and uninstall:\n%q\nwant\n%q", seed, got, in)
	}
}

// --- JSON ---

var jsonKeys = []string{"a", "b", "model", "theme", "x y", "naïve", "a/b", "ti~lde", "<html>", "emoji☕", "numStartups", "k1", "k2", "k3"}

type genCtx struct {
	r          *rand.Rand
	nl, unit   string
	jsonc      bool
	exactUndo  bool // false once a composite value sits at one of our paths
	scalarPool []string
}

func genJSON(r *rand.Rand) (string, bool) {
	g := &genCtx{r: r, nl: pick(r, "\n", "\r\n"), unit: pick(r, "  ", "    ", "\t"), jsonc: r.IntN(2) == 0, exactUndo: true,
		scalarPool: []string{`1`, `-2.5e3`, `true`, `false`, `null`, `"s"`, `"<&> é ☕"`, `"quote \" and \\ backslash"`, `"\u00e9 escaped"`}}
	type member struct{ key, text string }
	var members []member
	for _, k := range sample(r, jsonKeys, r.IntN(5)) {
		members = append(members, member{string(quoteJSON(k)), ""})
	}
	// Our places, sometimes already there, in the shapes the agents expect.
	if r.IntN(2) == 0 {
		env := sample(r, []string{"DISABLE_TELEMETRY", "FOO"}, r.IntN(3))
		if r.IntN(2) == 0 {
			env = append(env, "ANTHROPIC_BASE_URL")
		}
		members = append(members, member{`"env"`, g.object(env, 1, func(k string) string {
			if k == "ANTHROPIC_BASE_URL" {
				return `"https://gateway.example.com"`
			}
			return `"1"`
		})})
	}
	if r.IntN(2) == 0 {
		servers := sample(r, []string{"docs", "smarter-compact"}, r.IntN(3))
		for _, s := range servers {
			if s == "smarter-compact" {
				g.exactUndo = false // the old server comes back re-indented
			}
		}
		members = append(members, member{`"mcpServers"`, g.object(servers, 1, func(string) string { return `{"command": "old", "args": []}` })})
	}
	if r.IntN(2) == 0 {
		hooks := []string{}
		for range r.IntN(3) {
			hooks = append(hooks, `{"hooks": [{"type": "command", "command": "echo hi"}]}`)
		}
		members = append(members, member{`"hooks"`, g.object([]string{"SessionStart"}, 1, func(string) string { return g.array(hooks, 2) })})
	}
	if r.IntN(2) == 0 {
		members = append(members, member{`"permissions"`, g.object([]string{"allow"}, 1, func(string) string { return g.array([]string{`"Read"`, `"Bash(ls)"`}[:r.IntN(3)], 2) })})
	}
	r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	keys := make([]string, len(members))
	texts := map[string]string{}
	for i, m := range members {
		keys[i] = m.key
		texts[m.key] = m.text
	}
	var b strings.Builder
	if g.jsonc && r.IntN(3) == 0 {
		b.WriteString("// settings" + g.nl)
	}
	b.WriteString(g.objectRaw(keys, 0, func(k string) string {
		if texts[k] != "" {
			return texts[k]
		}
		return g.value(1, 2)
	}))
	if r.IntN(4) != 0 {
		b.WriteString(g.nl)
	}
	return b.String(), g.exactUndo
}

// object writes an object of the given (unquoted) keys at depth.
func (g *genCtx) object(keys []string, depth int, value func(string) string) string {
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = string(quoteJSON(k))
	}
	return g.objectRaw(quoted, depth, func(q string) string {
		var k string
		_ = json.Unmarshal([]byte(q), &k)
		return value(k)
	})
}

func (g *genCtx) objectRaw(keys []string, depth int, value func(string) string) string {
	items := make([]string, len(keys))
	for i, k := range keys {
		items[i] = k + pick(g.r, ": ", ":", " : ") + value(k)
	}
	return g.composite("{", "}", items, depth)
}

func (g *genCtx) array(elems []string, depth int) string { return g.composite("[", "]", elems, depth) }

// composite lays items out one a line (with comments and trailing commas in JSONC) or on
// one line.
func (g *genCtx) composite(open, close string, items []string, depth int) string {
	if len(items) == 0 {
		return open + close
	}
	inline := g.r.IntN(4) == 0 && !strings.Contains(strings.Join(items, ""), "\n")
	if inline {
		return open + strings.Join(items, ", ") + close
	}
	ind := strings.Repeat(g.unit, depth)
	var b strings.Builder
	b.WriteString(open)
	trailing := g.jsonc && g.r.IntN(2) == 0
	for i, it := range items {
		if g.jsonc && g.r.IntN(4) == 0 {
			b.WriteString(g.nl + ind + g.unit + pick(g.r, "// a comment", "/* block */"))
		}
		b.WriteString(g.nl + ind + g.unit + it)
		if g.jsonc && g.r.IntN(6) == 0 {
			b.WriteString(" /* after */")
		}
		if i < len(items)-1 || trailing {
			b.WriteString(",")
		}
		if g.jsonc && g.r.IntN(4) == 0 {
			b.WriteString(" // trailing")
		}
	}
	if g.jsonc && g.r.IntN(6) == 0 {
		b.WriteString(g.nl + ind + g.unit + "// closing remark")
	}
	b.WriteString(g.nl + ind + close)
	return b.String()
}

// value is a random user value: a scalar, or (depth allowing) an object or array.
func (g *genCtx) value(depth, maxDepth int) string {
	switch n := g.r.IntN(6); {
	case depth < maxDepth && n == 0:
		return g.object(sample(g.r, jsonKeys, g.r.IntN(4)), depth, func(string) string { return g.value(depth+1, maxDepth) })
	case depth < maxDepth && n == 1:
		elems := make([]string, g.r.IntN(3))
		for i := range elems {
			elems[i] = g.value(depth+1, maxDepth)
		}
		return g.array(elems, depth)
	default:
		return g.scalarPool[g.r.IntN(len(g.scalarPool))]
	}
}

// userEditJSON makes one edit a user might make, and returns the pointers whose value the
// edit decides.
func userEditJSON(r *rand.Rand, installed []byte, ops []Op) ([]byte, []string, error) {
	doc, err := ParseJSONDoc(installed)
	if err != nil {
		return nil, nil, err
	}
	switch r.IntN(4) {
	case 0: // a member of theirs in one of the objects already there
		var objects []string
		var walk func(ptr string, v any)
		walk = func(ptr string, v any) {
			if m, ok := v.(map[string]any); ok && !ours(ptr, ops) {
				objects = append(objects, ptr)
				for k, c := range m {
					walk(ptr+joinPointer([]string{k}), c)
				}
			}
		}
		root, _ := doc.Get("")
		var v any
		_ = json.Unmarshal(root, &v)
		walk("", v)
		p := objects[r.IntN(len(objects))] + "/user key " + strconv.Itoa(r.IntN(100))
		_, err = doc.Set(p, json.RawMessage(`{"mine": [1, "<&>"]}`))
		return doc.Bytes(), []string{p}, err
	case 1: // one of our values, overridden
		op := ops[r.IntN(len(ops))]
		_, err = doc.Set(op.Path, json.RawMessage(`"user value"`))
		return doc.Bytes(), []string{op.Path}, err
	case 2: // a new member next to ours
		p := "/env/USER_VAR"
		if _, ok := doc.Get("/env"); !ok {
			p = "/user"
		}
		_, err = doc.Set(p, json.RawMessage(`"1"`))
		return doc.Bytes(), []string{p}, err
	default: // a comment and a blank line at the top (JSONC allows it; hujson reads both)
		return append([]byte("// edited by hand\n\n"), installed...), nil, nil
	}
}

// ours reports whether ptr is at or under a path an op set.
func ours(ptr string, ops []Op) bool {
	for _, op := range ops {
		if ptr == op.Path || strings.HasPrefix(ptr, op.Path+"/") {
			return true
		}
	}
	return false
}

// --- TOML ---

func genTOML(r *rand.Rand) (string, bool) {
	nl := pick(r, "\n", "\r\n")
	exact := true
	var lines []string
	add := func(s ...string) { lines = append(lines, s...) }
	if r.IntN(2) == 0 {
		add("# Codex config", "# by hand")
		if r.IntN(2) == 0 {
			add("")
		}
	}
	values := []string{`"v <&> é"`, `'literal \ path'`, `42`, `true`, `1.5`, `[1, 2]`, `{ a = 1, b = "x" }`,
		"[\n  \"--flag\",\n  \"[not.a.table]\", # a comment\n]", "\"\"\"\nmulti\n[not.a.header]\n# not a comment\n\"\"\""}
	keys := []string{"model", "approval_policy", "x-y", "k_1", `"a b"`, `"[mcp_servers.evil]"`, "notify"}
	kv := func(n int) {
		for _, k := range sample(r, keys, n) {
			line := k + pick(r, " = ", "=", "   =   ") + values[r.IntN(len(values))]
			if r.IntN(4) == 0 {
				line += " # why"
			}
			add(line)
			if r.IntN(5) == 0 {
				add(pick(r, "", "# note"))
			}
		}
	}
	kv(r.IntN(3))
	if r.IntN(2) == 0 {
		if r.IntN(2) == 0 {
			add(`model_provider = "openai"`)
		} else {
			add(`model_provider = 'openai' # literal`)
			exact = false // comes back as "openai"
		}
	}
	headers := []string{`[projects."/home/u/code"]`, "[tui]", "[mcp_servers.docs]", "[mcp_servers.docs.env]", "[model_providers.gw]", "[profiles.work]", "[[skills]]", "[mcp_servers.smarter-compact]"}
	for _, h := range sample(r, headers, r.IntN(5)) {
		if r.IntN(3) == 0 || len(lines) > 0 && r.IntN(2) == 0 {
			add("")
		}
		if r.IntN(3) == 0 {
			add("# about " + strings.Trim(h, "[]"))
		}
		add(h)
		if h == "[mcp_servers.smarter-compact]" {
			add(`command = "old"`)
			if r.IntN(2) == 0 {
				add("", "[mcp_servers.smarter-compact.env]", `A = "1"`)
			}
			continue
		}
		kv(r.IntN(3))
	}
	text := strings.Join(lines, "\n")
	if len(lines) > 0 && r.IntN(4) != 0 {
		text += "\n"
	}
	return strings.ReplaceAll(text, "\n", nl), exact
}

func userEditTOML(r *rand.Rand, installed []byte, ops []Op) ([]byte, []string, error) {
	nl := lineEnd(installed)
	switch r.IntN(4) {
	case 0: // a key of theirs at the top
		return append([]byte("user_key = 1"+nl), installed...), []string{"user_key"}, nil
	case 1: // a table of theirs at the end
		b := string(installed)
		if !strings.HasSuffix(b, "\n") {
			b += nl
		}
		return []byte(b + nl + "[user_table]" + nl + "x = \"mine\"" + nl), []string{"user_table"}, nil
	case 2: // model_provider set back by hand
		doc, err := ParseTOMLDoc(installed)
		if err != nil {
			return nil, nil, err
		}
		_, err = doc.SetKey("model_provider", json.RawMessage(`"user-choice"`))
		return doc.Bytes(), []string{"model_provider"}, err
	default: // a line of theirs in our MCP table: the whole table is theirs now
		b := strings.Replace(string(installed), "[mcp_servers.smarter-compact]"+nl, "[mcp_servers.smarter-compact]"+nl+"startup_timeout_sec = 30"+nl, 1)
		return []byte(b), []string{"mcp_servers/smarter-compact"}, nil
	}
}

// --- values ---

// expectedValue is the original's value with the user's edits (the edited file's values at
// paths) applied: what uninstall must leave.
func expectedValue(format string, original, edited []byte, paths []string) (any, error) {
	want, err := decodeValue(format, original)
	if err != nil {
		return nil, err
	}
	ed, err := decodeValue(format, edited)
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		parts, _ := splitPointer("/" + strings.TrimPrefix(p, "/"))
		v, ok := lookupValue(ed, parts)
		if !ok {
			return nil, fmt.Errorf("%s not in the edited file", p)
		}
		want = setValue(want, parts, v)
	}
	return want, nil
}

func decodeValue(format string, b []byte) (any, error) {
	var v any
	if format == "toml" {
		var m map[string]any
		if err := toml.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		j, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		err = json.Unmarshal(j, &v)
		return v, err
	}
	doc, err := ParseJSONDoc(b)
	if err != nil {
		return nil, err
	}
	raw, _ := doc.Get("")
	err = json.Unmarshal(raw, &v)
	return v, err
}

func lookupValue(v any, parts []string) (any, bool) {
	for _, p := range parts {
		switch c := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = c[p]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// setValue sets parts in v to x, making missing objects (an index one past an array's end
// appends).
func setValue(v any, parts []string, x any) any {
	if len(parts) == 0 {
		return x
	}
	switch c := v.(type) {
	case map[string]any:
		c[parts[0]] = setValue(c[parts[0]], parts[1:], x)
		return c
	case []any:
		i, _ := strconv.Atoi(parts[0])
		if i == len(c) {
			return append(c, setValue(nil, parts[1:], x))
		}
		c[i] = setValue(c[i], parts[1:], x)
		return c
	default:
		return map[string]any{parts[0]: setValue(nil, parts[1:], x)}
	}
}

func sameByValue(format string, a, b []byte) bool {
	va, errA := decodeValue(format, a)
	vb, errB := decodeValue(format, b)
	return errA == nil && errB == nil && reflect.DeepEqual(va, vb)
}

func pick(r *rand.Rand, options ...string) string { return options[r.IntN(len(options))] }

// sample is n distinct elements of pool in random order.
func sample(r *rand.Rand, pool []string, n int) []string {
	p := append([]string(nil), pool...)
	r.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
	return p[:min(n, len(p))]
}
