package embedding

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/storetest"
)

// fakeVector is a bag-of-words embedding: each lower-cased word adds 1 to one of 16 dims, so
// texts sharing words are near by cosine.
func fakeVector(text string) []float32 {
	v := make([]float32, 16)
	for _, w := range strings.Fields(strings.ToLower(text)) {
		h := fnv.New32a()
		h.Write([]byte(strings.Trim(w, ".,;:!?\"'")))
		v[h.Sum32()%16]++
	}
	v[15] += 0.01 // never the zero vector
	return v
}

// fakeEmbeddings is an OpenAI-compatible /embeddings endpoint. It is a real HTTP server on
// 127.0.0.1, so the tests that use it stay on the real clock: a synctest bubble cannot see
// through a socket, and its clock would stop while a worker waits for an answer. Its
// delay and perRow sleeps are the endpoint's latency, not a wait for something.
type fakeEmbeddings struct {
	srv *httptest.Server

	delay  time.Duration // per call
	perRow time.Duration // per input
	// fail makes the call answer 500 when it returns true.
	fail func(inputs []string) bool

	mu     sync.Mutex
	calls  [][]string
	models []string
	auth   []string
	active atomic.Int32
	peak   atomic.Int32
}

func newFakeEmbeddings(t testing.TB) *fakeEmbeddings {
	f := &fakeEmbeddings{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		n := f.active.Add(1)
		defer f.active.Add(-1)
		for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
		}
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.calls = append(f.calls, req.Input)
		f.models = append(f.models, req.Model)
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		fail, delay, perRow := f.fail, f.delay, f.perRow
		f.mu.Unlock()
		time.Sleep(delay + time.Duration(len(req.Input))*perRow)
		if fail != nil && fail(req.Input) {
			http.Error(w, "model crashed", http.StatusInternalServerError)
			return
		}
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var out struct {
			Data []item `json:"data"`
		}
		for i, in := range req.Input {
			out.Data = append(out.Data, item{"embedding", i, fakeVector(in)})
		}
		slices.Reverse(out.Data) // order comes from index, not position
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// set changes the endpoint's behaviour while it serves.
func (f *fakeEmbeddings) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func (f *fakeEmbeddings) url() string { return f.srv.URL + "/v1" }

// inputs returns the inputs of every call so far, one slice a call, in the order they came.
func (f *fakeEmbeddings) inputs() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// sizes returns how many inputs each call so far had.
func (f *fakeEmbeddings) sizes() []int {
	var s []int
	for _, c := range f.inputs() {
		s = append(s, len(c))
	}
	return s
}

// logBuffer collects log lines safely across goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

func vectorStatus(t testing.TB, r *store.Root, sid, model string) store.VectorStatus {
	t.Helper()
	rd, err := r.OpenReader(sid)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	st, err := rd.Vectors(context.Background(), model)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitFilled polls until no row of the sessions is pending for model (a wait for the
// condition, on the real clock: the workers fill the rows over HTTP to fakeEmbeddings).
func waitFilled(t testing.TB, r *store.Root, model string, timeout time.Duration, sids ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, sid := range sids {
		for {
			st := vectorStatus(t, r, sid, model)
			if st.Pending == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("session %s: still %+v after %v", sid, st, timeout)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func startEmbedder(t testing.TB, e *Embedder) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestEmbedClient(t *testing.T) {
	f := newFakeEmbeddings(t)
	c := NewClient(f.url()+"/", "sekret", nil)
	vecs, err := c.Embed(context.Background(), "m1", []string{"alpha beta", "gamma"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 2 || !slices.Equal(vecs[0], fakeVector("alpha beta")) || !slices.Equal(vecs[1], fakeVector("gamma")) {
		t.Errorf("vectors not in input order: %v", vecs)
	}
	f.set(func() {
		if f.models[0] != "m1" || f.auth[0] != "Bearer sekret" {
			t.Errorf("model %q auth %q", f.models[0], f.auth[0])
		}
		f.fail = func([]string) bool { return true }
	})
	_, err = c.Embed(context.Background(), "m1", []string{"x"})
	if typ, loc := errorType(err); typ != "http_500" || !strings.HasPrefix(loc, "store/embedding/client.go:") {
		t.Errorf("error type %q at %q (%v)", typ, loc, err)
	}
	f.set(func() { f.fail, f.delay = nil, 200*time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err = c.Embed(ctx, "m1", []string{"x"}); err == nil {
		t.Fatal("no timeout")
	} else if typ, _ := errorType(err); typ != "timeout" {
		t.Errorf("timeout reported as %q (%v)", typ, err)
	}
	f.set(func() { f.delay = 0 })
	if _, err := NewClient("http://127.0.0.1:1/v1", "", nil).Embed(context.Background(), "m", []string{"x"}); err == nil {
		t.Error("closed port: no error")
	} else if typ, _ := errorType(err); typ != "connect" {
		t.Errorf("closed port reported as %q", typ)
	}
}

func TestEmbedderOrderTruncationAndBatches(t *testing.T) {
	r := storetest.OpenRoot(t)
	var rows []storetest.Row
	for i := 1; i <= 40; i++ {
		rows = append(rows, storetest.Row{Thread: "a", Role: "user", Text: fmt.Sprintf("row %d ééééé", i), Trimmed: i <= 5})
	}
	rows = append(rows, storetest.Row{Thread: "a", Role: "user", Text: "   "}) // 41, blank
	storetest.SyncRows(t, r, "s", time.Now(), rows)
	f := newFakeEmbeddings(t)
	var logs logBuffer
	e := NewEmbedder(r, Config{Model: "m", URL: f.url(), MaxChars: 8, Timeout: time.Second}, logs.logger())
	e.runSession(context.Background(), "s")

	if st := vectorStatus(t, r, "s", "m"); st != (store.VectorStatus{Model: "m", Filled: 40}) {
		t.Fatalf("after one run: %+v", st)
	}
	// Trimmed rows first (5..1 newest first), then the rest newest first; 8 code points each.
	first := f.inputs()[0]
	if want := []string{"row 5 éé", "row 4 éé", "row 3 éé", "row 2 éé"}; !slices.Equal(first, want) {
		t.Errorf("first batch %q, want %q", first, want)
	}
	for _, in := range first {
		if utf8.RuneCountInString(in) != 8 {
			t.Errorf("input %q is not 8 code points", in)
		}
	}
	// 4, then one probe of 8 per run, then 8 until the rest.
	if got := f.sizes(); !slices.Equal(got, []int{4, 8, 8, 8, 8, 4}) {
		t.Errorf("batch sizes %v", got)
	}
	if !strings.Contains(logs.String(), "smarter-compact: embedded rows=4 seconds=") || !strings.Contains(logs.String(), "batch=8") {
		t.Errorf("log:\n%s", logs.String())
	}
	// The size persists: the next run starts at 8 and probes 16.
	var more []storetest.Row
	for i := range 30 {
		more = append(more, storetest.Row{Thread: "b", Role: "tool", Text: fmt.Sprintf("more %d", i)})
	}
	storetest.SyncRows(t, r, "s", time.Now(), more)
	f.set(func() { f.calls = nil })
	e.runSession(context.Background(), "s")
	if got := f.sizes(); !slices.Equal(got, []int{8, 16, 6}) {
		t.Errorf("second run batch sizes %v", got)
	}
}

func TestEmbedderFailingRowIsSkippedAfterThreeRuns(t *testing.T) {
	r := storetest.OpenRoot(t)
	var rows []storetest.Row
	for i := 1; i <= 6; i++ {
		text := fmt.Sprintf("fine %d", i)
		if i == 3 {
			text = "POISON row"
		}
		rows = append(rows, storetest.Row{Thread: "a", Role: "user", Text: text})
	}
	storetest.SyncRows(t, r, "s", time.Now(), rows)
	f := newFakeEmbeddings(t)
	f.fail = func(in []string) bool {
		return slices.ContainsFunc(in, func(s string) bool { return strings.Contains(s, "POISON") })
	}
	var logs logBuffer
	e := NewEmbedder(r, Config{Model: "m", URL: f.url(), Timeout: time.Second}, logs.logger())

	e.runSession(context.Background(), "s")
	// 6,5,4,3 in the first call fails (4 rows), halves to 2: [6 5] ok, [4 3] fails → 1:
	// [4] ok, [3] fails alone and is set aside, [2] [1] ok; the halved size caps the run.
	if got := f.sizes(); !slices.Equal(got, []int{4, 2, 2, 1, 1, 1, 1}) {
		t.Errorf("batch sizes %v", got)
	}
	if st := vectorStatus(t, r, "s", "m"); st != (store.VectorStatus{Model: "m", Filled: 5, Pending: 1}) {
		t.Fatalf("after run 1: %+v", st)
	}
	if !strings.Contains(logs.String(), "smarter-compact: embedding batch failed http_500 rows=4 seconds=") {
		t.Errorf("log:\n%s", logs.String())
	}
	// A new row arrives: it goes before the row that failed.
	storetest.SyncRows(t, r, "s", time.Now(), append(rows, storetest.Row{Thread: "a", Role: "user", Text: "fine 7"}))
	f.set(func() { f.calls = nil })
	e.runSession(context.Background(), "s")
	calls := f.inputs()
	if len(calls) != 2 || calls[0][0] != "fine 7" || calls[1][0] != "POISON row" {
		t.Errorf("run 2 calls %q: new rows first, then the failed one", calls)
	}
	// Run 3 fails it alone with no other row to succeed: not counted (the endpoint did not
	// work for others in that run). Run 4 with a new row counts the third failure.
	e.runSession(context.Background(), "s")
	if strings.Contains(logs.String(), "embedding skipped") {
		t.Fatal("skipped in a run where nothing succeeded")
	}
	storetest.SyncRows(t, r, "s", time.Now(), append(rows, storetest.Row{Thread: "a", Role: "user", Text: "fine 7"}, storetest.Row{Thread: "a", Role: "user", Text: "fine 8"}))
	e.runSession(context.Background(), "s")
	if !strings.Contains(logs.String(), "smarter-compact: embedding skipped seq=3 after 3 failures") {
		t.Errorf("log:\n%s", logs.String())
	}
	if st := vectorStatus(t, r, "s", "m"); st != (store.VectorStatus{Model: "m", Filled: 7, Skipped: 1}) {
		t.Errorf("after run 4: %+v", st)
	}
}

func TestEmbedderEndpointDown(t *testing.T) {
	r := storetest.OpenRoot(t)
	var rows []storetest.Row
	for i := 1; i <= 10; i++ {
		rows = append(rows, storetest.Row{Thread: "a", Role: "user", Text: fmt.Sprintf("row %d", i)})
	}
	storetest.SyncRows(t, r, "s", time.Now(), rows)
	f := newFakeEmbeddings(t)
	f.fail = func([]string) bool { return true }
	var logs logBuffer
	e := NewEmbedder(r, Config{Model: "m", URL: f.url(), Timeout: time.Second}, logs.logger())
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e.now = func() time.Time { return now }
	e.runSession(context.Background(), "s")
	if got := f.sizes(); !slices.Equal(got, []int{4, 2, 1, 1, 1}) {
		t.Errorf("batch sizes %v", got)
	}
	if !strings.Contains(logs.String(), "smarter-compact: embedding failed http_500 at store/embedding/client.go:") {
		t.Errorf("log:\n%s", logs.String())
	}
	e.mu.Lock()
	wait, queued := e.waitTill["s"], e.queued["s"]
	e.mu.Unlock()
	if !wait.Equal(now.Add(time.Minute)) || !queued {
		t.Errorf("wait until %v queued %v", wait, queued)
	}
	// While it waits, a notification does not run it.
	e.Notify("s")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if sid, ok := e.next(ctx); ok {
		t.Errorf("next gave %q during the wait", sid)
	}
	now = now.Add(time.Minute)
	if sid, ok := e.next(context.Background()); !ok || sid != "s" {
		t.Errorf("after the wait: %q %v", sid, ok)
	}
	if strings.Contains(logs.String(), "embedding skipped") {
		t.Error("rows skipped while the endpoint was down")
	}
}

// TestEmbedderKeepsUpWithEightSessions: the seed's single-thread embedder fell behind with 4
// concurrent sessions. Eight sessions keep writing while the embedder runs against an
// endpoint with latency; with 4 workers every session is filled and the endpoint sees
// concurrent calls.
func TestEmbedderKeepsUpWithEightSessions(t *testing.T) {
	elapsed := func(workers int) (time.Duration, int32) {
		r := storetest.OpenRoot(t)
		f := newFakeEmbeddings(t)
		f.delay, f.perRow = 15*time.Millisecond, 500*time.Microsecond
		e := NewEmbedder(r, Config{Model: "m", URL: f.url(), Timeout: time.Second, Workers: workers}, nil)
		startEmbedder(t, e)
		const sessions, requests, rowsPerRequest = 8, 10, 12
		sids := make([]string, sessions)
		start := time.Now()
		var wg sync.WaitGroup
		for s := range sessions {
			sids[s] = fmt.Sprintf("s%d", s)
			wg.Go(func() {
				var rows []storetest.Row
				for q := range requests {
					for k := range rowsPerRequest {
						rows = append(rows, storetest.Row{Thread: "a", Role: "tool", Text: fmt.Sprintf("session %d request %d row %d output", s, q, k)})
					}
					storetest.SyncRows(t, r, sids[s], time.Now(), rows)
					e.Notify(sids[s])
					time.Sleep(5 * time.Millisecond) // the time between an agent's requests
				}
			})
		}
		wg.Wait()
		waitFilled(t, r, "m", 20*time.Second, sids...)
		d := time.Since(start)
		t.Logf("workers=%d: %d rows in %d sessions filled in %v (%.0f rows/s), peak concurrent calls %d",
			workers, sessions*requests*rowsPerRequest, sessions, d.Round(time.Millisecond),
			float64(sessions*requests*rowsPerRequest)/d.Seconds(), f.peak.Load())
		return d, f.peak.Load()
	}
	one, _ := elapsed(1)
	four, peak := elapsed(4)
	if peak < 2 {
		t.Errorf("4 workers never called the endpoint concurrently (peak %d)", peak)
	}
	if four >= one {
		t.Errorf("4 workers took %v, 1 worker %v", four, one)
	}
}
