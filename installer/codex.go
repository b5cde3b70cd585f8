package installer

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Codex wires the Codex CLI (DESIGN.md §8, issue 5 item 3) in $CODEX_HOME/config.toml
// (default ~/.codex): model_provider = "smarter-compact" (the previous value is in the Op
// and comes back on uninstall), the [model_providers.smarter-compact] table pointing at
// http://127.0.0.1:<port>/codex, and [mcp_servers.smarter-compact].
//
// Codex ignores OPENAI_BASE_URL (peers.md item 21), so a provider table is the only way in.
// requires_openai_auth keeps the user's login (ChatGPT or API key) flowing through the proxy
// untouched; supports_websockets = false keeps Codex on HTTP, where every request carries
// the full history (research/clients.md). model_context_window is never written: a custom
// value breaks Codex's auto-compaction for good (peers.md item 24).
type Codex struct{}

// Name is the agent's name in --agents, the toggles and the install diff.
func (Codex) Name() string { return "codex" }

// codexProvider is our model provider's id, the value of model_provider.
const codexProvider = mcpServerName

// codexBuiltins are Codex's built-in providers, which no [model_providers.*] table defines.
var codexBuiltins = []string{"openai", "oss", "ollama", "lmstudio"}

// codexHome is $CODEX_HOME, else ~/.codex.
func codexHome(env Env) string {
	if h := getenv(env, "CODEX_HOME"); h != "" {
		return h
	}
	return filepath.Join(env.Home, ".codex")
}

func codexConfigPath(env Env) string { return filepath.Join(codexHome(env), "config.toml") }

// Files lists config.toml.
func (Codex) Files(env Env) []string { return []string{codexConfigPath(env)} }

// Plan wires Codex when its home directory exists; config.toml is created when absent.
func (a Codex) Plan(env Env) (*AgentPlan, error) {
	if !isDir(codexHome(env)) {
		return nil, notInstalled(a.Name(), codexHome(env)+" (CODEX_HOME, else ~/.codex)")
	}
	cur, err := readCurrent(codexConfigPath(env))
	if err != nil {
		return nil, err
	}
	doc, err := ParseTOMLDoc(cur.before)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cur.path, err)
	}
	// Read-only view of the same bytes, for what the line editor does not expose (the
	// previous provider's table, profiles). It is never written back.
	var conf codexConf
	if err := toml.Unmarshal(cur.before, &conf); err != nil {
		return nil, fmt.Errorf("%s: %w", cur.path, err)
	}
	plan := &AgentPlan{Agent: a.Name()}

	prev := ""
	if raw, ok := doc.Key("model_provider"); ok {
		if err := json.Unmarshal(raw, &prev); err != nil {
			return nil, fmt.Errorf("%s: model_provider is not a string: fix it by hand, then install again", cur.path)
		}
	}
	carry := codexCarryOf(conf, prev)
	tables := []struct{ header, text string }{
		{"[model_providers." + codexProvider + "]", codexProviderTable(env, carry)},
		{"[mcp_servers." + mcpServerName + "]", codexMCPTable(env)},
	}
	// SetTable refuses a table the user defined inline or with dotted keys. Asked first on
	// the file as it is, so that its error names the line the user sees.
	probe, _ := ParseTOMLDoc(cur.before)
	for _, t := range tables {
		if _, err := probe.SetTable(t.header, t.text); err != nil {
			return nil, fmt.Errorf("%s: %w", cur.path, err)
		}
	}

	var ops []Op
	if prev != codexProvider {
		a.chainPrevious(env, plan, conf, prev)
		if fields := carry.fields(); len(fields) > 0 {
			plan.Notes = append(plan.Notes, fmt.Sprintf(
				"Codex: [model_providers.%s] carries provider %q's %s, so Codex sends the same credentials and headers through the proxy to %s",
				codexProvider, prev, strings.Join(fields, ", "), conf.ModelProviders[prev].BaseURL))
		}
		op, err := doc.SetKey("model_provider", jsonString(codexProvider))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cur.path, err)
		}
		ops = append(ops, op)
	}
	for _, t := range tables {
		if old, ok := doc.Table(t.header); ok && sameTable(old, t.text) {
			continue
		}
		op, err := doc.SetTable(t.header, t.text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cur.path, err)
		}
		ops = append(ops, op)
	}
	if p, ok := conf.Profiles[conf.Profile]; conf.Profile != "" && ok && p.ModelProvider != "" && p.ModelProvider != codexProvider {
		plan.Notes = append(plan.Notes, fmt.Sprintf(
			"Codex: the active profile %q sets model_provider = %q, which wins over the top-level one: Codex stays off the proxy while that profile is active", conf.Profile, p.ModelProvider))
	}

	plan.Files = []FileEdit{cur.edit(doc.Bytes(), ops)}
	return plan, nil
}

// chainPrevious records where Codex sent its requests before: a custom provider's base_url,
// or openai_base_url for the built-in openai provider (DESIGN.md §5: chain, never bypass a
// gateway). What cannot follow through our provider table becomes a note.
func (Codex) chainPrevious(env Env, plan *AgentPlan, conf codexConf, prev string) {
	switch {
	case prev == "" || prev == "openai":
		if conf.OpenAIBaseURL != "" && !chain(env, plan, "codex", conf.OpenAIBaseURL, "") {
			plan.Notes = append(plan.Notes, fmt.Sprintf("Codex: openai_base_url %s is this proxy: not chained", conf.OpenAIBaseURL))
		}
	case conf.ModelProviders[prev] != nil:
		p := conf.ModelProviders[prev]
		if p.BaseURL != "" && !chain(env, plan, "codex", p.BaseURL, "") {
			plan.Notes = append(plan.Notes, fmt.Sprintf("Codex: provider %q pointed at this proxy (%s): replaced, not chained", prev, p.BaseURL))
		}
	case slices.Contains(codexBuiltins, prev):
		plan.Notes = append(plan.Notes, fmt.Sprintf(
			"Codex: model_provider was the built-in %q; requests now go through the proxy to its codex upstream (default https://chatgpt.com/backend-api/codex), not to %s: set [upstream] codex in smarter-compact's config.toml if that is wrong", prev, prev))
	default:
		plan.Notes = append(plan.Notes, fmt.Sprintf("Codex: model_provider %q is not defined in config.toml; requests now go to the proxy's codex upstream", prev))
	}
}

// codexConf is the part of config.toml Plan reads (never written back).
type codexConf struct {
	OpenAIBaseURL  string                        `toml:"openai_base_url"`
	Profile        string                        `toml:"profile"`
	Profiles       map[string]codexProfile       `toml:"profiles"`
	ModelProviders map[string]*codexProviderConf `toml:"model_providers"`
}

type codexProfile struct {
	ModelProvider string `toml:"model_provider"`
}

type codexProviderConf struct {
	BaseURL string `toml:"base_url"`
	codexCarry
}

// codexCarry are the fields of a Codex model provider that say how Codex authenticates and
// what it adds to every request (issue 15, Deliver 3: chaining keeps the user's credentials
// and headers). Our provider table carries them over from the provider it replaces, so
// Codex sends the same Authorization, headers and query parameters to the proxy, which
// forwards them unchanged to the chained upstream. The key itself stays where it was: in
// the variable env_key names, read by Codex, never written to a file.
type codexCarry struct {
	EnvKey             string            `toml:"env_key"`
	EnvKeyInstructions string            `toml:"env_key_instructions"`
	HTTPHeaders        map[string]string `toml:"http_headers"`
	EnvHTTPHeaders     map[string]string `toml:"env_http_headers"`
	QueryParams        map[string]string `toml:"query_params"`
	RequiresOpenAIAuth *bool             `toml:"requires_openai_auth"`
}

// codexCarryOf is what our provider table carries when model_provider is prev: a custom
// provider's own fields; on a second install (prev is ours) what our table carries
// already, so reinstalling keeps them; for the built-in openai provider (or none), and
// for any other, requires_openai_auth = true, which sends the user's Codex login
// (ChatGPT or API key) as the built-in provider did.
func codexCarryOf(conf codexConf, prev string) codexCarry {
	if p := conf.ModelProviders[prev]; p != nil {
		return p.codexCarry
	}
	yes := true
	return codexCarry{RequiresOpenAIAuth: &yes}
}

// fields names the keys c sets other than requires_openai_auth = true alone, for the note.
func (c codexCarry) fields() []string {
	var out []string
	add := func(set bool, key string) {
		if set {
			out = append(out, key)
		}
	}
	add(c.EnvKey != "", "env_key")
	add(c.EnvKeyInstructions != "", "env_key_instructions")
	add(c.HTTPHeaders != nil, "http_headers")
	add(c.EnvHTTPHeaders != nil, "env_http_headers")
	add(c.QueryParams != nil, "query_params")
	add(c.RequiresOpenAIAuth != nil && len(out) > 0, "requires_openai_auth")
	return out
}

// toml is c's keys as lines of a TOML table, in a fixed order; a map is an inline table
// with its keys sorted.
func (c codexCarry) toml() string {
	var b strings.Builder
	str := func(key, v string) {
		if v != "" {
			b.WriteString(key + " = " + TOMLString(v) + "\n")
		}
	}
	inline := func(key string, m map[string]string) {
		if m == nil {
			return
		}
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			kv = append(kv, TOMLString(k)+" = "+TOMLString(m[k]))
		}
		if len(kv) == 0 {
			b.WriteString(key + " = {}\n")
			return
		}
		b.WriteString(key + " = { " + strings.Join(kv, ", ") + " }\n")
	}
	str("env_key", c.EnvKey)
	str("env_key_instructions", c.EnvKeyInstructions)
	inline("http_headers", c.HTTPHeaders)
	inline("env_http_headers", c.EnvHTTPHeaders)
	inline("query_params", c.QueryParams)
	if c.RequiresOpenAIAuth != nil {
		b.WriteString("requires_openai_auth = " + strconv.FormatBool(*c.RequiresOpenAIAuth) + "\n")
	}
	return b.String()
}

// codexProviderTable is our [model_providers.smarter-compact] table, with the credential
// and header fields of carry (codexCarry).
func codexProviderTable(env Env, carry codexCarry) string {
	return "[model_providers." + codexProvider + "]\n" +
		"name = \"Smarter Compact\"\n" +
		"base_url = " + TOMLString(proxyURL(env, "/codex")) + "\n" +
		"wire_api = \"responses\"\n" +
		carry.toml() +
		"supports_websockets = false\n"
}

// codexMCPTable is our [mcp_servers.smarter-compact] table. The recall tools only read the
// store, so they are approved up front: under approval_policy = "never" Codex otherwise
// refuses every MCP call ("MCP tool call requires approval", research/clients.md run 11).
func codexMCPTable(env Env) string {
	return "[mcp_servers." + mcpServerName + "]\n" +
		"command = " + TOMLString(env.Exe) + "\n" +
		"args = [\"mcp\"]\n" +
		"default_tools_approval_mode = \"approve\"\n"
}

// sameTable reports whether a table's text in the file is ours, line ends and trailing
// blank lines aside.
func sameTable(got, want string) bool {
	norm := func(s string) string {
		return strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	}
	return norm(got) == norm(want)
}

// Unwire removes what is recognizably ours without an install record (tier 3 of
// uninstall, Unwirer): model_provider when it is "smarter-compact" (what it was before is
// unknown, so the key goes and a note says so), and the [model_providers.smarter-compact]
// and [mcp_servers.smarter-compact] tables.
func (a Codex) Unwire(env Env) (*AgentPlan, error) {
	plan := &AgentPlan{Agent: a.Name()}
	cur, err := readCurrent(codexConfigPath(env))
	if err != nil || cur.before == nil {
		return plan, err
	}
	doc, err := ParseTOMLDoc(cur.before)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cur.path, err)
	}
	var ops []Op
	if raw, ok := doc.Key("model_provider"); ok && sameValue(raw, jsonString(codexProvider)) {
		if _, err := doc.RemoveKey("model_provider"); err != nil {
			return nil, fmt.Errorf("%s: %w", cur.path, err)
		}
		ops = append([]Op{{Format: "toml", Path: "model_provider", New: raw}}, ops...)
		plan.Notes = append(plan.Notes, fmt.Sprintf(
			"Codex: removed model_provider = %q from %s; the provider it replaced is unknown, so Codex falls back to its default (openai): to use another, set model_provider = \"<id>\" at the top of that file", codexProvider, cur.path))
	}
	for _, header := range []string{"[model_providers." + codexProvider + "]", "[mcp_servers." + mcpServerName + "]"} {
		text, ok := doc.Table(header)
		if !ok {
			continue
		}
		if _, err := doc.RemoveTable(header); err != nil {
			return nil, fmt.Errorf("%s: %w", cur.path, err)
		}
		ops = append([]Op{{Format: "toml", Path: header, New: jsonString(text)}}, ops...)
		plan.Notes = append(plan.Notes, fmt.Sprintf("Codex: removed the table %s from %s", header, cur.path))
	}
	if len(ops) > 0 {
		plan.Files = []FileEdit{cur.edit(doc.Bytes(), ops)}
	}
	return plan, nil
}
