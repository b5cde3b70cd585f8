package app

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/web"
)

// settingDef is one key of the settings page.
type settingDef struct {
	k     config.Key
	label string
	help  string
	kind  string // "int", "float", "bool", "string"
	// live: the running service applies a change at once (proxy.SetSettings, or read
	// where used); otherwise it takes a restart.
	live  bool
	value func(c *config.Config) string // the value in c as text, "" for none
	saved func(f *config.File) any      // the file's pointer (*int64, *float64, *bool, *string)
}

// id is the key as the settings form names it: "<section>.<name>".
func (d settingDef) id() string { return d.k.Section + "." + d.k.Name }

func intText(n int) string { return strconv.Itoa(n) }

func floatText(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// settingDefs are the keys the dashboard's settings page shows, in its order. The agent
// switches, enabled and paused have their own controls.
var settingDefs = []settingDef{
	{config.KeyTrimAtTokens, "Trim at (tokens)", "A request whose estimated prompt exceeds this many tokens is trimmed; empty follows the model (95000 for Haiku, 120000 otherwise).", "int", true,
		func(c *config.Config) string {
			if c.Proxy.TrimAtTokens == 0 {
				return ""
			}
			return intText(c.Proxy.TrimAtTokens)
		}, func(f *config.File) any { return f.ContextProxy.TrimAtTokens }},
	{config.KeyTrimToFraction, "Trim to (fraction)", "How much of the older in-turn steps a trim keeps.", "float", true,
		func(c *config.Config) string { return floatText(c.Proxy.TrimToFraction) }, func(f *config.File) any { return f.ContextProxy.TrimToFraction }},
	{config.KeyCharsPerToken, "Characters per token", "The ratio that estimates a prompt's tokens before a session reports its real usage.", "float", true,
		func(c *config.Config) string { return floatText(c.Proxy.CharsPerToken) }, func(f *config.File) any { return f.ContextProxy.CharsPerToken }},
	{config.KeyCompressOverTokens, "Compress tool results over (tokens)", "Tool results larger than this many estimated tokens are compressed; 0 turns compression off.", "int", true,
		func(c *config.Config) string { return intText(c.Proxy.CompressOverTokens) }, func(f *config.File) any { return f.ContextProxy.CompressOverTokens }},
	{config.KeyStandingInstruction, "Standing instruction", "Adds the instruction that tells the model trimmed turns are saved and how to recall them.", "bool", true,
		func(c *config.Config) string { return tomlBool(c.Proxy.StandingInstruction) }, func(f *config.File) any { return f.ContextProxy.StandingInstruction }},
	{config.KeyPort, "Port", "The loopback port of the proxy, the dashboard and the recall tools; after a change run 'smarter-compact install' to point the agents at it.", "int", false,
		func(c *config.Config) string { return intText(c.Port) }, func(f *config.File) any { return f.ContextProxy.Port }},
	{config.KeyMaxChars, "Recall block size (characters)", "The cap on the recall block after a trim pointer, frame included; recall needs a [memory] table (docs/memory.md).", "int", true,
		func(c *config.Config) string { return intText(c.CompactionMaxChars) }, func(f *config.File) any { return f.Compaction.MaxChars }},
	{config.KeyRecall, "Recall in the trim pointer", "Puts memory recalled for the cut turn after the trim pointer; needs a [memory] table (docs/memory.md).", "bool", true,
		func(c *config.Config) string { return tomlBool(c.CompactionRecall) }, func(f *config.File) any { return f.Compaction.Recall }},
	{config.KeyTTLDays, "Keep sessions (days)", "Sessions idle longer than this are deleted by the daily retention sweep; 0 keeps everything.", "int", true,
		func(c *config.Config) string { return intText(c.TTLDays) }, func(f *config.File) any { return f.ContextStore.TTLDays }},
	{config.KeyEmbeddingModel, "Embedding model", "The model that embeds rows for hybrid search; empty turns vectors off.", "string", false,
		func(c *config.Config) string { return c.EmbeddingModel }, func(f *config.File) any { return f.ContextStore.EmbeddingModel }},
	{config.KeyEmbeddingURL, "Embedding URL", "The OpenAI-compatible embeddings endpoint's base URL.", "string", false,
		func(c *config.Config) string { return c.EmbeddingURL }, func(f *config.File) any { return f.ContextStore.EmbeddingURL }},
	{config.KeyEmbeddingTimeoutS, "Embedding timeout (seconds)", "How long one embeddings call may take.", "int", false,
		func(c *config.Config) string { return intText(int(c.EmbeddingTimeout / time.Second)) }, func(f *config.File) any { return f.ContextStore.EmbeddingTimeoutS }},
	{config.KeyEmbeddingMaxChars, "Embedded characters per row", "How many characters of each row's head are embedded.", "int", false,
		func(c *config.Config) string { return intText(c.EmbeddingMaxChars) }, func(f *config.File) any { return f.ContextStore.EmbeddingMaxChars }},
	{config.KeyUpstreamAnthropic, "Anthropic upstream", "Where Anthropic Messages API requests go (a gateway's base URL chains through it).", "string", true,
		func(c *config.Config) string { return c.Proxy.Upstreams["anthropic"] }, func(f *config.File) any { return f.Upstream.Anthropic }},
	{config.KeyUpstreamOpenAI, "OpenAI upstream", "Where OpenAI Chat Completions and Responses requests go.", "string", true,
		func(c *config.Config) string { return c.Proxy.Upstreams["openai"] }, func(f *config.File) any { return f.Upstream.OpenAI }},
	{config.KeyUpstreamCodex, "Codex upstream", "Where Codex's ChatGPT-login requests go.", "string", true,
		func(c *config.Config) string { return c.Proxy.Upstreams["codex"] }, func(f *config.File) any { return f.Upstream.Codex }},
}

// defaultConfig is the config without a file or environment: the settings' defaults.
var defaultConfig = sync.OnceValue(func() config.Config {
	rc, err := config.ResolveText("", nil, func(string) string { return "" })
	if err != nil {
		panic("app: the defaults do not resolve: " + err.Error())
	}
	return rc.Config
})

// savedText is a decoded file value as text without quotes, "" when absent.
func savedText(v any) string {
	switch v := v.(type) {
	case *int64:
		if v != nil {
			return strconv.FormatInt(*v, 10)
		}
	case *float64:
		if v != nil {
			return floatText(*v)
		}
	case *bool:
		if v != nil {
			return tomlBool(*v)
		}
	case *string:
		if v != nil {
			return *v
		}
	}
	return ""
}

// settings lists settingDefs with their values. Callers hold s.mu.
func (s *state) settings() []web.Setting {
	def := defaultConfig()
	out := make([]web.Setting, 0, len(settingDefs))
	for _, d := range settingDefs {
		c := &s.cur
		if !d.live {
			c = &s.start
		}
		set := web.Setting{
			Key: d.id(), Label: d.label, Value: d.value(c), Saved: savedText(d.saved(&s.file)),
			Default: d.value(&def), Accepts: d.k.Accepts, Help: d.help, Restart: !d.live, Kind: d.kind,
		}
		if _, ok := config.EnvOverride(d.k, s.getenv); ok {
			set.Env = d.k.Env
		}
		out = append(out, set)
	}
	return out
}

// tomlValue turns what the user typed into the TOML text of d's value, checking its type;
// the range is checked by the resolver, as for the file.
func (d settingDef) tomlValue(raw string) (string, error) {
	bad := fmt.Errorf("%s = %s: must be %s", d.k, raw, d.k.Accepts)
	switch d.kind {
	case "int":
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return "", bad
		}
		return strconv.FormatInt(n, 10), nil
	case "float":
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return "", bad
		}
		return floatText(f), nil
	case "bool":
		switch strings.ToLower(raw) {
		case "true", "false":
			return strings.ToLower(raw), nil
		}
		return "", fmt.Errorf("%s = %s: must be true or false", d.k, raw)
	}
	return installer.TOMLString(raw), nil
}

// SaveSettings validates, saves and applies settings (web.Control): values maps
// "<section>.<name>" to the value as typed ("" removes the key). The new config.toml text is
// built in memory and resolved exactly as config.Load would (the same messages as the CLI);
// a *web.SettingsError names each bad key, and nothing is saved then. A key whose
// environment variable is set is refused unless its value is unchanged.
func (s *state) SaveSettings(values map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fields := map[string]string{}
	sets := map[string][]configKey{}
	dels := map[string][]string{}
	for _, id := range slices.Sorted(maps.Keys(values)) {
		raw := strings.TrimSpace(values[id])
		i := slices.IndexFunc(settingDefs, func(d settingDef) bool { return d.id() == id })
		if i < 0 {
			fields[id] = fmt.Sprintf("%q is not a setting here: the settings page changes %s", id, strings.Join(settingIDs(), ", "))
			continue
		}
		d := settingDefs[i]
		if v, ok := config.EnvOverride(d.k, s.getenv); ok {
			// A form that posts every field sends the value it shows: no change, no error.
			if raw != savedText(d.saved(&s.file)) && raw != d.value(&s.cur) && raw != d.value(&s.start) {
				fields[id] = fmt.Sprintf("%s=%s is set in the service's environment and overrides %s: change or unset the variable where the service starts, then restart it", d.k.Env, v, d.k)
			}
			continue
		}
		if raw == "" {
			dels[d.k.Section] = append(dels[d.k.Section], d.k.Name)
			continue
		}
		text, err := d.tomlValue(raw)
		if err != nil {
			fields[id] = err.Error()
			continue
		}
		sets[d.k.Section] = append(sets[d.k.Section], configKey{d.k.Name, text})
	}
	if len(fields) > 0 {
		return &web.SettingsError{Fields: fields}
	}

	old, err := readConfigText(s.path)
	if err != nil {
		return fmt.Errorf("read config %s: %v: nothing saved", s.path, err)
	}
	text := old
	for _, section := range slices.Sorted(maps.Keys(sets)) {
		if text, err = setConfigKeys(text, section, sets[section]); err != nil {
			return web.Refuse(fmt.Errorf("config %s: [%s]: %v: nothing saved", s.path, section, err))
		}
	}
	for _, section := range slices.Sorted(maps.Keys(dels)) {
		if text == nil {
			break // no file: nothing to remove
		}
		if text, err = installer.RemoveKeysIn(text, section, dels[section], true, true, false); err != nil {
			return web.Refuse(fmt.Errorf("config %s: [%s]: %v: nothing saved", s.path, section, err))
		}
	}
	rc, err := config.ResolveText(s.path, text, s.getenv)
	// A value that would fall back to its default with a warning is refused here: the
	// form says what is wrong instead of saving something that does not apply.
	for _, k := range rc.WarnKeys {
		id := k.Section + "." + k.Name
		if raw, asked := values[id]; asked {
			fields[id] = fmt.Sprintf("%s = %s: must be %s", k, strings.TrimSpace(raw), k.Accepts)
		}
	}
	if err != nil {
		kes, all := config.KeyErrors(err)
		for _, ke := range kes {
			id := ke.Key.Section + "." + ke.Key.Name
			if _, asked := values[id]; asked {
				fields[id] = ke.Detail
			} else {
				all = false
			}
		}
		if !all || len(fields) == 0 {
			return web.Refuse(fmt.Errorf("config %s does not load, so nothing was saved: fix it by hand first:\n%w", s.path, err))
		}
	}
	if len(fields) > 0 {
		return &web.SettingsError{Fields: fields}
	}
	if err := s.save(old, text, rc); err != nil {
		return err
	}
	s.log.Info("settings saved", "keys", strings.Join(slices.Sorted(maps.Keys(values)), " "))
	return nil
}

func settingIDs() []string {
	ids := make([]string, len(settingDefs))
	for i, d := range settingDefs {
		ids[i] = d.id()
	}
	return ids
}
