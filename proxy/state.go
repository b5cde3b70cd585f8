package proxy

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
)

// trimState is sessions/<sid>.trim.json (contract: proxy-private; seed 001: token
// estimate). Messages are named by the fingerprint of their first row, so a later request
// with the same history finds the same cut whatever its wire form.
type trimState struct {
	Threads map[string]*threadState `json:"threads"`
	// Latest is the session's newest usage sample, used by a thread with none of its own.
	Latest *usageSample `json:"latest,omitempty"`
	// Source names where the session id came from (contract: Session id): a header name,
	// "metadata", "prompt_cache_key" or "fingerprint".
	Source string `json:"source,omitempty"`
	// Agent is the agent of the route the session's requests came on (claude-code, codex,
	// opencode); absent while only the "unknown" route carried them. The dashboard lists
	// it for a session without a registration.
	Agent string `json:"agent,omitempty"`
}

type threadState struct {
	Cut     string `json:"cut,omitempty"`      // first row of the cut turn
	Gap     string `json:"gap,omitempty"`      // first row of the first kept tail message; "" no gap
	StripFP string `json:"strip_fp,omitempty"` // first row of the latest assistant message at trim time; "" strips none
	// StripAfter: that message loses its thinking too (models that bind thinking to its
	// prefix), so the strip point is the message after it.
	StripAfter bool `json:"strip_after,omitempty"`
	// KeepHead: the cut turn was not a clean cut, so only its in-turn gap drops.
	KeepHead bool         `json:"keep_head,omitempty"`
	Block    string       `json:"block,omitempty"` // the pointer (and recall) text, repeated byte for byte
	Dropped  int          `json:"dropped,omitempty"`
	Sample   *usageSample `json:"sample,omitempty"`
	// Untrimmed is the estimated prompt tokens of the thread's last request as the agent
	// sent it (savings.go): what the prompt cache would have held without trimming.
	Untrimmed int `json:"untrimmed,omitempty"`
}

// usageSample pairs the characters of a forwarded view with the prompt tokens the
// provider reported for it (seed 001: token estimate).
type usageSample struct {
	Chars  int `json:"chars"`
	Tokens int `json:"tokens"`
}

func decodeTrimState(b []byte) trimState {
	var st trimState
	if len(b) > 0 {
		_ = json.Unmarshal(b, &st) // a damaged file starts the session afresh
	}
	if st.Threads == nil {
		st.Threads = map[string]*threadState{}
	}
	return st
}

func (st *trimState) thread(root string) *threadState {
	t := st.Threads[root]
	if t == nil {
		t = &threadState{}
		st.Threads[root] = t
	}
	return t
}

// estimate returns the calibrated prompt size in tokens of a view of chars characters
// (seed 001: token estimate): tokens + ceil((chars − chars then) / ratio) from the thread's
// sample, else chars / the session's latest ratio, else chars / charsPerToken.
//
// The sample's form is never below ceil(chars / 8), the fewest tokens the ratio's bound of
// 1–8 characters per token allows: an upstream whose usage does not track the prompt (a
// gateway, a fake) gives a sample far from the view, and a view much smaller than the
// sample's went negative (tokens_after −185008, "tokens saved" over 100% of the request).
func (st *trimState) estimate(root string, chars int, charsPerToken float64) int {
	if t := st.Threads[root]; t != nil && t.Sample != nil && t.Sample.Tokens > 0 {
		r := ratio(t.Sample)
		est := t.Sample.Tokens + int(math.Ceil(float64(chars-t.Sample.Chars)/r))
		return max(est, int(math.Ceil(float64(chars)/maxCharsPerToken)))
	}
	if st.Latest != nil && st.Latest.Tokens > 0 {
		return int(math.Ceil(float64(chars) / ratio(st.Latest)))
	}
	return int(math.Ceil(float64(chars) / charsPerToken))
}

// maxCharsPerToken bounds a sample's ratio (seed 001: "bounded to 1–8").
const maxCharsPerToken = 8

func ratio(s *usageSample) float64 {
	r := float64(s.Chars) / float64(s.Tokens)
	return math.Min(maxCharsPerToken, math.Max(1, r))
}

// thresholdFor returns the trim threshold for a model: the configured value, else 95000
// for Haiku and 120000 otherwise (seed 001: CONTEXT_TRIM_AT_TOKENS).
func thresholdFor(configured int, model string) int {
	if configured > 0 {
		return configured
	}
	if strings.Contains(strings.ToLower(model), "haiku") {
		return 95000
	}
	return 120000
}

// TrimBlocks returns the text each thread's cut carries after its pointer in a session's
// trim state b (sessions/<sid>.trim.json, whose shape only the proxy knows): the recall
// block and the pending-ingest line (contract: Proxy-inserted text), one entry per thread
// whose cut carries more than the pointer, in thread order. The dashboard's session page
// shows them; a damaged file gives none.
func TrimBlocks(b []byte) []string {
	st := decodeTrimState(b)
	roots := make([]string, 0, len(st.Threads))
	for root := range st.Threads {
		roots = append(roots, root)
	}
	slices.Sort(roots)
	var out []string
	for _, root := range roots {
		if _, rest, ok := strings.Cut(st.Threads[root].Block, "\n"); ok && rest != "" {
			out = append(out, rest)
		}
	}
	return out
}
