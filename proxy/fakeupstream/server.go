package fakeupstream

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// DefaultMaxBodyBytes is the request size limit of the Messages and Token Counting APIs:
// 32 MB (api-rules §1.1).
const DefaultMaxBodyBytes = 32 << 20

// Options configures a Server. The zero value is a strict fake with DefaultReply.
type Options struct {
	// Reply scripts the answer to each accepted model request (POST …/v1/messages,
	// …/chat/completions, …/responses; not count_tokens or …/responses/compact); nil means
	// DefaultReply. Request.Format tells the formats apart. It may be called from several
	// goroutines at once.
	Reply func(req *Request) Reply

	// Models overrides the rules of a model id (exact match). Ids not in the map get
	// DefaultRules(id).
	Models map[string]ModelRules

	// Lenient turns off the two sequence rules the sources disagree on (api-rules §1.3): the
	// first message must be user, and user and assistant must alternate. The zero value
	// enforces both.
	Lenient bool

	// MaxBodyBytes is the size limit for the body as received and as decoded; over it the
	// answer is 413 request_too_large (api-rules §1.1). 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// APIKey, when set, must arrive as x-api-key or "Authorization: Bearer <key>"; otherwise
	// 401 authentication_error (OpenAI routes: 401 invalid_request_error, code
	// "invalid_api_key"). Empty accepts any credentials, and none.
	APIKey string

	// SigningKey is the HMAC key for thinking signatures and for the encrypted_content of
	// Responses reasoning items. nil means a fixed key, so a scripted run emits the same
	// signatures every time.
	SigningKey []byte

	// OpenAIMinCacheTokens is the shortest prefix the simulated OpenAI prompt cache counts as
	// cached (api-rules §3.4: "1024 tokens or longer"). 0 means 1024; negative means no minimum.
	OpenAIMinCacheTokens int
}

// ModelRules is how a fake model behaves where real models differ.
type ModelRules struct {
	// BindsThinkingToPrefix makes every thinking signature also bind system, tools and the
	// messages before the block (api-rules §1.7.4, Fable 5.1 and Opus 5.5).
	BindsThinkingToPrefix bool
	// RequireThinkingFirstInOpenLoop rejects, when thinking is on, a request that ends in a
	// tool_result-only user message whose assistant message does not start with thinking
	// (api-rules §1.7.2). Off models the documented graceful degradation.
	RequireThinkingFirstInOpenLoop bool
	// RejectPrefill rejects a final assistant message (api-rules §1.3, Claude 4.6+).
	RejectPrefill bool
	// AllowSystemRole accepts role "system" messages in legal places (api-rules §1.3).
	AllowSystemRole bool
	// RejectManualThinking rejects thinking.type "enabled" (api-rules §1.1, 4.7+ models).
	RejectManualThinking bool
	// RejectAdaptiveThinking rejects thinking.type "adaptive" (api-rules §1.1, 4.5 and earlier).
	RejectAdaptiveThinking bool
	// RejectDisabledThinking rejects thinking.type "disabled" (api-rules §1.1, always-thinking models).
	RejectDisabledThinking bool
	// MinCacheableTokens is the shortest prefix the cache stores (api-rules §1.8); shorter
	// breakpoints are silently not cached. 0 caches any prefix.
	MinCacheableTokens int
}

// DefaultRules returns the rules for a model id when Options.Models has none:
//   - ids containing "opus-5-5" or "fable-5-1" bind thinking to the prefix, reject
//     thinking.type "enabled" and "disabled", and degrade gracefully in an open tool loop
//     (no thinking-first 400: Claude Code's own retry after a binding 400 drops all thinking
//     and is accepted by the real API, clients.md "Gotchas");
//   - every other id requires thinking first in the open tool loop;
//   - Claude 4.x and 3.x ids ("-4-", "claude-3") refuse role "system" messages, and those up
//     to 4.5 refuse adaptive thinking;
//   - prefill is rejected for all (the proxy must never produce one); MinCacheableTokens is 0.
func DefaultRules(model string) ModelRules {
	binds := strings.Contains(model, "opus-5-5") || strings.Contains(model, "fable-5-1")
	old := strings.Contains(model, "-4-") || strings.Contains(model, "claude-3")
	noAdaptive := strings.Contains(model, "claude-3")
	for _, v := range []string{"-4-5", "-4-1", "-4-0", "-4-2"} {
		if strings.Contains(model, v) {
			noAdaptive = true
		}
	}
	return ModelRules{
		BindsThinkingToPrefix:          binds,
		RequireThinkingFirstInOpenLoop: !binds,
		RejectPrefill:                  true,
		AllowSystemRole:                !old,
		RejectManualThinking:           binds,
		RejectAdaptiveThinking:         noAdaptive,
		RejectDisabledThinking:         binds,
	}
}

// Server is the fake upstream, an http.Handler. Routes (any path prefix; the query is ignored):
//
//	POST …/v1/messages (?beta=true or not)  Anthropic Messages (api-rules §1, §2.1)
//	POST …/v1/messages/count_tokens         Anthropic token counting (§2.2)
//	POST …/chat/completions                 OpenAI Chat Completions (§3; chat.go)
//	POST …/responses                        OpenAI Responses and the Codex backend (§4; responses.go),
//	                                        e.g. /v1/responses, /backend-api/codex/responses
//	POST …/responses/compact                remote compaction: 200 {"object":"response.compaction",…}
//	GET  …/models                           200 {"object":"list","data":[],"models":[]}
//	GET  …/responses + Upgrade: websocket   426: the fake speaks HTTP only (Codex falls back to it)
//
// Any other request gets 404 not_found_error. Errors on the OpenAI routes use the OpenAI
// envelope (§4.6), the others the Anthropic one (§1.9). It is safe for concurrent use.
type Server struct {
	// URL is the base URL when the Server was started with Start ("http://127.0.0.1:port").
	URL string

	opts Options
	key  []byte

	mu        sync.Mutex
	nextReq   int
	nextMsg   int
	nextTool  int
	nextSig   uint64
	records   []Recorded
	signed    map[uint64]*signedBlock
	responses map[string][]uint64              // message id → serials of its thinking blocks, in order
	cache     map[string]map[[32]byte]struct{} // model → cached prefix hashes

	// OpenAI formats (openai.go, responses.go)
	oaCache   map[string]map[[32]byte]struct{} // model and prompt_cache_key → prefix hashes sent
	reasoning map[string]bool                  // ids of the reasoning items the fake emitted
	linked    map[string]string                // item id → id of the reasoning item before it in its response
	followers map[string][]follower            // reasoning id → the items after it in its response
	stored    map[string][]map[string]any      // response id → its context, for store != false
	items     map[string]map[string]any        // item id → item of a stored response
}

// New returns a Server; it does not listen (see Start, or mount it yourself).
func New(opts Options) *Server {
	key := opts.SigningKey
	if key == nil {
		key = []byte("smarter-compact fakeupstream signing key")
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return &Server{
		opts:      opts,
		key:       key,
		signed:    map[uint64]*signedBlock{},
		responses: map[string][]uint64{},
		cache:     map[string]map[[32]byte]struct{}{},
		oaCache:   map[string]map[[32]byte]struct{}{},
		reasoning: map[string]bool{},
		linked:    map[string]string{},
		followers: map[string][]follower{},
		stored:    map[string][]map[string]any{},
		items:     map[string]map[string]any{},
	}
}

// Start serves a new Server on a loopback httptest.Server, sets URL, and closes it when t ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s := New(opts)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	s.URL = ts.URL
	return s
}

// StartSilent serves an upstream that accepts each request and never answers it: the
// request waits until its client gives up (a proxy's upstream idle timeout) or t ends. It
// returns the server's base URL.
func StartSilent(t testing.TB) string {
	t.Helper()
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release: // t ended: Close waits for the handlers
		}
	}))
	t.Cleanup(func() { close(release); ts.Close() })
	return ts.URL
}

// rules returns the rules of a model: Options.Models first, then DefaultRules.
func (s *Server) rules(model string) ModelRules {
	if r, ok := s.opts.Models[model]; ok {
		return r
	}
	return DefaultRules(model)
}

// Recorded is one request as the Server saw it and what it answered.
type Recorded struct {
	Format string // "anthropic", "chat" or "responses" (…/responses/compact too); "" for other routes
	Method string
	Path   string // path and query as received, e.g. "/v1/messages?beta=true"
	Header http.Header
	Raw    []byte // body as received
	Body   []byte // body after Content-Encoding decoding (same as Raw without one)

	Status    int    // HTTP status answered
	ErrorType string // error.type of the envelope, "" when accepted
	Error     string // error.message of the envelope, "" when accepted
	RequestID string // the request-id header answered

	// MessageID is the id of the message answered ("msg_fake_…"; the OpenAI formats:
	// "chatcmpl-fake…", "resp_fake_…", "cmp_fake_…"), "" for errors and count_tokens.
	MessageID   string
	StreamError string // message of an injected mid-stream error
	// Usage is the usage answered, in the Anthropic meaning for every format so tests compare
	// uniformly: InputTokens is the uncached part of the prompt, CacheReadInputTokens the cached
	// part (OpenAI: prompt_tokens/input_tokens = InputTokens + CacheReadInputTokens and
	// cached_tokens = CacheReadInputTokens; the OpenAI formats never write cache, so the
	// creation fields are 0). count_tokens: InputTokens only.
	Usage                Usage
	InputTransformations []InputTransformation
}

// Requests returns every request received so far, in arrival order.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.records)
}

// Rejections returns the requests answered with an HTTP status of 400 or more, in order.
func (s *Server) Rejections() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Recorded
	for _, r := range s.records {
		if r.Status >= 400 {
			out = append(out, r)
		}
	}
	return out
}

// Error is an API error: the HTTP status and the envelope's error.type and error.message
// (Anthropic, api-rules §1.9), plus error.param and error.code for the OpenAI envelope
// (§4.6), where "" is null. Reply.Error and Reply.StreamError use it to inject errors.
type Error struct {
	Status  int
	Type    string
	Message string
	Param   string // OpenAI only
	Code    string // OpenAI only; also the code of an injected response.failed (see Reply)
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message) }

// Overloaded returns the 529 overloaded_error the API sends under load; as Reply.StreamError
// it becomes the documented mid-stream `event: error` (api-rules §2.1).
func Overloaded() *Error {
	return &Error{Status: 529, Type: "overloaded_error", Message: "Overloaded"}
}

// invalid is a 400 invalid_request_error.
func invalid(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
}

// ServeHTTP answers one request and records it (see Requests).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.nextReq++
	rec := Recorded{
		Method:    r.Method,
		Path:      r.URL.RequestURI(),
		Header:    r.Header.Clone(),
		RequestID: fmt.Sprintf("req_fake_%04d", s.nextReq),
	}
	s.mu.Unlock()

	w.Header().Set("request-id", rec.RequestID)
	if err := s.serve(w, r, &rec); err != nil {
		if rec.Format == FormatChat || rec.Format == FormatResponses {
			writeOpenAIError(w, err)
		} else {
			writeError(w, err, rec.RequestID)
		}
		rec.Status, rec.ErrorType, rec.Error = err.Status, err.Type, err.Message
	}

	s.mu.Lock()
	s.records = append(s.records, rec)
	s.mu.Unlock()
}

// serve routes a request (one line per method and path) and returns the error to answer.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, rec *Recorded) *Error {
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/messages"):
		return s.messages(w, r, rec, false)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/messages/count_tokens"):
		return s.messages(w, r, rec, true)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		return s.chat(w, r, rec)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses"):
		return s.responsesAPI(w, r, rec)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses/compact"):
		return s.compact(w, r, rec)
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models"):
		return s.models(w, rec)
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/responses") && isWebSocket(r):
		rec.Format = FormatResponses
		return &Error{Status: http.StatusUpgradeRequired, Type: "invalid_request_error",
			Message: "websocket transport is not supported by this fake; use HTTP"}
	default:
		return &Error{Status: http.StatusNotFound, Type: "not_found_error", Message: "Not Found"}
	}
}

// writeError writes the Anthropic error envelope (api-rules §1.9).
func writeError(w http.ResponseWriter, e *Error, requestID string) {
	body, _ := json.Marshal(struct {
		Type      string `json:"type"`
		Error     any    `json:"error"`
		RequestID string `json:"request_id"`
	}{"error", struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}{e.Type, e.Message}, requestID})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	w.Write(body)
}

// authorize checks Options.APIKey in constant time.
func (s *Server) authorize(r *http.Request) *Error {
	if s.opts.APIKey == "" {
		return nil
	}
	got := r.Header.Get("X-Api-Key")
	if got == "" {
		got, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.APIKey)) != 1 {
		return &Error{Status: http.StatusUnauthorized, Type: "authentication_error", Message: "invalid x-api-key"}
	}
	return nil
}

// betas returns the anthropic-beta values of a request (the header may repeat, values are
// comma-separated).
func betas(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Anthropic-Beta") {
		for _, b := range strings.Split(v, ",") {
			if b = strings.TrimSpace(b); b != "" {
				out = append(out, b)
			}
		}
	}
	return out
}
