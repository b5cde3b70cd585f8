package proxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/smarter-compact/smarter-compact/store"
)

// What the proxy reports to the store's health record (store.Health; issue 15 item 2):
// upstream failures with the API's own error text, fail-opens, and thresholds the trim
// cannot get under. Texts carry error types, statuses and the API's error message, never a
// request or response body, a header or a credential (secretish removes key-like strings
// from what an API echoes).

// errorCapture bounds the bytes of an upstream error answer kept to read its message.
const errorCapture = 16 << 10

// upstreamFailure reports a request that got no answer from the upstream (dial refused,
// DNS, TLS, timeout): the class and what to do.
func (p *Proxy) upstreamFailure(r *http.Request, err error, timeout bool) {
	rt, _ := r.Context().Value(routeKey{}).(route)
	class, what := "failed", "the upstream request failed"
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	switch {
	case timeout:
		class, what = "timeout", "the upstream did not answer in time"
	case errors.Is(err, syscall.ECONNREFUSED), strings.Contains(err.Error(), "actively refused"): // the latter: Windows' WSAECONNREFUSED
		class, what = "connection_refused", "nothing accepts connections there"
	case errors.As(err, &dnsErr):
		class, what = "dns", "the host name does not resolve"
	case errors.As(err, &certErr):
		class, what = "tls", "its TLS certificate is not trusted"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		class, what = "connection_reset", "the connection broke before an answer (did the upstream stop or restart?)"
	}
	host := r.URL.Host
	hint := fmt.Sprintf("Requests to %s fail: %s. The agent gets a %s and retries. Check that the upstream URL is right (%s) and that it is reachable from this machine (network, VPN, proxy).",
		host, what, map[bool]string{true: "504", false: "502"}[timeout], upstreamSetting(rt, p.cfg()))
	p.root.Health().Report(store.Problem{Kind: store.HealthUpstream, Key: host, Class: class,
		Text: fmt.Sprintf("%s %s: %s", r.Method, redactedPath(r), secretish(err.Error())), Hint: hint})
}

// upstreamSetting names where the route's upstream URL is set.
func upstreamSetting(rt route, s *Settings) string {
	switch {
	case rt.agentKnown && s.AgentUpstreams[rt.agent][rt.family] != "":
		return fmt.Sprintf("[upstream.agents.%s] %s in config.toml", rt.agent, rt.family)
	case rt.family != "":
		return fmt.Sprintf("[upstream] %s in config.toml or SMARTER_COMPACT_UPSTREAM_%s", rt.family, strings.ToUpper(rt.family))
	}
	return "[upstream] in config.toml"
}

// redactedPath is the request's path without its query (a query may carry a key).
func redactedPath(r *http.Request) string { return r.URL.Path }

// upstreamAnswered looks at an upstream answer's status: a success resolves the host's
// source; 4xx and 5xx are reported with the API's error text once the body was read (the
// client gets every byte unchanged; body is what modifyResponse passes on).
func (p *Proxy) upstreamAnswered(resp *http.Response, body io.ReadCloser) io.ReadCloser {
	host := resp.Request.URL.Host
	if resp.StatusCode < 400 {
		p.root.Health().Resolve(store.HealthUpstream, host)
		return body
	}
	rt, _ := resp.Request.Context().Value(routeKey{}).(route)
	c := &errorBody{ReadCloser: body}
	c.report = func(captured []byte) {
		text := apiErrorText(captured, resp.Header.Get("Content-Encoding"))
		line := fmt.Sprintf("%s %s: HTTP %d", resp.Request.Method, redactedPath(resp.Request), resp.StatusCode)
		if text != "" {
			line += " " + text
		}
		p.root.Health().Report(store.Problem{Kind: store.HealthUpstream, Key: host, Class: "http_" + strconv.Itoa(resp.StatusCode/100) + "xx",
			Text: line, Hint: statusHint(resp.StatusCode, host, rt, p.cfg())})
	}
	return c
}

// statusHint says what to do about an upstream's error status.
func statusHint(code int, host string, rt route, s *Settings) string {
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return host + " refused the credentials: check the agent's API key or login. smarter-compact forwards them unchanged."
	case code == http.StatusTooManyRequests:
		return host + " rate-limits the requests: wait, or run fewer agents at once."
	case code == http.StatusNotFound:
		return host + " has no such path or model: check the upstream URL (" + upstreamSetting(rt, s) + ") and the agent's model name."
	case code == http.StatusRequestEntityTooLarge:
		return host + " refused the request as too large: lower [context_proxy] trim_at_tokens so requests are trimmed sooner."
	case code >= 500:
		return host + " reports a server error (" + strconv.Itoa(code) + "): usually temporary, the agent retries; the provider's status page says more."
	}
	return host + " rejected the request (" + strconv.Itoa(code) + "): if its message names something smarter-compact changed, switch trimming off for the agent (smarter-compact off <agent>) and report it."
}

// errorBody passes an error answer through and keeps its first errorCapture bytes; report
// runs once, at EOF or Close.
type errorBody struct {
	io.ReadCloser
	buf    []byte
	once   sync.Once
	report func([]byte)
}

func (b *errorBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if room := errorCapture - len(b.buf); room > 0 && n > 0 {
		b.buf = append(b.buf, p[:min(n, room)]...)
	}
	if err != nil {
		b.once.Do(func() { b.report(b.buf) })
	}
	return n, err
}

func (b *errorBody) Close() error {
	b.once.Do(func() { b.report(b.buf) })
	return b.ReadCloser.Close()
}

// apiErrorText is the error type and message of an API's error answer: Anthropic's
// {"type":"error","error":{"type","message"}}, OpenAI's {"error":{"message","type","code"}},
// or the first line of a text answer; key-like strings removed, at most 300 bytes.
func apiErrorText(raw []byte, encoding string) string {
	b, err := decodeBody(raw, encoding)
	if err != nil {
		return "(the error body could not be decoded)"
	}
	var env struct {
		Error json.RawMessage `json:"error"`
		Msg   string          `json:"message"`
	}
	text := ""
	if json.Unmarshal(b, &env) == nil {
		var e struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Code    any    `json:"code"`
		}
		var s string
		switch {
		case json.Unmarshal(env.Error, &e) == nil && (e.Message != "" || e.Type != ""):
			text = strings.TrimSpace(e.Type + ": " + e.Message)
			text = strings.TrimPrefix(text, ": ")
		case json.Unmarshal(env.Error, &s) == nil && s != "":
			text = s
		case env.Msg != "":
			text = env.Msg
		}
	}
	if text == "" {
		line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if strings.HasPrefix(line, "<") { // an HTML error page says nothing useful
			line = "(an HTML page)"
		}
		text = line
	}
	text = secretish(text)
	if len(text) > 300 {
		text = text[:300] + "…"
	}
	return text
}

// secretRE matches what looks like a credential an API may echo in an error message: an
// sk-/key-style token, a bearer value, or any run of 32 or more key characters.
var secretRE = regexp.MustCompile(`(?i)\b(sk|pk|rk|key|sess|ghp|xox[abp])[-_][A-Za-z0-9_\-*.]{6,}|bearer\s+\S+|[A-Za-z0-9_\-]{32,}`)

// secretish replaces key-like strings with "[redacted]".
func secretish(s string) string { return secretRE.ReplaceAllString(s, "[redacted]") }

// reportFailOpen counts a fail-open in the health record, whose count does not depend on
// the session database the fail_open event goes to (it may be the thing failing).
func (p *Proxy) reportFailOpen(sid, kind, loc string, err error) {
	text := "fail-open " + kind + " at " + loc
	if c := errorClass(err); c != "" {
		text += ": " + c
	}
	p.root.Health().Report(store.Problem{Kind: store.HealthFailOpen, Key: kind + " at " + loc, Session: sid, Class: kind, Text: text,
		Hint: "The request went to the API untrimmed and unstored; the agent saw no error. If it repeats, switch trimming off for the agent (smarter-compact off <agent>) and report the fail-open line of the service log."})
}

// noteThreshold reports a request of session sid still at or over the threshold after the
// trim did what it could (after is its estimate then, cut whether it made a new cut), and
// resolves the session's source once a request is under it.
func (p *Proxy) noteThreshold(sid string, before, after, threshold int, cut bool) {
	h := p.root.Health()
	if before < threshold || after < threshold {
		h.Resolve(store.HealthTrimStuck, sid)
		return
	}
	what := "the trim found nothing more to drop, so every request goes out over it"
	if cut {
		what = "every request of the session cuts again and rewrites the prompt cache"
	}
	h.Report(store.Problem{Kind: store.HealthTrimStuck, Key: sid, Session: sid, Class: "over_threshold",
		Text: fmt.Sprintf("session %s: about %d tokens after the trim, threshold %d: %s", sid, after, threshold, what),
		Hint: fmt.Sprintf("What a trim must keep (system prompt, tools, the first and the latest turn) is over trim_at_tokens = %d. Raise [context_proxy] trim_at_tokens (or CONTEXT_TRIM_AT_TOKENS) above %d, or switch trimming off for this agent.", threshold, after)})
}

// idleFailure reports an upstream that stopped sending its answer for the idle timeout.
func (p *Proxy) idleFailure(ctx context.Context, r *http.Request) {
	if !isIdle(ctx) {
		return
	}
	p.upstreamFailure(r, errors.New("the answer stalled for the idle timeout"), true)
}
