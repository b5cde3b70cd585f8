package config

import (
	"strconv"
	"sync"
	"time"
)

// Setting is one key of the dashboard's settings page: its label and help, its kind, and
// how to read it from a resolved Config and from the decoded File.
type Setting struct {
	Key   Key
	Label string
	Help  string
	Kind  string // "int", "float", "bool", "string"
	// Live: the running service applies a change at once (proxy.SetSettings, or read
	// where used); otherwise it takes a restart.
	Live  bool
	Value func(c *Config) string // the value in c as text, "" for none
	Saved func(f *File) any      // the file's pointer (*int64, *float64, *bool, *string)
}

// ID is the key as the settings form names it: "<section>.<name>".
func (d Setting) ID() string { return d.Key.Section + "." + d.Key.Name }

func intText(n int) string { return strconv.Itoa(n) }

func FloatText(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// Settings are the keys the dashboard's settings page shows, in its order. The agent
// switches, enabled and paused have their own controls.
var Settings = []Setting{
	{KeyTrimAtTokens, "Trim at (tokens)", "A request whose estimated prompt exceeds this many tokens is trimmed; empty follows the model (95000 for Haiku, 120000 otherwise).", "int", true,
		func(c *Config) string {
			if c.Proxy.TrimAtTokens == 0 {
				return ""
			}
			return intText(c.Proxy.TrimAtTokens)
		}, func(f *File) any { return f.ContextProxy.TrimAtTokens }},
	{KeyTrimToFraction, "Trim to (fraction)", "How much of the older in-turn steps a trim keeps.", "float", true,
		func(c *Config) string { return FloatText(c.Proxy.TrimToFraction) }, func(f *File) any { return f.ContextProxy.TrimToFraction }},
	{KeyCharsPerToken, "Characters per token", "The ratio that estimates a prompt's tokens before a session reports its real usage.", "float", true,
		func(c *Config) string { return FloatText(c.Proxy.CharsPerToken) }, func(f *File) any { return f.ContextProxy.CharsPerToken }},
	{KeyCompressOverTokens, "Compress tool results over (tokens)", "Tool results larger than this many estimated tokens are compressed; 0 turns compression off.", "int", true,
		func(c *Config) string { return intText(c.Proxy.CompressOverTokens) }, func(f *File) any { return f.ContextProxy.CompressOverTokens }},
	{KeyStandingInstruction, "Standing instruction", "Adds the instruction that tells the model trimmed turns are saved and how to recall them.", "bool", true,
		func(c *Config) string { return strconv.FormatBool(c.Proxy.StandingInstruction) }, func(f *File) any { return f.ContextProxy.StandingInstruction }},
	{KeyPort, "Port", "The loopback port of the proxy, the dashboard and the recall tools; after a change run 'smarter-compact install' to point the agents at it.", "int", false,
		func(c *Config) string { return intText(c.Port) }, func(f *File) any { return f.ContextProxy.Port }},
	{KeyMaxChars, "Recall block size (characters)", "The cap on the recall block after a trim pointer, frame included; recall needs a [memory] table (docs/memory.md).", "int", true,
		func(c *Config) string { return intText(c.CompactionMaxChars) }, func(f *File) any { return f.Compaction.MaxChars }},
	{KeyRecall, "Recall in the trim pointer", "Puts memory recalled for the cut turn after the trim pointer; needs a [memory] table (docs/memory.md).", "bool", true,
		func(c *Config) string { return strconv.FormatBool(c.CompactionRecall) }, func(f *File) any { return f.Compaction.Recall }},
	{KeyTTLDays, "Keep sessions (days)", "Sessions idle longer than this are deleted by the daily retention sweep; 0 keeps everything.", "int", true,
		func(c *Config) string { return intText(c.TTLDays) }, func(f *File) any { return f.ContextStore.TTLDays }},
	{KeyEmbeddingModel, "Embedding model", "The model that embeds rows for hybrid search; empty turns vectors off.", "string", false,
		func(c *Config) string { return c.EmbeddingModel }, func(f *File) any { return f.ContextStore.EmbeddingModel }},
	{KeyEmbeddingURL, "Embedding URL", "The OpenAI-compatible embeddings endpoint's base URL.", "string", false,
		func(c *Config) string { return c.EmbeddingURL }, func(f *File) any { return f.ContextStore.EmbeddingURL }},
	{KeyEmbeddingTimeoutS, "Embedding timeout (seconds)", "How long one embeddings call may take.", "int", false,
		func(c *Config) string { return intText(int(c.EmbeddingTimeout / time.Second)) }, func(f *File) any { return f.ContextStore.EmbeddingTimeoutS }},
	{KeyEmbeddingMaxChars, "Embedded characters per row", "How many characters of each row's head are embedded.", "int", false,
		func(c *Config) string { return intText(c.EmbeddingMaxChars) }, func(f *File) any { return f.ContextStore.EmbeddingMaxChars }},
	{KeyUpstreamAnthropic, "Anthropic upstream", "Where Anthropic Messages API requests go (a gateway's base URL chains through it).", "string", true,
		func(c *Config) string { return c.Proxy.Upstreams["anthropic"] }, func(f *File) any { return f.Upstream.Anthropic }},
	{KeyUpstreamOpenAI, "OpenAI upstream", "Where OpenAI Chat Completions and Responses requests go.", "string", true,
		func(c *Config) string { return c.Proxy.Upstreams["openai"] }, func(f *File) any { return f.Upstream.OpenAI }},
	{KeyUpstreamCodex, "Codex upstream", "Where Codex's ChatGPT-login requests go.", "string", true,
		func(c *Config) string { return c.Proxy.Upstreams["codex"] }, func(f *File) any { return f.Upstream.Codex }},
}

// Defaults is the config without a file or environment: the settings' defaults.
var Defaults = sync.OnceValue(func() Config {
	rc, err := ResolveText("", nil, func(string) string { return "" })
	if err != nil {
		panic("config: the defaults do not resolve: " + err.Error())
	}
	return rc.Config
})

// SavedText is a decoded file value as text without quotes, "" when absent.
func SavedText(v any) string {
	switch v := v.(type) {
	case *int64:
		if v != nil {
			return strconv.FormatInt(*v, 10)
		}
	case *float64:
		if v != nil {
			return FloatText(*v)
		}
	case *bool:
		if v != nil {
			return strconv.FormatBool(*v)
		}
	case *string:
		if v != nil {
			return *v
		}
	}
	return ""
}

// SettingIDs are the IDs of Settings, in order.
func SettingIDs() []string {
	ids := make([]string, len(Settings))
	for i, d := range Settings {
		ids[i] = d.ID()
	}
	return ids
}
