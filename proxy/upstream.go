package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// upstreamError answers when the upstream cannot be reached or stops answering: a 502
// (504 on a timeout) with an Anthropic-shaped error, never a 200 with an empty body.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	dropHeld(r.Context())
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil && !isIdle(r.Context()) {
		return // the client went away
	}
	status, typ := http.StatusBadGateway, "api_error"
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || isIdle(r.Context()) {
		status, typ = http.StatusGatewayTimeout, "timeout_error"
	}
	if d, idle := idleFor(r.Context()); idle {
		// the idle timer cancelled the request: say which limit, not "context canceled"
		err = fmt.Errorf("no bytes from the upstream for %s (upstream_idle_timeout_s in config.toml, or CONTEXT_PROXY_UPSTREAM_IDLE_TIMEOUT_S)", d)
	}
	p.log.Warn("smarter-compact: upstream request failed", "host", r.URL.Host, "err", err.Error())
	p.upstreamFailure(r, err, status == http.StatusGatewayTimeout)
	rt, _ := r.Context().Value(routeKey{}).(route)
	msg := fmt.Sprintf("smarter-compact: upstream %s failed: %v", r.URL.Host, err)
	if rt.agentKnown && p.cfg().AgentUpstreams[rt.agent][rt.family] != "" {
		msg += fmt.Sprintf(" (the %s upstream of %s is [upstream.agents.%s] %s in config.toml)", rt.family, rt.agent, rt.agent, rt.family)
	} else if rt.family != "" {
		msg += fmt.Sprintf(" (the %s upstream is [upstream] %s in config.toml or SMARTER_COMPACT_UPSTREAM_%s)",
			rt.family, rt.family, strings.ToUpper(rt.family))
	}
	writeError(w, rt.family, status, typ, msg)
}

// idle timeout: the upstream must make progress at least every IdleTimeout, both before
// the response headers and between body reads.
type idleKey struct{}

type idleState struct {
	timer *time.Timer
	fired chan struct{}
	d     time.Duration
}

func withIdle(ctx context.Context, cancel context.CancelFunc, d time.Duration) context.Context {
	st := &idleState{fired: make(chan struct{}), d: d}
	st.timer = time.AfterFunc(d, func() { close(st.fired); cancel() })
	return context.WithValue(ctx, idleKey{}, st)
}

// idleFor reports whether the request's idle timer fired, and its limit.
func idleFor(ctx context.Context) (time.Duration, bool) {
	if !isIdle(ctx) {
		return 0, false
	}
	return ctx.Value(idleKey{}).(*idleState).d, true
}

func isIdle(ctx context.Context) bool {
	st, _ := ctx.Value(idleKey{}).(*idleState)
	if st == nil {
		return false
	}
	select {
	case <-st.fired:
		return true
	default:
		return false
	}
}

func (p *Proxy) modifyResponse(resp *http.Response) error {
	ctx := resp.Request.Context()
	dropHeld(ctx) // answered: the transport replays the body no more
	st, _ := ctx.Value(idleKey{}).(*idleState)
	var body io.ReadCloser = resp.Body
	if st != nil {
		st.timer.Reset(st.d)
		body = &idleReader{ReadCloser: body, st: st, stalled: func() { p.idleFailure(ctx, resp.Request) }}
	}
	body = p.upstreamAnswered(resp, body)
	if res, ok := ctx.Value(tapKey{}).(*rewritten); ok && resp.StatusCode == http.StatusOK {
		var replied func(*replyAsm)
		if !p.noReplyRows {
			replied = func(a *replyAsm) { p.storeReply(res, a) }
		}
		body = newUsageTap(body, res.format, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Encoding"),
			func(u usage) { p.recordUsage(res, u) }, replied)
	}
	resp.Body = body
	return nil
}

type idleReader struct {
	io.ReadCloser
	st      *idleState
	stalled func() // once, when a read fails after the idle timeout fired (the health record)
	once    sync.Once
}

func (r *idleReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	r.st.timer.Reset(r.st.d)
	if err != nil && err != io.EOF && r.stalled != nil {
		r.once.Do(r.stalled)
	}
	return n, err
}

func (r *idleReader) Close() error {
	r.st.timer.Stop()
	return r.ReadCloser.Close()
}
