package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/smarter-compact/smarter-compact/store"
)

// adRecord is one request the recording upstream received, as it came on the wire.
type adRecord struct {
	Method, URI string
	Header      http.Header
	Body        []byte
}

// adUpstream is a tiny upstream that records every request and answers with reply (by
// default 200 {"ok":true}).
type adUpstream struct {
	srv   *httptest.Server
	mu    sync.Mutex
	reqs  []adRecord
	reply func(w http.ResponseWriter, r *http.Request, body []byte)
}

func newAdUpstream(t testing.TB, reply func(w http.ResponseWriter, r *http.Request, body []byte)) *adUpstream {
	u := &adUpstream{reply: reply}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, adRecord{Method: r.Method, URI: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body})
		u.mu.Unlock()
		if u.reply != nil {
			u.reply(w, r, body)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *adUpstream) last(t testing.TB) adRecord {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) == 0 {
		t.Fatal("the upstream received nothing")
	}
	return u.reqs[len(u.reqs)-1]
}

// adHTTP is a proxy served over HTTP with every family pointed at one upstream.
type adHTTP struct {
	*adEnv
	srv *httptest.Server
}

func newAdHTTP(t testing.TB, s Settings, toggles Toggles, upstream string) *adHTTP {
	t.Helper()
	root := openRoot(t)
	s.Upstreams = map[string]string{"anthropic": upstream, "openai": upstream, "codex": upstream}
	logs := &logBuf{}
	p := New(s, toggles, root, slog.New(slog.NewTextHandler(logs, nil)))
	p.now = func() time.Time { return adNow }
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return &adHTTP{adEnv: &adEnv{p: p, root: root, logs: logs}, srv: srv}
}

func (h *adHTTP) post(t testing.TB, path string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", h.srv.URL+path, bytes.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

// adDB opens a session database read-only.
func adDB(t testing.TB, root *store.Root, sid string) *sql.DB {
	t.Helper()
	root.SettleAll() // the proxy queues its writes; read after they landed
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(root.Dir(), "sessions", sid+".db")+"?mode=ro")
	must(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// adRows reads back session sid's messages in seq order, each as "role/kind/name/text"
// (name "-" when there is none).
func adRows(t testing.TB, root *store.Root, sid string) []string {
	t.Helper()
	rows, err := adDB(t, root, sid).Query(`SELECT role, kind, coalesce(name, '-'), text FROM messages ORDER BY seq`)
	must(t, err)
	var got []string
	for rows.Next() {
		var r, k, n, x string
		must(t, rows.Scan(&r, &k, &n, &x))
		got = append(got, r+"/"+k+"/"+n+"/"+x)
	}
	return got
}

func adRowCount(t testing.TB, root *store.Root, sid string) int {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(root.Dir(), "sessions", sid+".db"))
	if len(m) == 0 {
		return 0
	}
	var n int
	must(t, adDB(t, root, sid).QueryRow(`SELECT count(*) FROM messages`).Scan(&n))
	return n
}

// The routes of issue 4 (DESIGN.md §5): agent, upstream family and path, and the format
// the path tail names; what is not a model call passes through.
func TestOpenAIRoutes(t *testing.T) {
	cases := []struct {
		path, ua            string
		agent, family, rest string
		format              apiFormat
		rewrites, ok        bool
	}{
		{"/codex/responses", "", "codex", "codex", "/responses", responsesFormat, true, true},
		{"/codex/v1/responses", "", "codex", "codex", "/v1/responses", responsesFormat, true, true},
		{"/codex/responses/compact", "", "codex", "codex", "/responses/compact", 0, false, true},
		{"/codex/models", "", "codex", "codex", "/models", 0, false, true},
		{"/backend-api/codex/responses", "codex_cli_rs/0.130.0 (Linux)", "codex", "codex", "/responses", responsesFormat, true, true},
		{"/backend-api/codex/responses", "", "codex", "codex", "/responses", responsesFormat, true, true},
		{"/opencode/anthropic/v1/messages", "", "opencode", "anthropic", "/v1/messages", anthropicFormat, true, true},
		{"/opencode/anthropic/messages", "", "opencode", "anthropic", "/messages", anthropicFormat, true, true},
		{"/opencode/openai/v1/chat/completions", "", "opencode", "openai", "/v1/chat/completions", chatFormat, true, true},
		{"/opencode/openai/chat/completions", "", "opencode", "openai", "/chat/completions", chatFormat, true, true},
		{"/opencode/openai/v1/responses", "", "opencode", "openai", "/v1/responses", responsesFormat, true, true},
		{"/opencode/openai/v1/models", "", "opencode", "openai", "/v1/models", 0, false, true},
		{"/opencode/mistral/v1/chat/completions", "", "", "", "", 0, false, false},
		{"/v1/chat/completions", "opencode/1.2.3", "opencode", "openai", "/v1/chat/completions", chatFormat, true, true},
		{"/v1/chat/completions", "", "unknown", "openai", "/v1/chat/completions", chatFormat, true, true},
		{"/v1/responses", "codex_exec/0.1", "codex", "openai", "/v1/responses", responsesFormat, true, true},
		{"/v1/responses/compact", "", "unknown", "openai", "/v1/responses/compact", 0, false, true},
		{"/v1/responses/resp_123", "", "unknown", "openai", "/v1/responses/resp_123", 0, false, true},
		{"/v1/models", "", "unknown", "openai", "/v1/models", 0, false, true},
		{"/claude-code/v1/chat/completions", "", "claude-code", "anthropic", "/v1/chat/completions", 0, false, true},
	}
	for _, tc := range cases {
		r := httptest.NewRequest("POST", tc.path, nil)
		if tc.ua != "" {
			r.Header.Set("User-Agent", tc.ua)
		}
		rt, ok := routeFor(r)
		if ok != tc.ok {
			t.Errorf("%s: routed %v, want %v", tc.path, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		if rt.agent != tc.agent || rt.family != tc.family || rt.rest != tc.rest {
			t.Errorf("%s (%q): route %+v, want {%s %s %s}", tc.path, tc.ua, rt, tc.agent, tc.family, tc.rest)
		}
		f, dry, rewrites := formatOf(rt)
		if rewrites != tc.rewrites || dry || (rewrites && f != tc.format) {
			t.Errorf("%s: format %v dry %v rewrites %v, want %v rewrites %v", tc.path, f, dry, rewrites, tc.format, tc.rewrites)
		}
	}
}

// Over HTTP: a Chat or Responses call on each OpenAI route reaches the upstream at the
// route's path with the rewrite (standing instruction), and what is not a model call
// (/responses/compact, models, a GET) reaches it byte for byte with trimming on.
func TestOpenAIRoutesOverHTTP(t *testing.T) {
	up := newAdUpstream(t, nil)
	h := newAdHTTP(t, testSettings(10_000_000), allOn{}, up.srv.URL)
	si := `"` + adJSONInner(adContractSI(t)) + `"`
	chat := []byte(`{"model":"gpt-5.4","messages":[{"role":"user","content":"hi"}]}`)
	resp := []byte(`{"model":"gpt-5.4","input":[{"role":"user","content":"hi"}]}`)
	for _, tc := range []struct {
		path, upPath string
		body         []byte
	}{
		{"/opencode/openai/v1/chat/completions", "/v1/chat/completions", chat},
		{"/v1/chat/completions?x=1", "/v1/chat/completions?x=1", chat},
		{"/codex/responses", "/responses", resp},
		{"/backend-api/codex/responses", "/responses", resp},
		{"/v1/responses", "/v1/responses", resp},
	} {
		r, _ := h.post(t, tc.path, tc.body, map[string]string{"X-Session-Id": "routes"})
		got := up.last(t)
		if r.StatusCode != 200 || got.URI != tc.upPath || !bytes.Contains(got.Body, []byte(si)) {
			t.Errorf("%s: status %d, upstream got %s %s", tc.path, r.StatusCode, got.URI, got.Body)
		}
	}
	compact := []byte(`{"model":"gpt-5.4","input":[{"role":"user","content":"hi"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"yo"}]}],"instructions":"x"}`)
	for _, path := range []string{"/codex/responses/compact", "/v1/responses/compact", "/codex/models", "/v1/models"} {
		h.post(t, path, compact, map[string]string{"X-Session-Id": "routes-pass"})
		if got := up.last(t); !bytes.Equal(got.Body, compact) {
			t.Errorf("%s: upstream got %s, want the bytes unchanged", path, got.Body)
		}
	}
	if n := adRowCount(t, h.root, "routes-pass"); n != 0 {
		t.Errorf("pass-through routes stored %d rows", n)
	}
	if strings.Contains(h.logs.String(), "fail-open") {
		t.Fatalf("fail-open: %s", h.logs.String())
	}
}

// A WebSocket upgrade on a Responses route is refused with 426 and the OpenAI error
// envelope while trimming is on (Codex then falls back to HTTP); with trimming off it
// passes through as a working upgrade.
func TestResponsesWebSocketUpgrade(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "not an upgrade", 400)
			return
		}
		conn, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		line, _ := brw.ReadString('\n')
		brw.WriteString("echo " + line)
		brw.Flush()
	}))
	defer echo.Close()

	dial := func(t *testing.T, h *adHTTP, path string) (*http.Response, *bufio.Reader, net.Conn) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
		must(t, err)
		conn.SetDeadline(time.Now().Add(3 * time.Second))
		io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOpenAI-Beta: responses_websockets=2026-02-06\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		must(t, err)
		return resp, br, conn
	}

	for _, path := range []string{"/codex/responses", "/backend-api/codex/responses", "/v1/responses"} {
		t.Run("on "+path, func(t *testing.T) {
			h := newAdHTTP(t, testSettings(0), allOn{}, echo.URL)
			resp, _, conn := dial(t, h, path)
			defer conn.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != http.StatusUpgradeRequired {
				t.Fatalf("status %d, want 426", resp.StatusCode)
			}
			adCheckOpenAIError(t, body, "invalid_request_error")
		})
	}
	t.Run("off", func(t *testing.T) {
		h := newAdHTTP(t, testSettings(0), allOn{off: map[string]bool{"codex": true}}, echo.URL)
		resp, br, conn := dial(t, h, "/codex/responses")
		defer conn.Close()
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("status %d, want 101 from the upstream", resp.StatusCode)
		}
		io.WriteString(conn, "response.create\n")
		line, err := br.ReadString('\n')
		if err != nil || line != "echo response.create\n" {
			t.Fatalf("the upgraded connection does not carry data: %q %v", line, err)
		}
	})
}

// adCheckOpenAIError checks the OpenAI error envelope (api-rules §4.6) exactly:
// {"error":{"message":string,"type":typ,"param":null,"code":null}} and nothing else.
func adCheckOpenAIError(t testing.TB, body []byte, typ string) {
	t.Helper()
	var env map[string]map[string]any
	if err := json.Unmarshal(body, &env); err != nil || len(env) != 1 {
		t.Fatalf("not an OpenAI error envelope: %s", body)
	}
	e := env["error"]
	msg, _ := e["message"].(string)
	if len(e) != 4 || msg == "" || e["type"] != typ {
		t.Fatalf("error envelope %s, want message, type %q, param, code", body, typ)
	}
	for _, k := range []string{"param", "code"} {
		if v, ok := e[k]; !ok || v != nil {
			t.Fatalf("error envelope %s: %s must be null", body, k)
		}
	}
}

// Errors the proxy makes itself are in the route family's envelope: OpenAI's on the
// openai and codex families, Anthropic's on the anthropic family.
func TestOpenAIErrorEnvelopes(t *testing.T) {
	chat := []byte(`{"model":"gpt-5.4","messages":[{"role":"user","content":"hi"}]}`)
	resp := []byte(`{"model":"gpt-5.4","input":"hi"}`)
	anth := []byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	t.Run("unreachable upstream is a 502", func(t *testing.T) {
		h := newAdHTTP(t, testSettings(0), allOn{}, "http://127.0.0.1:1")
		for _, tc := range []struct {
			path string
			body []byte
		}{
			{"/v1/chat/completions", chat}, {"/opencode/openai/v1/chat/completions", chat},
			{"/codex/responses", resp}, {"/backend-api/codex/responses", resp}, {"/v1/responses", resp},
			{"/codex/models", nil}, {"/v1/responses/compact", resp},
		} {
			r, b := h.post(t, tc.path, tc.body, nil)
			if r.StatusCode != http.StatusBadGateway {
				t.Errorf("%s: status %d, want 502", tc.path, r.StatusCode)
				continue
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s: Content-Type %q", tc.path, ct)
			}
			adCheckOpenAIError(t, b, "api_error")
		}
		for _, path := range []string{"/opencode/anthropic/v1/messages", "/claude-code/v1/messages"} {
			r, b := h.post(t, path, anth, nil)
			var env struct {
				Type  string `json:"type"`
				Error struct {
					Type, Message string
				} `json:"error"`
			}
			if r.StatusCode != 502 || json.Unmarshal(b, &env) != nil || env.Type != "error" || env.Error.Type != "api_error" {
				t.Errorf("%s: %d %s, want a 502 Anthropic envelope", path, r.StatusCode, b)
			}
		}
	})
	t.Run("no upstream configured is a 502", func(t *testing.T) {
		root := openRoot(t)
		s := testSettings(0)
		s.Upstreams = map[string]string{"anthropic": "http://127.0.0.1:1"}
		p := New(s, allOn{}, root, slog.New(slog.NewTextHandler(io.Discard, nil)))
		for _, path := range []string{"/codex/responses", "/v1/chat/completions"} {
			rec := httptest.NewRecorder()
			p.ServeHTTP(rec, httptest.NewRequest("POST", path, bytes.NewReader(resp)))
			if rec.Code != 502 {
				t.Errorf("%s: %d", path, rec.Code)
			}
			adCheckOpenAIError(t, rec.Body.Bytes(), "api_error")
		}
	})
	t.Run("upstream errors reach the client verbatim", func(t *testing.T) {
		const oaErr = `{"error":{"message":"No tool output found for function call call_x.","type":"invalid_request_error","param":"input","code":null}}`
		up := newAdUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Request-Id", "req_up")
			w.WriteHeader(400)
			io.WriteString(w, oaErr)
		})
		h := newAdHTTP(t, testSettings(0), allOn{}, up.srv.URL)
		for _, path := range []string{"/codex/responses", "/v1/chat/completions"} {
			body := resp
			if strings.Contains(path, "chat") {
				body = chat
			}
			r, b := h.post(t, path, body, map[string]string{"Session_id": "errs"})
			if r.StatusCode != 400 || string(b) != oaErr || r.Header.Get("X-Request-Id") != "req_up" {
				t.Errorf("%s: %d %s", path, r.StatusCode, b)
			}
		}
	})
}

// Codex sends zstd bodies to the Codex backend: the rewritten body goes out zstd-encoded
// with Content-Encoding: zstd and decodes to the rewritten JSON. On the openai family, and
// for gzip, the rewritten body goes out as identity without the header. A body the proxy
// cannot decode goes out as it came, header included, with one fail-open line.
func TestCodexRequestBodyEncoding(t *testing.T) {
	in := []byte(`{"model":"gpt-5.3-codex","instructions":"Base.","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"perm"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"stream":true,"prompt_cache_key":"zs-1"}`)
	si := `{"type":"message","role":"developer","content":[{"type":"input_text","text":"` + adJSONInner(adContractSI(t)) + `"}]}`
	// built by hand: the developer item after the leading developer item; on the openai
	// family the instructions get the instruction instead
	wantCodex := `{"model":"gpt-5.3-codex","instructions":"Base.","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"perm"}]},` + si +
		`,{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"stream":true,"prompt_cache_key":"zs-1"}`
	wantOpenAI := `{"model":"gpt-5.3-codex","instructions":"Base.\n\n` + adJSONInner(adContractSI(t)) +
		`","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"perm"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"stream":true,"prompt_cache_key":"zs-1"}`
	enc, err := zstd.NewWriter(nil)
	must(t, err)
	zin := enc.EncodeAll(in, nil)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(in)
	zw.Close()
	dec, err := zstd.NewReader(nil)
	must(t, err)
	defer dec.Close()

	up := newAdUpstream(t, nil)
	h := newAdHTTP(t, testSettings(10_000_000), allOn{}, up.srv.URL)

	for _, tc := range []struct {
		name, path, enc string
		body            []byte
		wantEnc, want   string
	}{
		{"zstd on /codex", "/codex/responses", "zstd", zin, "zstd", wantCodex},
		{"zstd on /backend-api/codex", "/backend-api/codex/responses", "zstd", zin, "zstd", wantCodex},
		{"zstd on /v1", "/v1/responses", "zstd", zin, "", wantOpenAI},
		{"gzip on /codex", "/codex/responses", "gzip", gz.Bytes(), "", wantCodex},
		{"identity on /codex", "/codex/responses", "", in, "", wantCodex},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.enc != "" {
				hdr["Content-Encoding"] = tc.enc
			}
			r, _ := h.post(t, tc.path, tc.body, hdr)
			if r.StatusCode != 200 {
				t.Fatalf("status %d", r.StatusCode)
			}
			got := up.last(t)
			if ce := got.Header.Get("Content-Encoding"); ce != tc.wantEnc {
				t.Fatalf("upstream Content-Encoding %q, want %q", ce, tc.wantEnc)
			}
			if cl := got.Header.Get("Content-Length"); cl != "" && cl != adItoa(len(got.Body)) {
				t.Fatalf("Content-Length %s for a %d-byte body", cl, len(got.Body))
			}
			body := got.Body
			if tc.wantEnc == "zstd" {
				if body, err = dec.DecodeAll(got.Body, nil); err != nil {
					t.Fatalf("the forwarded body is not zstd: %v", err)
				}
			}
			if string(body) != tc.want {
				t.Fatalf("upstream body:\n got %s\nwant %s", body, tc.want)
			}
		})
	}
	t.Run("undecodable zstd JSON goes out as it came", func(t *testing.T) {
		before := strings.Count(h.logs.String(), "smarter-compact: fail-open")
		bad := enc.EncodeAll([]byte(`{"model":"x","input":[{"role":"user","content":"hi"}`), nil)
		h.post(t, "/codex/responses", bad, map[string]string{"Content-Encoding": "zstd", "Session_id": "zs-bad"})
		got := up.last(t)
		if !bytes.Equal(got.Body, bad) || got.Header.Get("Content-Encoding") != "zstd" {
			t.Fatalf("upstream got %q (%s), want the original zstd bytes", got.Body, got.Header.Get("Content-Encoding"))
		}
		if n := strings.Count(h.logs.String(), "smarter-compact: fail-open") - before; n != 1 {
			t.Fatalf("%d fail-open lines, want 1: %s", n, h.logs.String())
		}
	})
	t.Run("an unknown encoding goes out as it came", func(t *testing.T) {
		before := strings.Count(h.logs.String(), "smarter-compact: fail-open")
		raw := []byte("\x00\x01not really compressed")
		h.post(t, "/codex/responses", raw, map[string]string{"Content-Encoding": "snappy"})
		got := up.last(t)
		if !bytes.Equal(got.Body, raw) || got.Header.Get("Content-Encoding") != "snappy" {
			t.Fatalf("upstream got %q (%s)", got.Body, got.Header.Get("Content-Encoding"))
		}
		if n := strings.Count(h.logs.String(), "smarter-compact: fail-open decode"); n < 1 ||
			strings.Count(h.logs.String(), "smarter-compact: fail-open")-before != 1 {
			t.Fatalf("want one fail-open decode line: %s", h.logs.String())
		}
	})
}

func adItoa(n int) string { return strconv.Itoa(n) }
