//go:build e2e

package e2e_test

// The concurrency test: the real serve command, in process, with 8 simulated Claude Code
// sessions writing through the proxy and 8 MCP clients reading the same context store at the
// same time, for a minute as the recall issue asks. It runs in `make e2e` (build tag e2e),
// not in `make test`: 60 s, or 10 s with -short; SMARTER_COMPACT_CONCURRENCY_SECONDS
// overrides both (at most 600).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/smarter-compact/smarter-compact/app"
	"github.com/smarter-compact/smarter-compact/mcp"
	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

const (
	concWriters = 8
	concReaders = 8
	// concOutputLines is the length of each tool output; with concTrimAt the sessions trim
	// every few turns.
	concOutputLines = 25
	concTrimAt      = 6000
	// concWALLimit bounds each session's -wal file.
	concWALLimit = 64 << 20
	// concVisible is how long a row acknowledged to the writer may take to show in a search.
	concVisible = 5 * time.Second
)

// concDuration is how long the writers and readers run.
func concDuration(t *testing.T) time.Duration {
	if s := os.Getenv("SMARTER_COMPACT_CONCURRENCY_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 600 {
			t.Fatalf("SMARTER_COMPACT_CONCURRENCY_SECONDS=%q: want 1-600", s)
		}
		return time.Duration(n) * time.Second
	}
	if testing.Short() {
		t.Log("-short: running the load for 10 s instead of 60 s")
		return 10 * time.Second
	}
	return 60 * time.Second
}

// TestConcurrencyServeUnderLoad runs app.Main("serve") over a fresh context store with the
// Anthropic upstream at the strict fake, then for concDuration: 8 sessions each run an agent
// loop (a user turn, a tool call, its output, the model's reply) through the proxy with a low
// trim threshold, while 8 MCP clients (4 on serve's /mcp, 4 on a second mcp.Server over its
// own store.Root on the same directory, as `smarter-compact mcp` would) search and query the
// rows the writers had acknowledged. No tool call may fail (in particular not with "locked"
// or "busy"), no proxy request may fail or fail open, every acknowledged row must show in a
// search within concVisible, and no -wal file may pass concWALLimit.
//
// serve logs to os.Stderr, so the test points os.Stderr at a file while serve runs; it must
// not run in parallel (t.Setenv sees to that).
func TestConcurrencyServeUnderLoad(t *testing.T) {
	dur := concDuration(t)
	base := t.TempDir()
	state := filepath.Join(base, "state")
	config := filepath.Join(base, "config.toml")
	if err := os.WriteFile(config, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fake := fakeupstream.Start(t, fakeupstream.Options{Reply: concReply, APIKey: "dummy-key"})
	t.Setenv("HOME", filepath.Join(base, "home"))
	t.Setenv("SMARTER_COMPACT_CONFIG", config)
	t.Setenv("SMARTER_COMPACT_STATE_DIR", state)
	t.Setenv("SMARTER_COMPACT_UPSTREAM_ANTHROPIC", fake.URL)
	t.Setenv("CONTEXT_TRIM_AT_TOKENS", strconv.Itoa(concTrimAt))

	srv := startServeInProcess(t, base)
	defer srv.stop(t) // also when the test fails early: puts os.Stderr back

	// The second reader process: its own Root on the same directory.
	root := store.Dir(os.Getenv, "", runtime.GOOS, "")
	other, err := store.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ts := httptest.NewServer(mcp.New(other, mcp.Options{Workspace: base, Version: "test"}).Handler())
	defer ts.Close()

	sessions := make([]*concSession, concWriters)
	for i := range sessions {
		model := "claude-opus-5-5"
		if i%2 == 1 {
			model = "claude-mythos-5-1"
		}
		sessions[i] = &concSession{n: i, sid: fmt.Sprintf("conc-%d", i), model: model,
			url: srv.base + "/claude-code/v1/messages?beta=true", http: &http.Client{Timeout: 60 * time.Second}}
	}
	var clients []*client.Client
	closeClients := sync.OnceFunc(func() {
		for _, c := range clients {
			_ = c.Close()
		}
	})
	defer closeClients() // before serve stops: its shutdown waits for open streams
	for i := range concReaders {
		url := srv.base + "/mcp"
		if i%2 == 1 {
			url = ts.URL + "/mcp"
		}
		clients = append(clients, concMCPClient(t, url))
	}

	var st concStats
	walStop := make(chan struct{})
	walDone := make(chan map[string]int64)
	go func() { walDone <- watchWAL(filepath.Join(root, "sessions"), walStop) }()

	ctx, stopLoad := context.WithTimeout(t.Context(), dur)
	defer stopLoad()
	var wg sync.WaitGroup
	start := time.Now()
	for _, s := range sessions {
		wg.Go(func() { s.run(ctx, &st) })
	}
	for i, c := range clients {
		wg.Go(func() { concRead(ctx, i, c, sessions, &st) })
	}
	wg.Wait()
	took := time.Since(start)
	close(walStop)
	walMax := <-walDone

	// After the load: every session's acknowledged turns are all stored, once each; it
	// trimmed; it recorded no fail_open event.
	totalTurns, totalTrims := 0, 0
	for _, s := range sessions {
		turns := int(s.acked.Load())
		totalTurns += turns
		if turns == 0 {
			t.Errorf("session %s: no turn completed", s.sid)
			continue
		}
		row := concSQL(t, clients[0], s.sid, `SELECT
			(SELECT count(*) FROM messages WHERE role = 'tool' AND kind = 'tool_result' AND text LIKE 'CONC-OUT s=`+strconv.Itoa(s.n)+` %'),
			(SELECT count(*) FROM events WHERE kind = 'trim'),
			(SELECT count(*) FROM events WHERE kind = 'fail_open'),
			(SELECT count(*) FROM messages WHERE in_context = 0)`)
		outputs, trims, failOpen, out := row[0], row[1], row[2], row[3]
		totalTrims += trims
		if outputs != turns {
			t.Errorf("session %s: %d tool outputs stored, %d turns acknowledged", s.sid, outputs, turns)
		}
		if trims == 0 || out == 0 {
			t.Errorf("session %s: %d trim events, %d trimmed rows over %d turns: the load should trim", s.sid, trims, out, turns)
		}
		if failOpen != 0 {
			t.Errorf("session %s: %d fail_open events", s.sid, failOpen)
		}
	}

	closeClients()
	stopAt := time.Now()
	logs, err := srv.stop(t)
	stopTook := time.Since(stopAt)
	if err != nil {
		t.Errorf("serve returned %v", err)
	}
	// The capture works: serve's start line, and one trim line per trim event.
	if !strings.Contains(logs, "smarter-compact serving") || strings.Count(logs, "msg=trim ") != totalTrims {
		t.Errorf("serve's log has %d trim lines for %d trim events, or no start line: is it captured?\n%.2000s",
			strings.Count(logs, "msg=trim "), totalTrims, logs)
	}
	for _, line := range strings.Split(logs, "\n") {
		low := strings.ToLower(line)
		switch {
		case strings.Contains(low, "fail-open"), strings.Contains(low, "upstream request failed"),
			strings.Contains(low, "locked"), strings.Contains(low, "busy"), strings.Contains(line, "level=ERROR"):
			t.Errorf("serve logged: %s", line)
		case strings.Contains(line, "level=WARN"):
			t.Logf("serve warned: %s", line)
		}
	}
	if rej := fake.Rejections(); len(rej) > 0 {
		t.Errorf("the fake upstream rejected %d requests; first: %d %s", len(rej), rej[0].Status, rej[0].Error)
	}

	st.mu.Lock()
	defer st.mu.Unlock()
	for _, e := range st.errs {
		t.Error(e)
	}
	if n := len(st.errs); n > 0 {
		t.Errorf("%d errors in all (the first %d shown)", st.errCount, n)
	}
	var walNames []string
	var walTop int64
	for name, size := range walMax {
		walNames = append(walNames, fmt.Sprintf("%s %.1f MB", name, float64(size)/(1<<20)))
		walTop = max(walTop, size)
		if size > concWALLimit {
			t.Errorf("%s reached %d bytes, over the %d MB bound", name, size, concWALLimit>>20)
		}
	}
	slices.Sort(walNames)
	if len(walMax) != concWriters {
		t.Errorf("saw %d -wal files, want %d: %v", len(walMax), concWriters, walNames)
	}
	if st.searches == 0 || st.sqls == 0 {
		t.Errorf("the readers made %d searches and %d sql calls: they tested nothing", st.searches, st.sqls)
	}
	t.Logf("load ran %.1f s: %d writers, %d readers; serve shut down in %s", took.Seconds(), concWriters, concReaders, stopTook.Round(time.Millisecond))
	q := len(st.reqLat) / 4
	t.Logf("proxy: %d requests (%d turns, %d trim events), latency %s; first quarter of the requests %s, last quarter %s",
		st.requests, totalTurns, totalTrims, summarize(st.reqLat), summarize(st.reqLat[:q]), summarize(st.reqLat[len(st.reqLat)-q:]))
	t.Logf("smart_compact_search: %d calls, latency %s", st.searches, summarize(st.searchLat))
	t.Logf("smart_compact_sql: %d calls, latency %s", st.sqls, summarize(st.sqlLat))
	t.Logf("%d reads from the second process found an acknowledged turn only on a retry (max wait %s)",
		st.late, st.maxLate.Round(time.Millisecond))
	t.Logf("-wal max size %.2f MB (bound %d MB); per session: %s", float64(walTop)/(1<<20), concWALLimit>>20, strings.Join(walNames, ", "))
}

// concStats collects what the goroutines saw.
type concStats struct {
	mu                sync.Mutex
	requests          int
	searches, sqls    int
	late              int
	maxLate           time.Duration
	reqLat            []time.Duration
	searchLat, sqlLat []time.Duration
	errs              []string // the first 20
	errCount          int
}

func (st *concStats) fail(format string, args ...any) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.errCount++
	if len(st.errs) < 20 {
		st.errs = append(st.errs, fmt.Sprintf(format, args...))
	}
}

// lateRead counts a read that saw its rows only on a retry, first tried at first.
func (st *concStats) lateRead(first time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.late++
	st.maxLate = max(st.maxLate, time.Since(first))
}

// summarize gives p50, p99 and max of ds.
func summarize(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n/a"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	r := func(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }
	return fmt.Sprintf("p50 %s, p99 %s, max %s", r(q(0.50)), r(q(0.99)), r(s[len(s)-1]))
}

// serveInProcess is app.Main("serve") running in a goroutine with its log in a file.
type serveInProcess struct {
	base    string // http://127.0.0.1:port
	cancel  context.CancelFunc
	done    chan error
	logFile *os.File
	stderr  *os.File
	slogDef *slog.Logger
	stopped bool
	logs    string
	err     error // Main's
}

// startServeInProcess starts serve on a free port (retrying when another process takes the
// port first) and waits for /healthz.
func startServeInProcess(t *testing.T, dir string) *serveInProcess {
	t.Helper()
	for attempt := range 3 {
		lf, err := os.Create(filepath.Join(dir, fmt.Sprintf("serve-%d.log", attempt)))
		if err != nil {
			t.Fatal(err)
		}
		port := freePort(t)
		t.Setenv("CONTEXT_PROXY_PORT", strconv.Itoa(port))
		ctx, cancel := context.WithCancel(context.Background())
		s := &serveInProcess{base: "http://127.0.0.1:" + strconv.Itoa(port), cancel: cancel, done: make(chan error, 1),
			logFile: lf, stderr: os.Stderr, slogDef: slog.Default()}
		os.Stderr = lf // app.Main logs to os.Stderr; restored in stop, after Main returned
		go func() { s.done <- app.Main(ctx, []string{"serve", "--no-tray"}) }()
		err = s.waitHealthy()
		if err == nil {
			return s
		}
		logs, mainErr := s.stop(t)
		if mainErr == nil || !strings.Contains(mainErr.Error(), "in use") {
			t.Fatalf("serve did not start: %v (Main: %v)\n%s", err, mainErr, logs)
		}
	}
	t.Fatal("serve did not start: its port was taken three times")
	return nil
}

func (s *serveInProcess) waitHealthy() error {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			s.done <- err // for stop
			return fmt.Errorf("serve returned early: %v", err)
		default:
		}
		resp, err := http.Get(s.base + "/healthz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && string(b) == "ok" {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("serve did not answer /healthz within 15 s")
}

// stop cancels serve, waits for Main to return, puts os.Stderr and the default loggers back
// and returns serve's log and Main's error. It runs once; later calls return the same.
func (s *serveInProcess) stop(t *testing.T) (string, error) {
	t.Helper()
	if s.stopped {
		return s.logs, s.err
	}
	s.stopped = true
	s.cancel()
	select {
	case s.err = <-s.done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return within 30 s of cancel") // os.Stderr stays on the file
	}
	os.Stderr = s.stderr
	slog.SetDefault(s.slogDef)
	log.SetOutput(os.Stderr)
	log.SetFlags(log.LstdFlags)
	b, err := os.ReadFile(s.logFile.Name())
	if err != nil {
		t.Error(err)
	}
	s.logFile.Close()
	s.logs = string(b)
	return s.logs, s.err
}

var concTurnRE = regexp.MustCompile(`CONC-TURN s=(\d+) t=(\d+)`)

// concReply is the fake model: thinking first, then for a new user turn one Bash call, and
// for the tool's output a short text that ends the turn.
func concReply(req *fakeupstream.Request) fakeupstream.Reply {
	blocks := fakeupstream.ThinkingFirst(req, "Working on it.")
	if req.EndsWithToolResults() {
		return fakeupstream.Reply{Content: append(blocks, fakeupstream.Text("Read it; moving on."))}
	}
	m := concTurnRE.FindStringSubmatch(req.LastUserText())
	if m == nil {
		return fakeupstream.Reply{Content: append(blocks, fakeupstream.Text("ok"))}
	}
	return fakeupstream.Reply{Content: append(blocks, fakeupstream.ToolUse("Bash",
		map[string]any{"command": "cat out-" + m[1] + "-" + m[2] + ".log", "description": "Read the output"}))}
}

// concSession is one simulated Claude Code session: the whole history on every request,
// system blocks with cache_control and a moving marker on the last block.
type concSession struct {
	n     int
	sid   string
	model string
	url   string
	http  *http.Client
	msgs  []map[string]any
	acked atomic.Int64 // turns whose tool output the proxy has stored (the turn ended with 200s)
}

// concOutput is the tool output of turn t of session s: concOutputLines lines, each with a
// marker no other row carries.
func concOutput(s, t int) string {
	var b strings.Builder
	for i := range concOutputLines {
		fmt.Fprintf(&b, "CONC-OUT s=%d t=%d line=%d: 2026-10-29T17:%02d:%02dZ worker finished job %d in %d ms\n", s, t, i, i%60, t%60, t*100+i, (t*7+i*13)%997)
	}
	return b.String()
}

func (s *concSession) run(ctx context.Context, st *concStats) {
	for turn := 1; ctx.Err() == nil; turn++ {
		text := fmt.Sprintf("CONC-TURN s=%d t=%d: read the next output file with a tool and tell me about it.", s.n, turn)
		if len(s.msgs) == 0 {
			s.msgs = append(s.msgs, map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "<system-reminder>\nAs you answer the user's questions, you can use the following context.\n</system-reminder>"},
				map[string]any{"type": "text", "text": text},
			}})
		} else {
			s.msgs = append(s.msgs, map[string]any{"role": "user", "content": text})
		}
		// The first request gets the tool call; the second carries its output. A turn that
		// was started is finished even when ctx ends, so the history stays well formed.
		blocks, ok := s.send(st)
		if !ok {
			return
		}
		var results []any
		for _, b := range blocks {
			if b["type"] == "tool_use" {
				results = append(results, map[string]any{"type": "tool_result", "tool_use_id": b["id"], "content": concOutput(s.n, turn)})
			}
		}
		if len(results) != 1 {
			st.fail("session %s turn %d: the model made %d tool calls, want 1", s.sid, turn, len(results))
			return
		}
		s.msgs = append(s.msgs, map[string]any{"role": "user", "content": results})
		if _, ok := s.send(st); !ok {
			return
		}
		s.acked.Store(int64(turn))
	}
}

// body renders the next request as Claude Code does.
func (s *concSession) body() []byte {
	msgs := make([]any, len(s.msgs))
	for i, m := range s.msgs {
		msgs[i] = m
	}
	last := s.msgs[len(s.msgs)-1]
	marked := map[string]any{"role": last["role"]}
	cc := map[string]any{"type": "ephemeral"}
	switch c := last["content"].(type) {
	case string:
		marked["content"] = []any{map[string]any{"type": "text", "text": c, "cache_control": cc}}
	case []any:
		blocks := slices.Clone(c)
		end := map[string]any{"cache_control": cc}
		for k, v := range blocks[len(blocks)-1].(map[string]any) {
			end[k] = v
		}
		blocks[len(blocks)-1] = end
		marked["content"] = blocks
	}
	msgs[len(msgs)-1] = marked
	b, err := json.Marshal(map[string]any{
		"model": s.model, "max_tokens": 32000, "stream": true, "messages": msgs,
		"thinking": map[string]any{"type": "adaptive", "display": "omitted"},
		"metadata": map[string]any{"user_id": fmt.Sprintf(`{"device_id":"d","account_uuid":"","session_id":%q}`, s.sid)},
		"system": []any{
			map[string]any{"type": "text", "text": "x-anthropic-billing-header: cc_version=test; cc_entrypoint=sdk-cli;"},
			map[string]any{"type": "text", "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK.", "cache_control": cc},
			map[string]any{"type": "text", "text": "You are an agent working with the user toward their goals." + strings.Repeat(" Follow the rules.", 40), "cache_control": cc},
		},
		"tools": []any{map[string]any{"name": "Bash", "description": "Run a command", "input_schema": map[string]any{
			"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}, "description": map[string]any{"type": "string"}}}}},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// send posts the next request, appends the assistant message and returns its blocks; false
// means it failed (recorded in st).
func (s *concSession) send(st *concStats) ([]map[string]any, bool) {
	req, _ := http.NewRequest("POST", s.url, bytes.NewReader(s.body()))
	req.Header = fakeupstream.ClaudeCodeHeader(s.sid, "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27")
	at := time.Now()
	resp, err := s.http.Do(req)
	if err != nil {
		st.fail("session %s request %d: %v", s.sid, len(s.msgs), err)
		return nil, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		st.fail("session %s request %d: status %d: %s", s.sid, len(s.msgs), resp.StatusCode, b)
		return nil, false
	}
	blocks, err := concReadSSE(resp.Body)
	if err != nil {
		st.fail("session %s request %d: %v", s.sid, len(s.msgs), err)
		return nil, false
	}
	d := time.Since(at)
	st.mu.Lock()
	st.requests++
	st.reqLat = append(st.reqLat, d)
	st.mu.Unlock()
	content := make([]any, len(blocks))
	for i, b := range blocks {
		content[i] = b
	}
	s.msgs = append(s.msgs, map[string]any{"role": "assistant", "content": content})
	return blocks, true
}

// concReadSSE accumulates an Anthropic event stream into the assistant's content blocks; a
// stream without message_stop, or with an error event, is an error.
func concReadSSE(r io.Reader) ([]map[string]any, error) {
	var blocks []map[string]any
	var partial []string
	stopped := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type         string          `json:"type"`
			Index        int             `json:"index"`
			ContentBlock map[string]any  `json:"content_block"`
			Delta        map[string]any  `json:"delta"`
			Error        json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return nil, fmt.Errorf("bad SSE data %q: %v", data, err)
		}
		switch ev.Type {
		case "content_block_start":
			blocks = append(blocks, ev.ContentBlock)
			partial = append(partial, "")
		case "content_block_delta":
			if ev.Index >= len(blocks) {
				return nil, fmt.Errorf("delta for block %d of %d", ev.Index, len(blocks))
			}
			b := blocks[ev.Index]
			switch ev.Delta["type"] {
			case "text_delta":
				b["text"] = fmt.Sprint(b["text"]) + fmt.Sprint(ev.Delta["text"])
			case "thinking_delta":
				b["thinking"] = fmt.Sprint(b["thinking"]) + fmt.Sprint(ev.Delta["thinking"])
			case "signature_delta":
				b["signature"] = ev.Delta["signature"]
			case "input_json_delta":
				partial[ev.Index] += fmt.Sprint(ev.Delta["partial_json"])
			}
		case "content_block_stop":
			if ev.Index < len(blocks) && blocks[ev.Index]["type"] == "tool_use" && partial[ev.Index] != "" {
				var in any
				if err := json.Unmarshal([]byte(partial[ev.Index]), &in); err != nil {
					return nil, fmt.Errorf("tool input %q: %v", partial[ev.Index], err)
				}
				blocks[ev.Index]["input"] = in
			}
		case "message_stop":
			stopped = true
		case "error":
			return nil, fmt.Errorf("stream error event: %s", data)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !stopped {
		return nil, errors.New("the stream ended without message_stop")
	}
	return blocks, nil
}

// concMCPClient connects and initializes an mcp-go streamable HTTP client.
func concMCPClient(t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	req := mcpgo.InitializeRequest{}
	req.Params.ClientInfo = mcpgo.Implementation{Name: "concurrency-test", Version: "1"}
	if _, err := c.Initialize(t.Context(), req); err != nil {
		t.Fatalf("initialize %s: %v", url, err)
	}
	return c
}

// concCall runs one tool call and returns its text; err covers JSON-RPC errors and isError.
func concCall(ctx context.Context, c *client.Client, tool string, args map[string]any) (string, error) {
	req := mcpgo.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return "", err
	}
	var text strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcpgo.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("isError: %s", text.String())
	}
	return text.String(), nil
}

// concSQL runs a one-row SELECT of integers after the load and returns the row.
func concSQL(t *testing.T, c *client.Client, sid, stmt string) []int {
	t.Helper()
	text, err := concCall(t.Context(), c, mcp.ToolSQL, map[string]any{"session_id": sid, "sql": stmt})
	if err != nil {
		t.Fatalf("%s on %s: %v", mcp.ToolSQL, sid, err)
	}
	var res struct {
		Rows [][]float64 `json:"rows"`
	}
	if err := json.Unmarshal([]byte(text), &res); err != nil || len(res.Rows) != 1 {
		t.Fatalf("%s on %s: %v: %s", mcp.ToolSQL, sid, err, text)
	}
	out := make([]int, len(res.Rows[0]))
	for i, v := range res.Rows[0] {
		out[i] = int(v)
	}
	return out
}

// concRead is one MCP reader: it takes the sessions in turn, and for the newest acknowledged
// turn of each alternates a pattern search (the turn's output must be one row) and a SQL count
// (its lines must all be there, and the session's max(seq) must never go down).
func concRead(ctx context.Context, id int, c *client.Client, sessions []*concSession, st *concStats) {
	maxSeq := map[string]int64{}
	// call runs tool and records its latency, and its failure; false: it failed. Calls run on
	// their own context: ending the load must not cancel one in flight.
	call := func(tool string, args map[string]any) (string, bool) {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		at := time.Now()
		text, err := concCall(cctx, c, tool, args)
		d := time.Since(at)
		st.mu.Lock()
		if tool == mcp.ToolSearch {
			st.searches++
			st.searchLat = append(st.searchLat, d)
		} else {
			st.sqls++
			st.sqlLat = append(st.sqlLat, d)
		}
		st.mu.Unlock()
		if err == nil {
			return text, true
		}
		low := strings.ToLower(err.Error())
		what := "failed"
		if strings.Contains(low, "locked") || strings.Contains(low, "busy") {
			what = "failed with a lock error"
		}
		st.fail("reader %d: %s %v %s: %v", id, tool, args, what, err)
		return "", false
	}
	for k := id; ctx.Err() == nil; k++ {
		s := sessions[k%len(sessions)]
		turn := s.acked.Load()
		if turn == 0 {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		marker := fmt.Sprintf("CONC-OUT s=%d t=%d ", s.n, turn)
		if k%2 == 0 {
			args := map[string]any{"session_id": s.sid, "pattern": regexp.QuoteMeta(marker), "limit": 3}
			first := time.Now()
			for try := 0; ; try++ {
				text, ok := call(mcp.ToolSearch, args)
				if !ok {
					break
				}
				var res struct {
					TotalMatches int `json:"total_matches"`
					Results      []struct {
						Role    string `json:"role"`
						Kind    string `json:"kind"`
						Excerpt string `json:"excerpt"`
					} `json:"results"`
				}
				if err := json.Unmarshal([]byte(text), &res); err != nil {
					st.fail("reader %d: search answer is not JSON: %v: %s", id, err, text)
					break
				}
				if res.TotalMatches > 0 {
					if res.TotalMatches != 1 || len(res.Results) != 1 || res.Results[0].Kind != "tool_result" || !strings.Contains(res.Results[0].Excerpt, marker) {
						st.fail("reader %d: search %q on %s: want the one tool_result row, got %s", id, marker, s.sid, text)
					}
					if try > 0 {
						st.lateRead(first)
					}
					break
				}
				if time.Since(first) > concVisible {
					st.fail("reader %d: turn %d of %s was acknowledged but no search found %q within %s: %s", id, turn, s.sid, marker, concVisible, text)
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			continue
		}
		stmt := fmt.Sprintf("SELECT (SELECT count(*) FROM lines WHERE text LIKE '%s%%'), (SELECT max(seq) FROM messages)", marker)
		args := map[string]any{"session_id": s.sid, "sql": stmt}
		var lines int
		var seq int64
		first := time.Now()
		for try := 0; ; try++ {
			text, ok := call(mcp.ToolSQL, args)
			if !ok {
				break
			}
			var res struct {
				Rows [][]float64 `json:"rows"`
			}
			if err := json.Unmarshal([]byte(text), &res); err != nil || len(res.Rows) != 1 || len(res.Rows[0]) != 2 {
				st.fail("reader %d: sql answer: %v: %s", id, err, text)
				break
			}
			lines, seq = int(res.Rows[0][0]), int64(res.Rows[0][1])
			// serve writes a request's rows on its queue just after forwarding it, so another
			// process may see them a moment after the answer (docs/decisions.md)
			if lines == 0 && time.Since(first) <= concVisible {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if try > 0 && lines > 0 {
				st.lateRead(first)
			}
			break
		}
		if lines != concOutputLines {
			st.fail("reader %d: %d lines of %q in %s, want %d", id, lines, marker, s.sid, concOutputLines)
		}
		if seq < maxSeq[s.sid] {
			st.fail("reader %d: max(seq) of %s went from %d down to %d", id, s.sid, maxSeq[s.sid], seq)
		}
		maxSeq[s.sid] = seq
	}
}

// watchWAL samples the size of every sessions/*.db-wal until stop closes and returns the
// largest size each reached.
func watchWAL(dir string, stop <-chan struct{}) map[string]int64 {
	top := map[string]int64{}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.db-wal"))
		for _, p := range paths {
			if fi, err := os.Stat(p); err == nil {
				name := filepath.Base(p)
				top[name] = max(top[name], fi.Size())
			}
		}
		select {
		case <-stop:
			return top
		case <-tick.C:
		}
	}
}
