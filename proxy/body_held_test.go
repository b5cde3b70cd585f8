package proxy

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"weak"
)

// roundTripFunc is an http.RoundTripper made of a function: the tests' upstream, without a
// socket, so a synctest bubble can see every goroutine of the exchange.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// okResponse is a small 200 answer to r with body as its body.
func okResponse(r *http.Request, body io.ReadCloser) *http.Response {
	return &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: body, Request: r, ContentLength: -1}
}

// Requests whose bodies would hold more than the body budget wait before their bodies are
// read, and go on, whole and in full, as earlier ones are answered.
func TestBodyBudgetBoundsTheBodiesHeld(t *testing.T) {
	root := openRoot(t)
	const size = 2 << 20 // four of them fill the 8 MiB budget
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		s.Upstreams = map[string]string{"anthropic": "http://upstream.test"}
		p := New(s, allOn{}, root, slog.New(slog.DiscardHandler))
		var read, arrived atomic.Int64
		p.bodyRead = func([]byte) { read.Add(1) }
		answer := make(chan struct{})
		var mu sync.Mutex
		var got [][]byte
		p.rp.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
			b, err := io.ReadAll(r.Body)
			r.Body.Close()
			if err != nil {
				return nil, err
			}
			mu.Lock()
			got = append(got, b)
			mu.Unlock()
			arrived.Add(1)
			<-answer
			return okResponse(r, io.NopCloser(strings.NewReader(`{}`))), nil
		})
		// not JSON: the rewrite fails open and the body goes upstream as it came, and no
		// session (so no store write) is involved
		bodies := make([][]byte, 6)
		codes := make([]int, len(bodies))
		var wg sync.WaitGroup
		for i := range bodies {
			bodies[i] = bytes.Repeat([]byte{byte('a' + i)}, size)
			wg.Go(func() {
				req := httptest.NewRequest("POST", "/claude-code/v1/messages", bytes.NewReader(bodies[i]))
				w := httptest.NewRecorder()
				p.ServeHTTP(w, req)
				codes[i] = w.Code
			})
		}
		synctest.Wait()
		if n, m := read.Load(), arrived.Load(); n != bodyBudget/size || m != n {
			t.Fatalf("with the budget spent: %d bodies read and %d at the upstream, want %d of each", n, m, bodyBudget/size)
		}
		close(answer)
		wg.Wait()
		if n := arrived.Load(); n != int64(len(bodies)) {
			t.Fatalf("%d requests reached the upstream, want %d", n, len(bodies))
		}
		for i, c := range codes {
			if c != http.StatusOK {
				t.Errorf("request %d: status %d, want 200", i, c)
			}
		}
		for _, b := range got {
			if !slices.ContainsFunc(bodies, func(x []byte) bool { return bytes.Equal(x, b) }) {
				t.Errorf("the upstream got a body of %d bytes that no request sent", len(b))
			}
		}
	})
}

// A request that waits for room in the body budget longer than the idle timeout gets a 504
// in the route's envelope, and its body is never read.
func TestBodyBudgetWaitPastIdleTimeoutAnswers504(t *testing.T) {
	root := openRoot(t)
	synctest.Test(t, func(t *testing.T) {
		s := DefaultSettings()
		s.Upstreams = map[string]string{"anthropic": "http://upstream.test"}
		s.IdleTimeout = 200 * time.Millisecond
		p := New(s, allOn{}, root, slog.New(slog.DiscardHandler))
		var read atomic.Int64
		p.bodyRead = func([]byte) { read.Add(1) }
		if !p.bodies.TryAcquire(bodyBudget) { // the budget spent for a second
			t.Fatal("a new proxy's body budget is taken")
		}
		go func() {
			time.Sleep(time.Second)
			p.bodies.Release(bodyBudget)
		}()
		req := httptest.NewRequest("POST", "/claude-code/v1/messages",
			strings.NewReader(`{"model":"claude-opus-5-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
		w := httptest.NewRecorder()
		p.ServeHTTP(w, req)
		if w.Code != http.StatusGatewayTimeout || !strings.Contains(w.Body.String(), `"timeout_error"`) ||
			!strings.Contains(w.Body.String(), "upstream_idle_timeout_s") || !strings.Contains(w.Body.String(), "bodies (8 MiB at once)") {
			t.Fatalf("got %d %q, want a 504 timeout_error about the body budget", w.Code, w.Body.String())
		}
		if n := read.Load(); n != 0 {
			t.Fatalf("%d bodies read, want none: the request never had room", n)
		}
		time.Sleep(2 * time.Second) // the bubble ends with the goroutine that gave the budget back
	})
}

// firstWrite is a ResponseWriter that says when the proxy has sent the client the first
// bytes of the answer.
type firstWrite struct {
	*httptest.ResponseRecorder
	once    sync.Once
	started chan struct{}
}

func (f *firstWrite) Write(b []byte) (int, error) {
	n, err := f.ResponseRecorder.Write(b)
	f.once.Do(func() { close(f.started) })
	return n, err
}

func (f *firstWrite) Flush() { f.ResponseRecorder.Flush() }

// Once the upstream has answered, a rewritten request's body is unreachable while the answer
// still streams (a model's answer can take minutes; a session's body can be megabytes), and
// its share of the budget is back.
func TestBodyLetGoOnceTheUpstreamAnswered(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
	}{
		{"rewritten", `{"model":"claude-opus-5-5","max_tokens":10,"messages":[{"role":"user","content":"` +
			strings.Repeat("a long first turn ", 20000) + `"}]}`},
		{"failed open", strings.Repeat("not json ", 40000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := openRoot(t)
			s := DefaultSettings()
			s.Upstreams = map[string]string{"anthropic": "http://upstream.test"}
			p := New(s, allOn{}, root, slog.New(slog.DiscardHandler))
			var held weak.Pointer[byte]
			p.bodyRead = func(b []byte) { held = weak.Make(&b[0]) }
			pr, pw := io.Pipe()
			p.rp.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
				_, err := io.Copy(io.Discard, r.Body)
				r.Body.Close()
				if err != nil {
					return nil, err
				}
				return okResponse(r, pr), nil
			})
			req := httptest.NewRequest("POST", "/claude-code/v1/messages", strings.NewReader(tc.body))
			req.Header.Set("X-Claude-Code-Session-Id", "let-go-"+strings.ReplaceAll(tc.name, " ", "-"))
			w := &firstWrite{ResponseRecorder: httptest.NewRecorder(), started: make(chan struct{})}
			done := make(chan struct{})
			go func() {
				defer close(done)
				p.ServeHTTP(w, req)
			}()
			go io.WriteString(pw, `{"id":"msg_1",`) // the answer starts, and then stalls
			<-w.started
			runtime.GC()
			runtime.GC()
			gone := held.Value() == nil
			room := p.bodies.TryAcquire(bodyBudget)
			if room {
				p.bodies.Release(bodyBudget)
			}
			io.WriteString(pw, `"type":"message"}`)
			pw.Close()
			<-done
			if w.Code != http.StatusOK {
				t.Fatalf("status %d, want 200", w.Code)
			}
			if !gone {
				t.Error("the request body is still reachable while the answer streams")
			}
			if !room {
				t.Error("the body's share of the budget is not back while the answer streams")
			}
			p.root.SettleAll()
		})
	}
}

// bodyWeight takes a body's length, within its floor and the budget, and a fixed share for
// a body of unknown length.
func TestBodyWeight(t *testing.T) {
	for _, tc := range []struct{ cl, want int64 }{
		{-1, unknownBodyWeight}, {0, 4 << 10}, {100, 4 << 10}, {400_000, 400_000},
		{bodyBudget, bodyBudget}, {bodyBudget + 1, bodyBudget}, {64 << 20, bodyBudget},
	} {
		if got := bodyWeight(tc.cl); got != tc.want {
			t.Errorf("bodyWeight(%d) = %d, want %d", tc.cl, got, tc.want)
		}
	}
}

// Until the upstream answers, the transport can read the body again through GetBody (a retry
// on a fresh connection): the same bytes, however often; once answered, GetBody says so.
func TestBodyReplaysUntilTheUpstreamAnswered(t *testing.T) {
	root := openRoot(t)
	s := DefaultSettings()
	s.Upstreams = map[string]string{"anthropic": "http://upstream.test"}
	p := New(s, allOn{}, root, slog.New(slog.DiscardHandler))
	body := `{"model":"claude-opus-5-5","max_tokens":10,"messages":[{"role":"user","content":"` +
		strings.Repeat("replay me ", 5000) + `"}]}`
	var first, replayed []byte
	var replayErr error
	var getBody func() (io.ReadCloser, error)
	p.rp.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		var err error
		if first, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		r.Body.Close()
		for range 2 { // as a retry would, twice
			rc, err := r.GetBody()
			if err != nil {
				replayErr = err
				break
			}
			replayed, _ = io.ReadAll(rc)
			rc.Close()
			if !bytes.Equal(replayed, first) {
				break
			}
		}
		getBody = r.GetBody
		return okResponse(r, io.NopCloser(strings.NewReader(`{}`))), nil
	})
	req := httptest.NewRequest("POST", "/claude-code/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Claude-Code-Session-Id", "replay")
	w := httptest.NewRecorder()
	p.ServeHTTP(w, req)
	p.root.SettleAll()
	if w.Code != http.StatusOK {
		t.Fatalf("status %d, want 200", w.Code)
	}
	if replayErr != nil || len(first) == 0 || !bytes.Equal(replayed, first) {
		t.Fatalf("replay before the answer: err %v, %d bytes then %d, want the same bytes again", replayErr, len(first), len(replayed))
	}
	if _, err := getBody(); err != errBodyDropped {
		t.Fatalf("GetBody after the answer: %v, want errBodyDropped", err)
	}
}
