package proxy

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

type allOn struct{ off map[string]bool }

func (a allOn) Enabled(agent string) bool { return !a.off[agent] }

// logBuf collects log lines for assertions.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

type rig struct {
	fake  *fakeupstream.Server
	proxy *Proxy
	srv   *httptest.Server
	root  *store.Root
	logs  *logBuf
}

// scriptedReply answers like a model in an agent loop: thinking first when thinking is on,
// then a tool call while the user asked for tools and the last tool output does not say
// FINAL, else a short text. "parallel" in the user text makes it call two tools at once.
func scriptedReply(req *fakeupstream.Request) fakeupstream.Reply {
	blocks := fakeupstream.ThinkingFirst(req, "Let me think about step "+fmt.Sprint(len(req.Messages)))
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "system" && len(req.Messages) > 1 {
		last = req.Messages[len(req.Messages)-2]
	}
	wantsTools := strings.Contains(req.LastUserText(), "use tools")
	if req.EndsWithToolResults() {
		for _, r := range req.ToolResults() {
			if s, ok := r["content"].(string); ok && strings.Contains(s, "FINAL") {
				wantsTools = false
			}
		}
	} else if last.Role != "user" {
		wantsTools = false
	}
	if wantsTools {
		blocks = append(blocks, fakeupstream.ToolUse("Bash", map[string]any{"command": "ls -la", "description": "List"}))
		if strings.Contains(req.LastUserText(), "parallel") {
			blocks = append(blocks, fakeupstream.ToolUse("Read", map[string]any{"file_path": "/tmp/x"}))
		}
		return fakeupstream.Reply{Content: blocks}
	}
	return fakeupstream.Reply{Content: append(blocks, fakeupstream.Text("Done with: "+req.LastUserText()))}
}

func newRig(t testing.TB, s Settings, opts fakeupstream.Options) *rig {
	t.Helper()
	if opts.Reply == nil {
		opts.Reply = scriptedReply
	}
	fake := fakeupstream.Start(t, opts)
	if s.Upstreams == nil {
		s.Upstreams = map[string]string{}
	}
	s.Upstreams["anthropic"] = fake.URL
	return rigAround(t, s, fake)
}

// rigAround opens a store root in t.TempDir() and serves a proxy with s (its upstreams
// already pointed at fake) over httptest, logging into the rig's logBuf; all of it is
// closed when the test ends.
func rigAround(t testing.TB, s Settings, fake *fakeupstream.Server) *rig {
	t.Helper()
	root := openRoot(t)
	logs := &logBuf{}
	p := New(s, allOn{}, root, slog.New(slog.NewTextHandler(logs, nil)))
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return &rig{fake: fake, proxy: p, srv: srv, root: root, logs: logs}
}

func testSettings(trimAt int) Settings {
	s := DefaultSettings()
	s.TrimAtTokens = trimAt
	return s
}

func (r *rig) client(t testing.TB, sid, model string) *ccClient {
	return newClient(t, r.srv.URL+"/claude-code/v1/messages?beta=true", sid, model)
}

func output(lines int, final int) func(int) string {
	return func(step int) string {
		var b strings.Builder
		for i := 0; i < lines; i++ {
			fmt.Fprintf(&b, "step %d line %d: value-%d-%d\n", step, i, step, i)
		}
		if step >= final {
			b.WriteString("FINAL")
		}
		return b.String()
	}
}

func (r *rig) accepted(t testing.TB) []fakeupstream.Recorded {
	t.Helper()
	if rej := r.fake.Rejections(); len(rej) > 0 {
		t.Fatalf("the fake upstream rejected %d requests; first: %d %s", len(rej), rej[0].Status, rej[0].Error)
	}
	return r.fake.Requests()
}

func decodeJSON(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("forwarded body is not JSON: %v", err)
	}
	return m
}

func sessionDB(t testing.TB, r *rig, sid string) *sql.DB {
	t.Helper()
	r.root.SettleAll() // the proxy queues its writes; read after they landed
	db, err := sql.Open("sqlite3", "file:"+r.root.Dir()+"/sessions/"+sid+".db?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// eventInts returns the integer column of each event of kind in db, in id order (column is
// a column name of the events table).
func eventInts(db *sql.DB, column, kind string) ([]int, error) {
	rows, err := db.Query(`SELECT `+column+` FROM events WHERE kind = ? ORDER BY id`, kind)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func TestTrimsAClaudeCodeSessionThroughTheStrictFake(t *testing.T) {
	for _, model := range []string{"claude-opus-5-5", "claude-mythos-5-1"} {
		t.Run(model, func(t *testing.T) {
			r := newRig(t, testSettings(3000), fakeupstream.Options{})
			c := r.client(t, "sess-1", model)
			c.userTurn("Remember KEY-7 = 0x3f2a. Please use tools.", output(30, 2))
			c.userTurn("Now use tools again on the next file.", output(30, 3))
			c.userTurn("And again, use tools, parallel please.", output(30, 5))
			c.userTurn("What was KEY-7?", output(1, 0))

			reqs := r.accepted(t)
			if len(reqs) != len(c.sent) {
				t.Fatalf("fake saw %d requests, client sent %d", len(reqs), len(c.sent))
			}
			sawPointer := false
			for i, rec := range reqs {
				body := decodeJSON(t, rec.Body)
				if !strings.Contains(string(rec.Body), "Context management: to fit your context window") {
					t.Errorf("request %d lacks the standing instruction", i)
				}
				msgs := body["messages"].([]any)
				first := msgs[0].(map[string]any)
				if !strings.Contains(fmt.Sprint(first["content"]), "Remember KEY-7") {
					t.Errorf("request %d: the first turn is not kept first", i)
				}
				if strings.Contains(string(rec.Body), "[smarter-compact: continuing session sess-1;") {
					sawPointer = true
				} else if sawPointer {
					t.Errorf("request %d lost the pointer after a trim", i)
				}
				if n := strings.Count(string(rec.Body), `"cache_control"`); n > 4 {
					t.Errorf("request %d carries %d cache_control markers", i, n)
				}
			}
			if !sawPointer {
				t.Fatal("no request carried the pointer: the session never trimmed")
			}
			if strings.Contains(r.logs.String(), "fail-open") {
				t.Fatalf("unexpected fail-open: %s", r.logs.String())
			}

			db := sessionDB(t, r, "sess-1")
			var total, out, trims, usages int
			must(t, db.QueryRow(`SELECT count(*), sum(in_context = 0) FROM messages`).Scan(&total, &out))
			must(t, db.QueryRow(`SELECT count(*) FROM events WHERE kind = 'trim'`).Scan(&trims))
			must(t, db.QueryRow(`SELECT count(*) FROM events WHERE kind = 'usage'`).Scan(&usages))
			if out == 0 || trims == 0 {
				t.Fatalf("rows %d, trimmed rows %d, trim events %d: want trimmed rows and trim events", total, out, trims)
			}
			if usages != len(reqs) {
				t.Errorf("usage events %d, requests %d", usages, len(reqs))
			}
			// The value said in the first turn is stored and still in context (pinned).
			var inCtx int
			must(t, db.QueryRow(`SELECT in_context FROM messages WHERE text LIKE '%KEY-7 = 0x3f2a%'`).Scan(&inCtx))
			if inCtx != 1 {
				t.Error("the first turn's row must stay in context")
			}
			// every trimmed row names the cut turn that dropped it
			var orphans int
			must(t, db.QueryRow(`SELECT count(*) FROM messages WHERE in_context = 0 AND (trimmed_at IS NULL OR trimmed_at_seq IS NULL OR trimmed_at_seq NOT IN (SELECT seq FROM messages))`).Scan(&orphans))
			if orphans != 0 {
				t.Errorf("%d trimmed rows without trimmed_at / a valid trimmed_at_seq", orphans)
			}
			// every row of the last forwarded request is flagged in context, and so is the
			// last reply, stored from the response
			reply, err := json.Marshal(map[string]any{"messages": c.msgs[len(c.msgs)-1:]})
			must(t, err)
			checkInContextMatchesLastRequest(t, db, reqs[len(reqs)-1].Body, reply)
		})
	}
}

// openRoot opens a context root in t.TempDir(), closed when the test ends.
func openRoot(t testing.TB) *store.Root {
	t.Helper()
	root, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// checkInContextMatchesLastRequest compares the in-context text rows with the user and
// assistant texts the last forwarded request actually carried, computed from the wire, and
// those of more bodies of the same shape (the last reply, which no request carried yet).
func checkInContextMatchesLastRequest(t *testing.T, db *sql.DB, bodies ...[]byte) {
	t.Helper()
	sent := map[string]bool{}
	var msgs struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	for _, body := range bodies {
		var one struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		must(t, json.Unmarshal(body, &one))
		msgs.Messages = append(msgs.Messages, one.Messages...)
	}
	for _, m := range msgs.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			sent[s] = true
			continue
		}
		var blocks []map[string]any
		must(t, json.Unmarshal(m.Content, &blocks))
		for _, b := range blocks {
			if b["type"] == "text" {
				sent[b["text"].(string)] = true
			}
		}
	}
	rows, err := db.Query(`SELECT text, in_context FROM messages WHERE kind = 'text'`)
	must(t, err)
	defer rows.Close()
	for rows.Next() {
		var text string
		var in int
		must(t, rows.Scan(&text, &in))
		if sent[text] != (in == 1) {
			t.Errorf("row %.40q: in_context=%d but sent=%v", text, in, sent[text])
		}
	}
}

func TestPassThrough(t *testing.T) {
	var got struct {
		sync.Mutex
		path   string
		header http.Header
		body   []byte
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Lock()
		got.path, got.header = r.URL.RequestURI(), r.Header.Clone()
		got.body, _ = io.ReadAll(r.Body)
		got.Unlock()
		if strings.HasSuffix(r.URL.Path, "/fail") {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Request-Id", "req_upstream")
			w.WriteHeader(529)
			io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":12}`)
	}))
	defer up.Close()
	root := openRoot(t)
	s := DefaultSettings()
	s.Upstreams = map[string]string{"anthropic": up.URL}
	logs := &logBuf{}
	p := New(s, allOn{off: map[string]bool{"unknown": true}}, root, slog.New(slog.NewTextHandler(logs, nil)))
	srv := httptest.NewServer(p)
	defer srv.Close()

	upstreamBody := func() string { // the body of the upstream's latest request
		got.Lock()
		defer got.Unlock()
		return string(got.body)
	}
	send := func(path, body string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		return resp
	}
	body := `{"model":"claude-opus-5-5","messages":[{"role":"user","content":"hi"}]}`

	t.Run("other endpoints are untouched, credentials and unknown headers pass", func(t *testing.T) {
		resp := send("/claude-code/v1/messages/batches?beta=true", body, map[string]string{
			"Authorization": "Bearer oauth-token", "X-Api-Key": "k", "Anthropic-Beta": "a,b", "X-Custom": "1",
			"Connection": "X-Hop", "X-Hop": "drop me",
		})
		resp.Body.Close()
		got.Lock()
		defer got.Unlock()
		if got.path != "/v1/messages/batches?beta=true" || string(got.body) != body {
			t.Fatalf("upstream got %s %q", got.path, got.body)
		}
		for k, v := range map[string]string{"Authorization": "Bearer oauth-token", "X-Api-Key": "k", "Anthropic-Beta": "a,b", "X-Custom": "1"} {
			if got.header.Get(k) != v {
				t.Errorf("header %s = %q, want %q", k, got.header.Get(k), v)
			}
		}
		if got.header.Get("X-Hop") != "" {
			t.Error("a hop-by-hop header named in Connection reached the upstream")
		}
	})
	t.Run("count_tokens sees the model's view and stores nothing", func(t *testing.T) {
		resp := send("/claude-code/v1/messages/count_tokens", body, map[string]string{"X-Claude-Code-Session-Id": "count-only"})
		resp.Body.Close()
		gb := upstreamBody()
		if !strings.Contains(gb, StandingInstruction[:40]) {
			t.Fatalf("count_tokens did not get the standing instruction: %q", gb)
		}
		if _, err := os.Stat(filepath.Join(root.Dir(), "sessions", "count-only.db")); err == nil {
			t.Fatal("count_tokens wrote a session database")
		}
	})
	t.Run("upstream errors reach the client exactly", func(t *testing.T) {
		resp := send("/claude-code/v1/messages/fail", body, nil)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 529 || string(b) != `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` || resp.Header.Get("Request-Id") != "req_upstream" {
			t.Fatalf("got %d %s", resp.StatusCode, b)
		}
	})
	t.Run("a body that is not JSON fails open, unchanged", func(t *testing.T) {
		bad := `{"model":"x","messages":[{"role":"user","content":"hi"}` // truncated
		resp := send("/claude-code/v1/messages", bad, nil)
		resp.Body.Close()
		gb := upstreamBody()
		if gb != bad {
			t.Fatalf("upstream got %q, want the original bytes", gb)
		}
		if !strings.Contains(logs.String(), "smarter-compact: fail-open parse at proxy/") {
			t.Fatalf("want one fail-open line, log: %s", logs.String())
		}
	})
	t.Run("shapes we do not know fail open", func(t *testing.T) {
		for _, b := range []string{`[1,2]`, `{"messages":"x"}`, `{"messages":[{"role":"tool","content":"x"}]}`, `{"messages":[{"role":"user","content":7}]}`} {
			resp := send("/claude-code/v1/messages", b, nil)
			resp.Body.Close()
			gb := upstreamBody()
			if gb != b {
				t.Errorf("upstream got %q, want %q unchanged", gb, b)
			}
		}
	})
	t.Run("an agent with trimming off is a pure pass-through", func(t *testing.T) {
		resp := send("/v1/messages", body, nil) // no agent prefix, no Claude Code headers: agent unknown, off
		resp.Body.Close()
		gb := upstreamBody()
		if gb != body {
			t.Fatalf("upstream got %q", gb)
		}
	})
	t.Run("an unreachable upstream is a 502 with an error body", func(t *testing.T) {
		s2 := DefaultSettings()
		s2.Upstreams = map[string]string{"anthropic": "http://127.0.0.1:1"}
		p2 := New(s2, allOn{}, root, slog.New(slog.NewTextHandler(io.Discard, nil)))
		rec := httptest.NewRecorder()
		p2.ServeHTTP(rec, httptest.NewRequest("POST", "/claude-code/v1/messages", strings.NewReader(body)))
		if rec.Code != 502 || !strings.Contains(rec.Body.String(), `"type":"error"`) {
			t.Fatalf("got %d %q", rec.Code, rec.Body.String())
		}
	})
}

// reviewBody builds a minimal Messages body (no thinking, so no signatures are needed).
func reviewBody(model string, extra string, msgs ...string) []byte {
	b := `{"model":` + fmt.Sprintf("%q", model) + `,"max_tokens":1024,"stream":true` + extra + `,"messages":[` + strings.Join(msgs, ",") + `]}`
	return []byte(b)
}
