package proxy

import "time"

// Settings are the proxy's knobs (seed 001: configuration table; DESIGN.md §7). The app
// fills them from config.toml and the environment; zero values are not defaults, use
// DefaultSettings.
type Settings struct {
	// TrimAtTokens is the trim threshold in estimated prompt tokens; 0 means "follow the
	// model": 95000 for a model id containing "haiku", 120000 otherwise.
	TrimAtTokens int
	// TrimToFraction bounds how many older in-turn steps a trim keeps (0 < f < 1; default 0.3).
	TrimToFraction float64
	// CharsPerToken is the estimate's ratio before a session reports usage (default 2.5).
	CharsPerToken float64
	// CompressOverTokens: tool results above this many estimated tokens are compressed;
	// 0 disables compression (default 4000).
	CompressOverTokens int
	// StandingInstruction adds the contract's standing instruction to every request (default true).
	StandingInstruction bool

	// Upstreams are the base URLs per API family: "anthropic", "openai", "codex".
	Upstreams map[string]string
	// AgentUpstreams are per-agent overrides of Upstreams: agent ("claude-code", "codex",
	// "opencode") to family ("anthropic", "openai", "codex") to base URL, from config.toml's
	// [upstream.agents.<agent>] tables. When an agent pointed at a gateway before install,
	// the installer records that URL as the route's upstream, so we chain (DESIGN.md §5);
	// keeping it per agent stops one agent's gateway from taking another agent's traffic of
	// the same family. A request uses its agent's override when its route names the agent
	// or the agent was inferred from the request, else Upstreams[family]. Nil means none.
	AgentUpstreams map[string]map[string]string

	// ConnectTimeout bounds dialing the upstream; IdleTimeout bounds the wait for response
	// headers and for each read of the response body.
	ConnectTimeout time.Duration
	IdleTimeout    time.Duration

	// OnRowsStored, when set, is called with the session id after a request inserted new
	// rows (the embedder's queue, contract: Vectors). It runs on the request path and must
	// not block.
	OnRowsStored func(sid string)

	// Recall is the memory provider asked once per new cut of a session whose registration
	// names a bank (seed 001, context proxy step 4; contract: Proxy-inserted text); nil
	// means no recall: the pointer goes alone, as without a [memory] table.
	Recall Recaller
	// RecallMaxChars caps the recall block, frame included, in code points (contract:
	// max_chars; default 12000). A cap below the frame leaves the block out.
	RecallMaxChars int
	// RecallTimeout bounds the provider's answers on the cutting request (default 5 s):
	// past it the pointer goes alone.
	RecallTimeout time.Duration
	// BankFor returns the bank of a working directory ([memory] bank, [memory.banks]); when
	// set, a session without a registration is registered with it once a request names
	// its working directory. Nil registers nothing. It must not block.
	BankFor func(cwd string) string
}

// DefaultSettings returns the seed defaults.
func DefaultSettings() Settings {
	return Settings{
		TrimToFraction:      0.3,
		CharsPerToken:       2.5,
		CompressOverTokens:  4000,
		StandingInstruction: true,
		Upstreams: map[string]string{
			"anthropic": "https://api.anthropic.com",
			"openai":    "https://api.openai.com",
			"codex":     "https://chatgpt.com/backend-api/codex",
		},
		ConnectTimeout: 10 * time.Second,
		IdleTimeout:    10 * time.Minute,
		RecallMaxChars: 12000,
		RecallTimeout:  5 * time.Second,
	}
}

// Toggles answers whether trimming is on for an agent ("claude-code", "codex", "opencode",
// "unknown"). It is asked on every request, so a change takes effect on the next one.
type Toggles interface {
	Enabled(agent string) bool
}
