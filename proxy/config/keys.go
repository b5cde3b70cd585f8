package config

import "strings"

// Key is one config.toml key with its environment override and the values it accepts.
type Key struct {
	Section, Name string
	Env           string             // "" when there is no override
	Accepts       string             // quoted in errors
	ok            func(float64) bool // range check for numbers; nil for other kinds
}

func (k Key) String() string { return "[" + k.Section + "] " + k.Name }

func between(lo, hi float64) func(float64) bool {
	return func(v float64) bool { return v >= lo && v <= hi }
}

func atLeast(lo float64) func(float64) bool { return func(v float64) bool { return v >= lo } }

// The keys of seed 001's configuration table plus [upstream] (DESIGN.md §7).
var (
	KeyEnabled             = Key{"context_proxy", "enabled", "CONTEXT_PROXY_ENABLED", "true or false (env: 0, 1, true, false)", nil}
	KeyPort                = Key{"context_proxy", "port", "CONTEXT_PROXY_PORT", "an integer from 1 to 65535", between(1, 65535)}
	KeyTrimAtTokens        = Key{"context_proxy", "trim_at_tokens", "CONTEXT_TRIM_AT_TOKENS", "an integer of at least 1", atLeast(1)}
	KeyTrimToFraction      = Key{"context_proxy", "trim_to_fraction", "CONTEXT_TRIM_TO_FRACTION", "a number between 0 and 1, both excluded", func(v float64) bool { return v > 0 && v < 1 }}
	KeyCharsPerToken       = Key{"context_proxy", "chars_per_token", "CONTEXT_CHARS_PER_TOKEN", "a number greater than 0", func(v float64) bool { return v > 0 }}
	KeyCompressOverTokens  = Key{"context_proxy", "compress_over_tokens", "CONTEXT_COMPRESS_OVER_TOKENS", "an integer of at least 0 (0 disables compression)", atLeast(0)}
	KeyStandingInstruction = Key{"context_proxy", "standing_instruction", "CONTEXT_STANDING_INSTRUCTION", "true or false (env: 0, 1, true, false)", nil}
	KeyPaused              = Key{"context_proxy", "paused", "", "true or false", nil}
	keyAgentClaudeCode     = Key{"context_proxy.agents", AgentClaudeCode, "", "true or false", nil}
	keyAgentCodex          = Key{"context_proxy.agents", AgentCodex, "", "true or false", nil}
	keyAgentOpenCode       = Key{"context_proxy.agents", AgentOpenCode, "", "true or false", nil}
	KeyMaxChars            = Key{"compaction", "max_chars", "CONTEXT_COMPACTION_MAX_CHARS", "an integer of at least 0", atLeast(0)}
	KeyRecall              = Key{"compaction", "recall", "CONTEXT_COMPACTION_RECALL", "true or false (env: 0, 1, true, false)", nil}
	KeyTTLDays             = Key{"context_store", "ttl_days", "CONTEXT_STORE_TTL_DAYS", "an integer of at least 0 (0 keeps everything)", atLeast(0)}
	KeyEmbeddingModel      = Key{"context_store", "embedding_model", "CONTEXT_EMBEDDING_MODEL", "a model name (empty turns vectors off)", nil}
	KeyEmbeddingURL        = Key{"context_store", "embedding_url", "CONTEXT_EMBEDDING_URL", "an absolute http or https URL", nil}
	KeyEmbeddingTimeoutS   = Key{"context_store", "embedding_timeout_s", "CONTEXT_EMBEDDING_TIMEOUT_S", "an integer of at least 1 (seconds)", atLeast(1)}
	KeyEmbeddingMaxChars   = Key{"context_store", "embedding_max_chars", "CONTEXT_EMBEDDING_MAX_CHARS", "an integer of at least 1", atLeast(1)}
	KeyUpstreamAnthropic   = Key{"upstream", "anthropic", "SMARTER_COMPACT_UPSTREAM_ANTHROPIC", "an absolute http or https URL", nil}
	KeyUpstreamOpenAI      = Key{"upstream", "openai", "SMARTER_COMPACT_UPSTREAM_OPENAI", "an absolute http or https URL", nil}
	KeyUpstreamCodex       = Key{"upstream", "codex", "SMARTER_COMPACT_UPSTREAM_CODEX", "an absolute http or https URL", nil}
)

// UpstreamFamilies are the API families of [upstream], in display order.
var UpstreamFamilies = []string{"anthropic", "openai", "codex"}

// agentUpstreamKey is the key of [upstream.agents.<agent>] <family> (no environment
// override): a per-agent upstream, which wins over [upstream] <family> for that agent only.
func agentUpstreamKey(agent, family string) Key {
	return Key{"upstream.agents." + agent, family, "", "an absolute http or https URL", nil}
}

// AllKeys finds a key from go-toml's key path when the file gives a value of the wrong type.
var AllKeys = append([]Key{
	KeyEnabled, KeyPort, KeyTrimAtTokens, KeyTrimToFraction, KeyCharsPerToken, KeyCompressOverTokens,
	KeyStandingInstruction, KeyPaused, keyAgentClaudeCode, keyAgentCodex, keyAgentOpenCode, KeyMaxChars, KeyRecall,
	KeyTTLDays, KeyEmbeddingModel, KeyEmbeddingURL, KeyEmbeddingTimeoutS, KeyEmbeddingMaxChars,
	KeyUpstreamAnthropic, KeyUpstreamOpenAI, KeyUpstreamCodex,
}, append(agentUpstreamKeys(), append(memoryKeys, timeoutKeys...)...)...)

func agentUpstreamKeys() []Key {
	var ks []Key
	for _, a := range ConfiguredAgents {
		for _, fam := range UpstreamFamilies {
			ks = append(ks, agentUpstreamKey(a, fam))
		}
	}
	return ks
}

// EnvOverride returns the key's environment variable's value when it is set; an empty
// (or blank) variable counts as unset.
func EnvOverride(k Key, getenv func(string) string) (string, bool) {
	if k.Env == "" {
		return "", false
	}
	v := strings.TrimSpace(getenv(k.Env))
	return v, v != ""
}
