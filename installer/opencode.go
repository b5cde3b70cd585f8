package installer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// OpenCode wires OpenCode (DESIGN.md §8, issue 5 item 4) in its global config directory:
// the anthropic and openai providers' baseURL through /opencode/<provider>/v1, the mcp
// entry, and a plugin file that tags every model request with the session id and
// registers the session.
//
// OpenCode's ChatGPT login (OAuth) ignores baseURL and posts to a hard-coded
// https://chatgpt.com/backend-api/codex (research/clients.md, run 07): that traffic cannot
// be routed, and Plan says so in its notes.
type OpenCode struct {
	// Plugin is the plugin file's template (assets.OpenCodePlugin()); its one
	// "__SMARTER_COMPACT_EXE__" (quotes included) becomes Env.Exe as a JS string.
	Plugin []byte
}

// Name is the agent's name in --agents, the toggles and the install diff.
func (OpenCode) Name() string { return "opencode" }

// pluginExePlaceholder is the string literal in the plugin template that names the
// executable.
const pluginExePlaceholder = `"__SMARTER_COMPACT_EXE__"`

// pluginMarker is in every plugin file we write; a file at our path without it is the
// user's, and never overwritten.
const pluginMarker = "smarter-compact OpenCode plugin"

// openCodeRouted are the providers routed through the proxy, with their API family (the
// route /opencode/<family>/v1 and the upstream key).
var openCodeRouted = []string{"anthropic", "openai"}

// openCodeDir is OpenCode's global config directory: $XDG_CONFIG_HOME/opencode, else
// ~/.config/opencode. OpenCode uses the XDG layout on every OS (also macOS and Windows), so
// Env.ConfigDir does not apply. $OPENCODE_CONFIG_DIR is not it: OpenCode reads that
// directory in addition (agents, commands, plugins), and a config file there has not
// always been loaded (anomalyco/opencode#4399), so writing there could leave OpenCode
// unrouted while we report it wired; Plan says so in a note.
func openCodeDir(env Env) string {
	if x := getenv(env, "XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "opencode")
	}
	return filepath.Join(env.Home, ".config", "opencode")
}

// openCodeConfigNames are the config files OpenCode reads in its config directory, the one
// that wins first (peers.md item 33: .jsonc before .json; config.json is the oldest name).
var openCodeConfigNames = []string{"opencode.jsonc", "opencode.json", "config.json"}

// openCodeConfigPath is the config file we edit: the first of openCodeConfigNames that
// exists, else a new opencode.json. We never create a second config file.
func openCodeConfigPath(dir string) string {
	for _, n := range openCodeConfigNames {
		if p := filepath.Join(dir, n); exists(p) {
			return p
		}
	}
	return filepath.Join(dir, "opencode.json")
}

func openCodePluginPath(dir string) string {
	return filepath.Join(dir, "plugin", "smarter-compact.js")
}

// Files lists every config name OpenCode reads in its directory and the plugin file.
func (OpenCode) Files(env Env) []string {
	dir := openCodeDir(env)
	var out []string
	for _, n := range openCodeConfigNames {
		out = append(out, filepath.Join(dir, n))
	}
	return append(out, openCodePluginPath(dir))
}

// Plan wires OpenCode when its config directory exists.
func (a OpenCode) Plan(env Env) (*AgentPlan, error) {
	dir := openCodeDir(env)
	if !isDir(dir) {
		return nil, notInstalled(a.Name(), dir+" ($XDG_CONFIG_HOME/opencode, else ~/.config/opencode)")
	}
	plan := &AgentPlan{Agent: a.Name()}
	conf, err := a.planConfig(env, openCodeConfigPath(dir), plan)
	if err != nil {
		return nil, err
	}
	plugin, err := a.planPlugin(env, openCodePluginPath(dir))
	if err != nil {
		return nil, err
	}
	plan.Files = []FileEdit{conf, plugin}
	plan.Notes = append(plan.Notes, "OpenCode: a ChatGPT login (OAuth) for OpenAI ignores baseURL and talks to chatgpt.com directly: those requests cannot be routed through the proxy and are not trimmed (API-key providers are)")
	if d := getenv(env, "OPENCODE_CONFIG_DIR"); d != "" {
		plan.Notes = append(plan.Notes, "OPENCODE_CONFIG_DIR="+d+" is an extra directory OpenCode reads agents, commands and plugins from; the wiring goes in the global config "+dir+", which OpenCode always reads (a config there overrides ours only if it sets the same provider baseURL)")
	}
	return plan, nil
}

func (a OpenCode) planConfig(env Env, path string, plan *AgentPlan) (FileEdit, error) {
	cur, err := readCurrent(path)
	if err != nil {
		return FileEdit{}, err
	}
	doc, err := parseJSONFile(cur)
	if err != nil {
		return FileEdit{}, err
	}
	var ops []Op
	for _, id := range openCodeRouted {
		want := proxyURL(env, "/opencode/"+id+"/v1")
		if old, ok := getString(doc, "provider", id, "options", "baseURL"); ok && old != "" && old != want && !isOurs(env, old) {
			// Our route appends /v1/… to the upstream, where OpenCode appended /… to its
			// baseURL, so only a baseURL ending in /v1 can be chained exactly. Any other
			// is left alone rather than sent somewhere it did not go before.
			if !strings.HasSuffix(strings.TrimRight(old, "/"), "/v1") {
				plan.Notes = append(plan.Notes, fmt.Sprintf("OpenCode: provider %q has baseURL %s, which does not end in /v1: left as it is, not routed through the proxy", id, old))
				continue
			}
			chain(env, plan, id, old, "/v1")
		}
		o, err := setJSON(doc, jsonString(want), "provider", id, "options", "baseURL")
		if err != nil {
			return FileEdit{}, fmt.Errorf("%s: %w", cur.path, err)
		}
		ops = append(ops, o...)
	}
	plan.Notes = append(plan.Notes, otherProviders(doc)...)

	server := object{{"type", "local"}, {"command", []string{env.Exe, "mcp"}}, {"enabled", true}}
	o, err := setJSON(doc, marshal(server), "mcp", mcpServerName)
	if err != nil {
		return FileEdit{}, fmt.Errorf("%s: %w", cur.path, err)
	}
	ops = append(ops, o...)
	return cur.edit(doc.Bytes(), ops), nil
}

// otherProviders names the configured providers we leave alone: an OpenAI-compatible or
// custom-baseURL provider may be any vendor behind any API family, and chaining it through
// the one openai upstream could send its traffic (and its key) to the wrong place.
func otherProviders(doc *JSONDoc) []string {
	raw, ok := doc.Get("/provider")
	if !ok {
		return nil
	}
	var providers map[string]struct {
		NPM     string `json:"npm"`
		Options struct {
			BaseURL string `json:"baseURL"`
		} `json:"options"`
	}
	if json.Unmarshal(raw, &providers) != nil {
		return nil
	}
	var notes []string
	for id, p := range providers {
		if slices.Contains(openCodeRouted, id) || (p.NPM == "" && p.Options.BaseURL == "") {
			continue
		}
		what := "baseURL " + p.Options.BaseURL
		if p.NPM != "" {
			what = p.NPM
		}
		notes = append(notes, fmt.Sprintf("OpenCode: provider %q (%s) is not routed through the proxy: only the anthropic and openai providers are", id, what))
	}
	slices.Sort(notes)
	return notes
}

// planPlugin writes the plugin file: created when absent, replaced when it is an older one
// of ours, left alone when current. A file of someone else's at our path fails the plan.
func (a OpenCode) planPlugin(env Env, path string) (FileEdit, error) {
	if bytes.Count(a.Plugin, []byte(pluginExePlaceholder)) != 1 || !bytes.Contains(a.Plugin, []byte(pluginMarker)) {
		return FileEdit{}, errors.New("opencode: the plugin template lacks its executable placeholder or marker (a build defect)")
	}
	want := bytes.Replace(a.Plugin, []byte(pluginExePlaceholder), jsonString(env.Exe), 1)
	cur, err := readCurrent(path)
	if err != nil {
		return FileEdit{}, err
	}
	switch {
	case bytes.Equal(cur.before, want):
		return cur.edit(cur.before, nil), nil
	case cur.before != nil && !bytes.Contains(cur.before, []byte(pluginMarker)):
		return FileEdit{}, fmt.Errorf("%s exists and was not written by smarter-compact: move it away, then install again", path)
	}
	op := Op{Format: "file", New: jsonString(string(want))}
	if cur.before != nil {
		op.Old = jsonString(string(cur.before))
	}
	return cur.edit(want, []Op{op}), nil
}

// Unwire removes what is recognizably ours without an install record (tier 3 of
// uninstall, Unwirer), in every config file OpenCode reads from its directory: each
// provider's options.baseURL that is a loopback URL of our /opencode/ routes (the provider
// talks to its default endpoint again), mcp.smarter-compact, and the plugin file when it
// holds our marker. Containers left empty go too.
func (a OpenCode) Unwire(env Env) (*AgentPlan, error) {
	dir := openCodeDir(env)
	plan := &AgentPlan{Agent: a.Name()}
	for _, n := range openCodeConfigNames {
		cur, err := readCurrent(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		if cur.before == nil {
			continue
		}
		doc, err := parseJSONFile(cur)
		if err != nil {
			return nil, err
		}
		var ops []Op
		var ids []string
		if raw, ok := doc.Get("/provider"); ok {
			var providers map[string]json.RawMessage
			if json.Unmarshal(raw, &providers) == nil {
				for id := range providers {
					ids = append(ids, id)
				}
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			old, ok := getString(doc, "provider", id, "options", "baseURL")
			if !ok || !isOurRoute(old, "/opencode") {
				continue
			}
			if err := unwireJSON(doc, &ops, "provider", id, "options", "baseURL"); err != nil {
				return nil, fmt.Errorf("%s: %w", cur.path, err)
			}
			plan.Notes = append(plan.Notes, fmt.Sprintf("OpenCode: removed provider %q's baseURL (%s) from %s: it talks to its default endpoint again", id, old, cur.path))
		}
		if _, ok := doc.Get(pointer("mcp", mcpServerName)); ok {
			if err := unwireJSON(doc, &ops, "mcp", mcpServerName); err != nil {
				return nil, fmt.Errorf("%s: %w", cur.path, err)
			}
			plan.Notes = append(plan.Notes, fmt.Sprintf("OpenCode: removed the MCP server mcp.%s from %s", mcpServerName, cur.path))
		}
		if len(ops) > 0 {
			plan.Files = append(plan.Files, cur.edit(doc.Bytes(), ops))
		}
	}
	if fe, ok, err := unwireFile(openCodePluginPath(dir), pluginMarker); err != nil {
		return nil, err
	} else if ok {
		plan.Files = append(plan.Files, fe)
		plan.Notes = append(plan.Notes, "OpenCode: removed the plugin file "+fe.Path)
	}
	return plan, nil
}
