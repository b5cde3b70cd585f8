package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"

	"golang.org/x/sync/semaphore"
)

// Request bodies held for a rewrite (DESIGN.md §4, steps 3 and 11; issue 18: memory).
//
// A request the proxy rewrites is read whole before anything else happens to it, and its
// bytes are what goes upstream (segments point into them). Two things bound what that costs:
//
//   - The body budget. A request takes its share of bodyBudget before its body is read, so
//     the requests that wait for a rewrite slot (one per core) wait with their bodies still
//     in the client's socket, not in the heap: at 32 concurrent 120k-token sessions the
//     bodies waiting for a slot were 12 to 19 MB of serve's live heap (cmd/bench's inuse
//     profile), and at 1M tokens they would be 3 MB each.
//   - The drop. Once the upstream has answered (its response headers arrived, or the
//     exchange failed), nothing reads the body again: the transport replays a body through
//     GetBody only while it has no answer. The held body then lets go of its bytes and
//     gives back its share, so a response that streams for minutes holds none of them.
//
// The budget is a weighted semaphore (golang.org/x/sync/semaphore): a request waits its
// turn in order, and one larger than the budget waits for the whole of it. A share is the
// body's Content-Length as sent, so three bodies hold more than their share: one of unknown
// length (chunked) counts unknownBodyWeight whatever its size, one over the budget counts
// the whole budget (up to maxBody), and a gzip or br body is also held decoded, larger.
// The coding agents send a Content-Length and, but for Codex's zstd, no encoding.

// bodyBudget is the bytes of request bodies the proxy holds at once between reading them and
// the upstream's answer: twenty 400 KB bodies (120k tokens) or two of 3 MB (1M tokens). A
// request the budget cannot take waits, as for a rewrite slot, up to the idle timeout
// (web.BodyDeadline's body read timeout starts at the first read, after the wait).
const bodyBudget = 8 << 20

// unknownBodyWeight is the share a body of unknown length takes (chunked; the coding agents
// send a Content-Length): its real size counts only once read, so it may exceed the budget.
const unknownBodyWeight = 1 << 20

// bodyWeight is a body's share of the budget: its length, at least 4 KiB (a request's
// headers and buffers cost something too), at most the whole budget.
func bodyWeight(contentLength int64) int64 {
	switch {
	case contentLength < 0:
		return unknownBodyWeight
	case contentLength > bodyBudget:
		return bodyBudget
	}
	return max(contentLength, 4<<10)
}

// heldBody is one request's body while the proxy holds it: its share of the budget and the
// bytes the upstream is sent (set), until drop.
type heldBody struct {
	budget *semaphore.Weighted
	weight int64

	mu   sync.Mutex
	open func() io.Reader // a fresh reader over the bytes to send; nil once dropped
	held bool             // the share is taken and not yet given back
}

// errBodyDropped is GetBody's error once the upstream has answered: no replay is possible then.
var errBodyDropped = errors.New("the request body was let go after the upstream answered")

// holdBody takes r's share of the body budget, waiting while the budget is spent; ctx
// ending first returns its error and takes nothing.
func (p *Proxy) holdBody(ctx context.Context, r *http.Request) (*heldBody, error) {
	h := &heldBody{budget: p.bodies, weight: bodyWeight(r.ContentLength)}
	if err := h.budget.Acquire(ctx, h.weight); err != nil {
		return nil, err
	}
	h.held = true
	return h, nil
}

// set makes the n bytes open returns r's body, sent with Content-Encoding encoding ("" drops
// the client's header for an identity body), with GetBody for the transport's replay. The
// bytes stay reachable until drop and, for the reader in use, until the transport has read
// or closed it.
func (h *heldBody) set(r *http.Request, n int, open func() io.Reader, encoding string) {
	h.mu.Lock()
	h.open = open
	h.mu.Unlock()
	r.Body = &dropReader{r: open()}
	r.ContentLength = int64(n)
	r.GetBody = h.replay
	r.Header.Set("Content-Length", strconv.Itoa(n))
	if encoding == "" {
		r.Header.Del("Content-Encoding")
	}
}

// setBytes is set for bytes held in one slice, b.
func (h *heldBody) setBytes(r *http.Request, b []byte, encoding string) {
	h.set(r, len(b), func() io.Reader { return bytes.NewReader(b) }, encoding)
}

// replay is the request's GetBody: a fresh reader over the same bytes, until drop.
func (h *heldBody) replay() (io.ReadCloser, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open == nil {
		return nil, errBodyDropped
	}
	return &dropReader{r: h.open()}, nil
}

// drop lets go of the bytes and gives the share back; the reader in use lets go of them
// when the transport has read it to the end or closed it. It is safe to call more than once.
func (h *heldBody) drop() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.open = nil
	held := h.held
	h.held = false
	h.mu.Unlock()
	if held {
		h.budget.Release(h.weight)
	}
}

// dropReader reads a request body and forgets its bytes at io.EOF or Close, so a finished
// request does not keep them reachable for as long as its response lasts.
type dropReader struct {
	mu sync.Mutex
	r  io.Reader // nil after EOF or Close
}

func (d *dropReader) Read(b []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.r == nil {
		return 0, io.EOF
	}
	n, err := d.r.Read(b)
	if err == io.EOF {
		d.r = nil
	}
	return n, err
}

func (d *dropReader) Close() error {
	d.mu.Lock()
	d.r = nil
	d.mu.Unlock()
	return nil
}

// heldKey carries a request's heldBody in its context, for modifyResponse and upstreamError.
type heldKey struct{}

// dropHeld drops the held body of the request whose context is ctx, if it has one.
func dropHeld(ctx context.Context) {
	h, _ := ctx.Value(heldKey{}).(*heldBody)
	h.drop()
}
