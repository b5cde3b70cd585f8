package installer

import (
	"encoding/json"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/tailscale/hujson"
)

// AgentURL is one base URL an agent's config file holds, with where in the file it is.
type AgentURL struct {
	// Where is the key path: "env.ANTHROPIC_BASE_URL",
	// "model_providers.<id>.base_url", "provider.<id>.options.baseURL".
	Where string
	URL   string
}

// Ours reports whether u goes through smarter-compact for agent: a loopback URL on the
// agent's route (/<agent>, any port: an install for another port) or on port. urlPort is
// u's port, 80 or 443 by its scheme when it names none.
func (u AgentURL) Ours(agent string, port int) (urlPort string, ours bool) {
	parsed, err := url.Parse(strings.TrimSpace(u.URL))
	if err != nil || parsed.Host == "" || !isLoopbackHost(parsed) {
		return "", false
	}
	urlPort = parsed.Port()
	if urlPort == "" {
		urlPort = "80"
		if parsed.Scheme == "https" {
			urlPort = "443"
		}
	}
	route := "/" + agent
	onRoute := parsed.Path == route || strings.HasPrefix(parsed.Path, route+"/")
	return urlPort, onRoute || urlPort == strconv.Itoa(port)
}

// Wiring is what one agent's config file says of its base URLs, read without changing
// anything (doctor judges it against the live service).
type Wiring struct {
	// Agent is "claude-code", "codex" or "opencode"; File the config file Install edits for
	// its base URLs.
	Agent, File string
	// URLs are every base URL the file holds, by provider id.
	URLs []AgentURL
	// Unselected (Codex): the file defines model_providers.smarter-compact, but
	// model_provider is Selected (maybe ""), so Codex does not use it.
	Unselected bool
	Selected   string
	// Err: the file could not be read or does not parse (fs.ErrNotExist: there is none).
	Err error
}

// ReadWiring reads the base URLs of each agent's config file, in the order of Agents:
// Claude Code's settings.json (env.ANTHROPIC_BASE_URL), Codex's config.toml (every
// [model_providers.*] base_url) and OpenCode's config (every provider's options.baseURL),
// at the paths Install uses (Env.Home and Env.Getenv; CODEX_HOME, XDG_CONFIG_HOME).
func ReadWiring(env Env) []Wiring {
	claude := Wiring{Agent: ClaudeCode{}.Name(), File: claudeSettingsPath(env)}
	claude.URLs, claude.Err = readClaudeURLs(claude.File)
	codex := Wiring{Agent: Codex{}.Name(), File: codexConfigPath(env)}
	codex.readCodex()
	open := Wiring{Agent: OpenCode{}.Name(), File: openCodeConfigPath(openCodeDir(env))}
	open.URLs, open.Err = readOpenCodeURLs(open.File)
	return []Wiring{claude, codex, open}
}

// readJSONC reads a JSON or JSONC file (comments, trailing commas) into v.
func readJSONC(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	std, err := hujson.Standardize(b)
	if err != nil {
		return err
	}
	return json.Unmarshal(std, v)
}

// readClaudeURLs reads env.ANTHROPIC_BASE_URL from Claude Code's settings.json.
func readClaudeURLs(path string) ([]AgentURL, error) {
	var doc struct {
		Env map[string]any `json:"env"`
	}
	if err := readJSONC(path, &doc); err != nil {
		return nil, err
	}
	if s, ok := doc.Env["ANTHROPIC_BASE_URL"].(string); ok {
		return []AgentURL{{"env.ANTHROPIC_BASE_URL", s}}, nil
	}
	return nil, nil
}

// readCodex reads every model provider's base_url from Codex's config.toml at w.File, and
// whether our provider is defined but not the one Codex uses.
func (w *Wiring) readCodex() {
	b, err := os.ReadFile(w.File)
	if err != nil {
		w.Err = err
		return
	}
	var doc map[string]any
	if err := toml.Unmarshal(b, &doc); err != nil {
		w.Err = err
		return
	}
	providers, _ := doc["model_providers"].(map[string]any)
	for _, id := range slices.Sorted(maps.Keys(providers)) {
		if p, ok := providers[id].(map[string]any); ok {
			if s, ok := p["base_url"].(string); ok {
				w.URLs = append(w.URLs, AgentURL{"model_providers." + id + ".base_url", s})
			}
		}
	}
	if _, ok := providers[codexProvider]; ok {
		if mp, _ := doc["model_provider"].(string); mp != codexProvider {
			w.Unselected, w.Selected = true, mp
		}
	}
}

// readOpenCodeURLs reads every provider's options.baseURL from OpenCode's JSONC config.
func readOpenCodeURLs(path string) ([]AgentURL, error) {
	var doc struct {
		Provider map[string]struct {
			Options map[string]any `json:"options"`
		} `json:"provider"`
	}
	if err := readJSONC(path, &doc); err != nil {
		return nil, err
	}
	var urls []AgentURL
	for _, id := range slices.Sorted(maps.Keys(doc.Provider)) {
		if s, ok := doc.Provider[id].Options["baseURL"].(string); ok {
			urls = append(urls, AgentURL{"provider." + id + ".options.baseURL", s})
		}
	}
	return urls, nil
}
