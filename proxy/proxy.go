package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
	"golang.org/x/sync/semaphore"
)

// Proxy serves the model-API routes (DESIGN.md §4, §5). It is safe for concurrent use;
// requests of one session are rewritten one at a time.
type Proxy struct {
	// settings is swapped whole by SetSettings; a request reads the value current when
	// it reads a knob.
	settings atomic.Pointer[Settings]
	toggles  Toggles
	root     *store.Root
	log      *slog.Logger
	rp       *httputil.ReverseProxy
	version  string
	now      func() time.Time

	mu          sync.Mutex
	sessions    map[string]*session
	cacheBudget int64 // cacheBudget; tests lower it

	// work holds a slot per rewrite running: parsing, trimming, rendering and storing are
	// CPU-bound, so more at once than there are cores only adds their garbage to the heap
	// together (32 sessions' first requests at once peaked serve at 276 MB before).
	work chan struct{}

	// bodies is the body budget (body_held.go): the bytes of request bodies read and not yet
	// answered by the upstream.
	bodies *semaphore.Weighted
	// bodyRead, when set (tests), sees each request body the rewrite path reads.
	bodyRead func([]byte)

	// noReplyRows turns off storing the reply from the response (reply_rows.go), the
	// behaviour before it: tests show what it fixes and the benchmark what it costs.
	noReplyRows bool

	// contractStripOnly turns off the whole-view strip for models that bind thinking to its
	// prefix; tests use it to show why that strip exists.
	contractStripOnly bool
}

// New returns a proxy over the context root. toggles are asked on every request; log
// receives the fail-open lines. SetSettings changes the settings later, except the two
// timeouts, which the transport keeps from New.
func New(settings Settings, toggles Toggles, root *store.Root, log *slog.Logger) *Proxy {
	settings = normalizedSettings(settings)
	p := &Proxy{
		toggles:     toggles,
		root:        root,
		log:         log,
		version:     "proxy:" + codeVersion(),
		now:         time.Now,
		sessions:    map[string]*session{},
		work:        make(chan struct{}, max(2, runtime.GOMAXPROCS(0))),
		cacheBudget: cacheBudget,
		bodies:      semaphore.NewWeighted(bodyBudget),
	}
	p.settings.Store(&settings)
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: settings.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   settings.ConnectTimeout,
		ResponseHeaderTimeout: settings.IdleTimeout,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        func(*httputil.ProxyRequest) {}, // the target is set on the request before ServeHTTP
		Transport:      transport,
		FlushInterval:  -1,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.upstreamError,
	}
	return p
}

// normalizedSettings fills the zero knobs New and SetSettings would otherwise divide by or misread.
func normalizedSettings(s Settings) Settings {
	if s.CharsPerToken <= 0 {
		s.CharsPerToken = 2.5
	}
	if s.TrimToFraction <= 0 || s.TrimToFraction >= 1 {
		s.TrimToFraction = 0.3
	}
	if s.ConnectTimeout <= 0 {
		s.ConnectTimeout = 10 * time.Second
	}
	if s.IdleTimeout <= 0 {
		s.IdleTimeout = 10 * time.Minute
	}
	if s.RecallTimeout <= 0 {
		s.RecallTimeout = 5 * time.Second
	}
	return s
}

// SetSettings replaces the settings for every request that starts after it returns: the
// thresholds, compression, the standing instruction and the upstreams (DESIGN.md §9: the
// dashboard's settings apply without a restart). ConnectTimeout and IdleTimeout keep their
// values from New. s and its maps must not be changed after the call. Safe for concurrent use.
func (p *Proxy) SetSettings(s Settings) {
	s = normalizedSettings(s)
	old := p.settings.Load()
	s.ConnectTimeout, s.IdleTimeout = old.ConnectTimeout, old.IdleTimeout
	p.settings.Store(&s)
}

// cfg returns the current settings; callers must not change them.
func (p *Proxy) cfg() *Settings { return p.settings.Load() }

var (
	versionOnce sync.Once
	versionHex  string
)

// codeVersion identifies the running build for events' version column (contract: Events):
// the first 12 hex of SHA-256 of the executable, or "dev" when it cannot be read. It is
// computed once per process.
func codeVersion() string {
	versionOnce.Do(func() { versionHex = hashExecutable() })
	return versionHex
}

func hashExecutable() string {
	exe, err := os.Executable()
	if err != nil {
		return "dev"
	}
	return hashFile(exe)
}

// CodeVersion is the running build as the events' version column names it (contract:
// Events): "proxy:" and the first 12 hex of SHA-256 of the executable as it was when first
// asked; New asks, so a service reports the build it started from.
func CodeVersion() string { return "proxy:" + codeVersion() }

// FileVersion is CodeVersion of the executable file at path as it is now ("proxy:dev" when
// it cannot be read): an upgrade in place makes it differ from a running service's
// CodeVersion (the seed's proxy_stale).
func FileVersion(path string) string { return "proxy:" + hashFile(path) }

func hashFile(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "dev"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "dev"
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// ServeHTTP handles a model-API request: it rewrites an Anthropic Messages call of an
// agent with trimming on, and passes everything else through unchanged.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, ok := routeFor(r)
	if !ok {
		writeError(w, "anthropic", http.StatusNotFound, "not_found_error", "smarter-compact: no model API route for "+r.URL.Path)
		return
	}
	base := p.upstream(rt)
	if base == "" {
		writeError(w, rt.family, http.StatusBadGateway, "api_error", "smarter-compact: no upstream configured for "+rt.family)
		return
	}
	dest, err := url.Parse(strings.TrimRight(base, "/") + rt.rest)
	if err != nil {
		writeError(w, rt.family, http.StatusBadGateway, "api_error", "smarter-compact: bad upstream URL for "+rt.family)
		return
	}
	dest.RawQuery = r.URL.RawQuery

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	out := r.Clone(ctx)
	out.URL = dest
	out.Host = dest.Host
	out.RequestURI = ""

	out = out.WithContext(context.WithValue(ctx, routeKey{}, rt))
	f, dry, rewrites := formatOf(rt)
	enabled := p.toggles.Enabled(rt.agent)
	if isUpgrade(r) {
		if enabled && rewrites && f == responsesFormat {
			// Codex's Responses WebSocket sends only the new items of each turn
			// (research/clients.md), so nothing could be trimmed or stored. Refused with
			// 426, Codex falls back to HTTP with the full history; with trimming off the
			// upgrade passes through.
			writeError(w, rt.family, http.StatusUpgradeRequired, "invalid_request_error",
				"smarter-compact: the Responses WebSocket transport is not proxied while trimming is on; use HTTP (Codex: supports_websockets = false)")
			return
		}
		p.rp.ServeHTTP(w, out)
		return
	}
	if r.Method == http.MethodPost && rewrites && enabled {
		p.serveRewrite(w, out, cancel, target{f, rt.family}, dry)
		return
	}
	if err := bufferBody(out); err != nil {
		writeError(w, rt.family, http.StatusBadRequest, "invalid_request_error", "smarter-compact: reading the request body failed: "+err.Error())
		return
	}
	out = out.WithContext(withIdle(out.Context(), cancel, p.cfg().IdleTimeout))
	p.rp.ServeHTTP(w, out)
}

// serveRewrite reads the body, rewrites it (failing open on any fault) and forwards it.
// dry renders without trimming or storing (count_tokens).
func (p *Proxy) serveRewrite(w http.ResponseWriter, out *http.Request, cancel context.CancelFunc, tg target, dry bool) {
	ctx := withIdle(out.Context(), cancel, p.cfg().IdleTimeout)
	held, err := p.holdBody(ctx, out)
	if err != nil {
		out.Body.Close()
		if d, idle := idleFor(ctx); idle { // waited for room in the body budget past the idle timeout
			writeError(w, tg.family, http.StatusGatewayTimeout, "timeout_error", fmt.Sprintf(
				"smarter-compact: busy: this request waited %s (upstream_idle_timeout_s) for other requests' bodies (%d MiB at once) to be answered; retry, or run fewer sessions at once",
				d, bodyBudget>>20))
		}
		// else the request's context ended otherwise. A client that hangs up while its body
		// is unread is not seen here (Go's server watches the connection only once the body
		// is read); its request waits its turn or the idle timeout, and its read then fails.
		return
	}
	defer held.drop()
	ctx = context.WithValue(ctx, heldKey{}, held)
	raw, err := readBody(out)
	if p.bodyRead != nil {
		p.bodyRead(raw)
	}
	if err != nil {
		out.Body.Close()
		writeError(w, tg.family, http.StatusBadRequest, "invalid_request_error", "smarter-compact: reading the request body failed: "+err.Error())
		return
	}
	if len(raw) > maxBody {
		// too large to rewrite: forward what was read and the rest as it comes
		p.failOpen(nil, "body_too_large", errors.New("request body over the rewrite limit"), "proxy/proxy.go")
		streamRest(out, raw)
		p.rp.ServeHTTP(w, out.WithContext(ctx))
		return
	}
	out.Body.Close()
	rt, _ := out.Context().Value(routeKey{}).(route)
	select {
	case p.work <- struct{}{}:
	case <-ctx.Done():
		if isIdle(ctx) { // waited for a slot longer than the idle timeout
			writeError(w, tg.family, http.StatusGatewayTimeout, "timeout_error",
				"smarter-compact: the request waited for a rewrite slot longer than the idle timeout; the service is overloaded")
		}
		return // else the client went away while the request waited for a slot
	}
	res := p.rewriteSafely(tg, rt.agent, out.Header, raw, dry)
	<-p.work
	if res == nil {
		held.setBytes(out, raw, out.Header.Get("Content-Encoding"))
		p.rp.ServeHTTP(w, out.WithContext(ctx))
		return
	}
	if tg.family == "codex" && strings.EqualFold(strings.TrimSpace(out.Header.Get("Content-Encoding")), "zstd") {
		// Codex compresses its bodies for the Codex backend (api-rules §4.4), which
		// accepts them: send the rewritten body the same way. Other bodies go out as
		// identity, which every upstream accepts.
		body := res.body()
		held.setBytes(out, zstdEncoder.EncodeAll(body, make([]byte, 0, len(body)/4)), "zstd")
	} else {
		held.set(out, res.out.len(), res.out.reader, "")
	}
	res.out = nil // the held body has the bytes now; res lives on in the usage tap
	if !dry {
		ctx = context.WithValue(ctx, tapKey{}, res)
	}
	p.rp.ServeHTTP(w, out.WithContext(ctx))
}

// fault is a rewrite error with where it happened, for the fail-open line.
type fault struct {
	kind, loc string
	err       error
}

func (f *fault) Error() string { return f.kind + " at " + f.loc + ": " + f.err.Error() }

func newFault(kind string, err error) *fault { return newFaultAt(2, kind, err) }

// newFaultAt records the location skip frames up (1 is newFaultAt's caller).
func newFaultAt(skip int, kind string, err error) *fault {
	_, file, line, _ := runtime.Caller(skip)
	return &fault{kind: kind, loc: fmt.Sprintf("%s/%s:%d", filepath.Base(filepath.Dir(file)), filepath.Base(file), line), err: err}
}

// rewriteSafely runs the rewrite and turns any error or panic into a fail-open: it logs
// one line (and a fail_open event once the session is known) and returns nil, so the
// original request goes upstream unchanged. agent is the route's (rewriteFor).
func (p *Proxy) rewriteSafely(tg target, agent string, h http.Header, raw []byte, dry bool) (res *rewritten) {
	var sess *session
	defer func() {
		if v := recover(); v != nil {
			loc := "unknown"
			for skip := 2; skip < 12; skip++ {
				_, file, line, ok := runtime.Caller(skip)
				if !ok {
					break
				}
				if strings.Contains(file, "/proxy/") && !strings.HasSuffix(file, "/proxy/proxy.go") {
					loc = fmt.Sprintf("proxy/%s:%d", filepath.Base(file), line)
					break
				}
			}
			p.failOpen(sess, "panic", fmt.Errorf("%v", v), loc)
			res = nil
		}
	}()
	body, err := decodeBody(raw, h.Get("Content-Encoding"))
	if err != nil {
		p.failOpenFault(nil, newFault("decode", err))
		return nil
	}
	res, err = p.rewriteFor(tg, agent, h, body, dry, &sess)
	if errors.Is(err, errPassThrough) {
		return nil
	}
	if err != nil {
		var f *fault
		if !errors.As(err, &f) {
			f = newFault("rewrite", err)
		}
		p.failOpenFault(sess, f)
		return nil
	}
	return res
}

func (p *Proxy) failOpenFault(sess *session, f *fault) { p.failOpen(sess, f.kind, f.err, f.loc) }

// failOpen prints the one fail-open line (contract: Rows, fail-open), counts it in the
// store's health record (which does not depend on the session database) and records a
// fail_open event when the session is known. The error text never carries message
// content: it names a type and a place.
func (p *Proxy) failOpen(sess *session, kind string, err error, loc string) {
	if loc == "" {
		loc = "proxy"
	}
	p.log.Warn(fmt.Sprintf("smarter-compact: fail-open %s at %s", kind, loc), "err", errorClass(err))
	sid := ""
	if sess != nil {
		sid = sess.sid
	}
	p.reportFailOpen(sid, kind, loc, err)
	if sess == nil {
		return
	}
	db, derr := p.root.Session(sess.sid)
	if derr != nil {
		return
	}
	_ = db.AddEvent(store.Event{At: p.now(), Kind: "fail_open", Version: p.version, Location: loc, Error: kind})
}

// errorClass keeps an error's shape but not its data: JSON offsets and types are fine,
// content is never included because our errors are built without it.
func errorClass(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// writeError answers with the error envelope of the route's API family: Anthropic's
// {"type":"error","error":{"type","message"}} (api-rules §1.9) or OpenAI's
// {"error":{"message","type","param","code"}} (api-rules §4.6).
func writeError(w http.ResponseWriter, family string, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var b []byte
	if family == "openai" || family == "codex" {
		b = append(b, `{"error":{"message":`...)
		b = store.AppendJSONString(b, msg)
		b = append(b, `,"type":`...)
		b = store.AppendJSONString(b, typ)
		b = append(b, `,"param":null,"code":null}}`...)
	} else {
		b = append(b, `{"type":"error","error":{"type":`...)
		b = store.AppendJSONString(b, typ)
		b = append(b, `,"message":`...)
		b = store.AppendJSONString(b, msg)
		b = append(b, "}}"...)
	}
	w.Write(b)
}
