package proxy

// Regression tests from a review of proxy/: each one reproduced a bug or contract deviation
// before its fix (R1…R11 below say which) and now guards against its return.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

// reviewBody builds a minimal Messages body (no thinking, so no signatures are needed).
func reviewBody(model string, extra string, msgs ...string) []byte {
	b := `{"model":` + fmt.Sprintf("%q", model) + `,"max_tokens":1024,"stream":true` + extra + `,"messages":[` + strings.Join(msgs, ",") + `]}`
	return []byte(b)
}

// R1. A string system prompt that is empty is legal (the API and the strict fake accept
// `"system": ""`), but the standing-instruction placement turns it into a leading text
// block with empty text, which the API rejects: "system: text content blocks must be
// non-empty" (api-rules §1.5). Contract (Proxy-inserted text, placement): "a string system
// becomes a single leading text block first" — that block must not be created when the
// string is empty (or whitespace-only).
func TestReviewEmptyStringSystemIsNotTurnedIntoAnEmptyTextBlock(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	body := reviewBody("claude-mythos-5-1", `,"system":""`, u("hello"))
	status := post(t, r.srv.URL+"/claude-code/v1/messages", body, map[string]string{"X-Claude-Code-Session-Id": "empty-sys"})
	if rej := r.fake.Rejections(); len(rej) > 0 {
		t.Fatalf("status %d: the proxy turned a valid request into an invalid one: %s\nforwarded system: %.200s",
			status, rej[0].Error, rej[0].Body[bytes.Index(rej[0].Body, []byte(`"system"`)):])
	}
}

// R2. FIXED during the review by commit 90d4630 ("pinned system messages follow their
// turn"): fails on eb055c9, passes on 90d4630; kept as a regression test.
// Claude Code's mid-conversation role "system" message (messages[1]: environment,
// deferred tool names, agent types, skills) is dropped by the in-turn gap when the first
// turn is still in flight (cut == first real user turn). plan.kept treats every message
// after the cut as tail, pinned or not. anthropic.go documents pinned messages as "never
// dropped", and the preserved-thinking guidance to proxies (api-rules §1.7.4) says "Leave a
// role: "system" message where the caller put it". Losing it mid-task also loses the list
// of deferred tools the model can load through ToolSearch.
func TestReviewPinnedSystemMessageSurvivesAFirstTurnGapTrim(t *testing.T) {
	r := newRig(t, testSettings(2500), fakeupstream.Options{})
	c := r.client(t, "pinned", "claude-mythos-5-1")
	c.userTurn("one long task, use tools", output(25, 12))
	reqs := r.accepted(t)
	trimmed := false
	for i, rec := range reqs {
		body := string(rec.Body)
		if !strings.Contains(body, "[smarter-compact: continuing session pinned;") {
			continue
		}
		trimmed = true
		if !strings.Contains(body, "Environment: cwd /work") {
			t.Fatalf("request %d (trimmed) dropped the role \"system\" message the client put at messages[1]", i)
		}
	}
	if !trimmed {
		t.Fatal("the first turn was never trimmed: the test tests nothing")
	}
}

// R3. The estimate discounts base64 payloads only for image/document blocks at the top of
// a message's content (parseBlock, "source"). An image inside a tool_result (Claude Code's
// Read of a PNG, screenshots from MCP tools) counts with its full base64 length, so one
// 500 kB screenshot makes a ~20 k-token prompt look like ~200 k tokens and forces a trim
// far below the threshold (seed 001, token estimate: "6400 per binary block"). Calibration
// does not help on the request that brings the image: with a thread sample the estimate is
// sample tokens + (new chars) / ratio, and the new chars are the whole base64 payload, so
// every large screenshot mid-session (Playwright/MCP screenshots, Read of a PNG) forces a
// new cut and a prompt-cache miss.
func TestReviewImageInToolResultDoesNotForceATrim(t *testing.T) {
	r := newRig(t, testSettings(0), fakeupstream.Options{}) // threshold follows the model: 120000
	c := r.client(t, "shot", "claude-mythos-5-1")
	c.userTurn("Open the app, use tools", output(20, 1)) // calibrated: the thread has usage samples
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": "Take a screenshot of the login page, use tools"})
	if status, body := c.send(); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var results []any
	for _, b := range c.msgs[len(c.msgs)-1]["content"].([]any) {
		if blk := b.(map[string]any); blk["type"] == "tool_use" {
			img := strings.Repeat("iVBORw0KGgo", 500_000/11) // a ~370 kB PNG, ~1600 real tokens
			results = append(results, map[string]any{"type": "tool_result", "tool_use_id": blk["id"], "content": []any{
				map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": img}},
			}})
		}
	}
	if len(results) == 0 {
		t.Fatal("the model called no tool")
	}
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": results})
	if status, body := c.send(); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	reqs := r.accepted(t)
	last := reqs[len(reqs)-1]
	if strings.Contains(string(last.Body), "[smarter-compact: continuing session") {
		t.Fatal("a short session was trimmed when one screenshot arrived in a tool_result: the image was estimated at its base64 length")
	}
}

// R4. A body over the rewrite limit (64 MiB) is supposed to be "forwarded as it came"
// (proxy.go, maxBody). serveRewrite reads only maxBody+1 bytes and forwards those, so the
// upstream gets a truncated body (and the rest of the client's upload is discarded). An
// upstream with a larger limit (a gateway, Bedrock/Vertex through LiteLLM) gets broken JSON.
func TestReviewOversizedBodyIsForwardedWhole(t *testing.T) {
	var got atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got.Store(n)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"type":"error","error":{"type":"request_too_large","message":"too large"}}`)
	}))
	defer up.Close()
	root, err := store.Open(t.TempDir())
	must(t, err)
	defer root.Close()
	s := DefaultSettings()
	s.Upstreams = map[string]string{"anthropic": up.URL}
	p := New(s, allOn{}, root, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(p)
	defer srv.Close()

	pad := strings.Repeat("x", maxBody+4096)
	body := []byte(`{"model":"claude-mythos-5-1","max_tokens":10,"messages":[{"role":"user","content":"` + pad + `"}]}`)
	post(t, srv.URL+"/claude-code/v1/messages", body, map[string]string{"X-Claude-Code-Session-Id": "huge"})
	if got.Load() != int64(len(body)) {
		t.Fatalf("upstream received %d bytes, the client sent %d: an oversized body was truncated, not forwarded as it came", got.Load(), len(body))
	}
}

// R5. A panic in the rewrite after the session id is known must also write a fail_open
// event (contract: Rows, "A rewrite error after the session id is known also writes a
// fail_open event"; DESIGN §4 fail open). rewriteSafely's recover uses its local sess,
// which is only assigned when p.rewrite returns, so a panic always logs with sess == nil
// and no event is written. (Fault injection: p.now panics once, inside rewrite, after the
// session is loaded; any other panic in steps 5–10 takes the same path.)
func TestReviewPanicAfterTheSessionIsKnownWritesAFailOpenEvent(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "boom", "claude-mythos-5-1")
	c.userTurn("hello", output(1, 0))
	var calls atomic.Int32
	r.proxy.now = func() time.Time {
		if calls.Add(1) == 1 {
			panic("injected fault")
		}
		return time.Now()
	}
	c.userTurn("again", output(1, 0)) // fails open: goes upstream unmodified
	if !strings.Contains(r.logs.String(), "smarter-compact: fail-open panic at proxy/") {
		t.Fatalf("want the fail-open line, log:\n%s", r.logs.String())
	}
	var n int
	must(t, sessionDB(t, r, "boom").QueryRow(`SELECT count(*) FROM events WHERE kind = 'fail_open'`).Scan(&n))
	if n != 1 {
		t.Fatalf("%d fail_open events after a panic in a rewrite of a known session, want 1", n)
	}
}

// R6. Trailing data after the top-level object is not detected: parseAnthropic's check
// `skipSpace(body, len(body))` always returns len(body), so it is dead code and
// objectMembers stops at the first closing brace. Such a body is rewritten (rows stored, a
// trim possible, the standing instruction spliced in) instead of failing open with its
// original bytes (DESIGN §4, fail open: "Any error in 3–10 forwards the original bytes").
func TestReviewTrailingDataFailsOpenWithTheOriginalBytes(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	body := append(reviewBody("claude-mythos-5-1", `,"system":"s"`, u("hi")), []byte(` {"x":1}`)...)
	post(t, r.srv.URL+"/claude-code/v1/messages", body, map[string]string{"X-Claude-Code-Session-Id": "trail"})
	reqs := r.fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d upstream requests", len(reqs))
	}
	if !bytes.Equal(reqs[0].Raw, body) {
		t.Fatalf("a body with trailing data was rewritten instead of failing open:\nsent      %s\nforwarded %s", body, reqs[0].Raw)
	}
}

// R7. count_tokens passes through untouched (DESIGN §4.2), but on a model that binds
// thinking to its prefix the endpoint "runs the same prefix check and returns the same 400"
// (api-rules §2.2, §1.7.4). Every thinking block in the session was produced on the proxy's
// view — system + standing instruction, and after a trim the trimmed messages — so Claude
// Code's count_tokens call with its own history (no standing instruction) is rejected from
// the first thinking turn on, even without any trim.
func TestReviewCountTokensOnABindingModelIsNotRejected(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "count", "claude-opus-5-5")
	c.userTurn("first, use tools", output(2, 1))
	c.userTurn("second", output(1, 0))
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": "how big is this?"})
	doc := decodeJSON(t, c.body())
	for _, k := range []string{"metadata", "max_tokens", "stream"} {
		delete(doc, k)
	}
	body, err := json.Marshal(doc)
	must(t, err)
	status := post(t, r.srv.URL+"/claude-code/v1/messages/count_tokens?beta=true", body, map[string]string{
		"X-Claude-Code-Session-Id": "count",
		"Anthropic-Beta":           "claude-code-20250219,interleaved-thinking-2025-05-14,per-turn-control-2026-07-01",
	})
	if status != 200 {
		rej := r.fake.Rejections()
		t.Fatalf("count_tokens through the proxy: %d %s", status, rej[len(rej)-1].Error)
	}
}

// R8. The calibration pairs two different character counts. recordUsage stores the
// characters render() actually forwarded (thinking stripped), while the next request's
// estimate uses viewChars(), which counts every kept message at its raw length, signed
// thinking included. After a trim on a model that binds thinking to its prefix every kept
// assistant message before the strip point is sent without its thinking, so each later
// estimate is too high by the stripped bytes / ratio, for as long as the cut stands, and the
// next trim fires early (seed 001, token estimate: the characters counted are the request's,
// i.e. what is sent). The two counts must agree for the same view.
func TestReviewEstimateCountsTheCharactersItForwards(t *testing.T) {
	long := strings.Repeat("thinking about it ", 2000) // a summarized thinking block, ~36 kB
	atLong := func(id string) string {
		return fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":%q,"signature":"sig"},{"type":"tool_use","id":%q,"name":"Bash","input":{"command":"ls"}}]}`, long, id)
	}
	replyLong := fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":%q,"signature":"sig"},{"type":"text","text":"done"}]}`, long)
	// The reply before the cut turn is kept and, on a binding model, loses its thinking.
	raws := []string{u("task"), a("r1"), u("q2"), atLong("t1"), ur("t1"), atLong("t2"), ur("t2"), replyLong, u("q3")}
	body := reviewBody("claude-opus-5-5", "", raws...)
	req, err := parseAnthropic(body, nil)
	must(t, err)
	msgs := buildMsgs(t, raws...)
	plan := planTrim(msgs, noPlan(firstRealUser(msgs)), func(cutPlan) bool { return false }, true)
	if !plan.active() {
		t.Fatal("no trim")
	}
	block := PointerText("s", plan.dropped(msgs))
	estimated := viewChars(req, msgs, plan, block)
	sent := render(req, msgs, plan, block, false, "anthropic").chars
	if d := estimated - sent; d > 200 || d < -200 {
		t.Fatalf("the estimate counts %d characters for a view that forwards %d (off by %d): stripped thinking is counted", estimated, sent, d)
	}
}

// R9. The fast-path cache (session.threads) keeps each thread's parsed messages, and every
// message's raw bytes (and its blocks' and members' spans) are sub-slices of the request
// body it was first parsed from. A message reused by later requests therefore pins the
// whole body of the request that introduced it. Claude Code re-sends the full, ever-growing
// history on every request (it never sees the trim, so it never compacts), so a session of
// N requests pins all N bodies: memory grows with the square of the session length (a few
// hundred tool steps of a few kB each already pin hundreds of MB per thread, up to 8 threads
// and 64 sessions).
func TestReviewFastPathCacheDoesNotPinEveryRequestBody(t *testing.T) {
	root, err := store.Open(t.TempDir())
	must(t, err)
	defer root.Close()
	s := DefaultSettings()
	s.TrimAtTokens = 1 << 30 // never trim: only the cache is measured
	s.CompressOverTokens = 0
	p := New(s, allOn{}, root, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h := http.Header{}
	h.Set("X-Claude-Code-Session-Id", "mem")

	chunk := strings.Repeat("0123456789abcdef", 1024) // 16 kB of tool output per step
	msgs := []string{u("task, use tools")}
	var last int
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for step := 0; step < 120; step++ {
		id := fmt.Sprintf("toolu_%d", step)
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"assistant","content":[{"type":"tool_use","id":%q,"name":"Bash","input":{"command":"cat"}}]}`, id),
			fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":%q}]}`, id, fmt.Sprint(step)+chunk))
		body := reviewBody("claude-mythos-5-1", "", msgs...)
		last = len(body)
		if _, _, err := p.rewrite(h, body); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(p) // the proxy (and its sessions) must be live when the heap is measured
	retained := int(after.HeapAlloc) - int(before.HeapAlloc)
	t.Logf("last body %d kB, heap retained after the session %d kB", last>>10, retained>>10)
	if retained > 8*last {
		t.Fatalf("the proxy retains %d MB for one thread whose history is %d MB: every request body is pinned by the messages it introduced", retained>>20, last>>20)
	}
}

// R10. On a model that binds thinking to its prefix the strip point is "the message after
// the latest assistant message" (planTrim: strip = la+1). When the trimming request ends
// with an assistant message (a pause_turn continuation after a server tool, or a prefill on
// a model that allows it), la+1 == len(msgs): rewrite() then stores no strip_fp, and
// resolvePlan on the following requests strips nothing. The kept reply before the cut still
// carries thinking bound to the untrimmed prefix, and the API answers "bound to a different
// conversation" (api-rules §1.7.4) on every request until the next trim.
func TestReviewStripPointSurvivesATrimOfARequestEndingWithAnAssistantMessage(t *testing.T) {
	rules := fakeupstream.DefaultRules("claude-opus-5-5")
	rules.RejectPrefill = false // the request may end with an assistant message (pause_turn, prefill)
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{Models: map[string]fakeupstream.ModelRules{"claude-opus-5-5": rules}})
	c := r.client(t, "tail", "claude-opus-5-5")
	c.userTurn("one, use tools", output(3, 1))
	c.userTurn("two", output(1, 0))
	c.userTurn("three", output(1, 0))

	// The request that trims ends with an assistant message.
	must(t, r.root.SetForce("tail"))
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": "four"})
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "Answer:"}}})
	if status, body := c.send(); status != 200 {
		t.Fatalf("trimming request: %d %s", status, body)
	}
	// The next request carries the same history up to "four" (the prefill and its
	// continuation are dropped, as a client retrying without prefill would).
	c.msgs = c.msgs[:len(c.msgs)-2]
	if status, body := c.send(); status != 200 {
		t.Fatalf("the request after the trim was rejected: %d %s", status, body)
	}
	reqs := r.fake.Requests()
	if !strings.Contains(string(reqs[len(reqs)-1].Body), "[smarter-compact: continuing session tail;") {
		t.Fatal("the request after the trim does not carry the cut: the test tests nothing")
	}
}

// R11. The thread key is the fingerprint of the first ROW of the first message
// (buildMessages: thread = m.firstFP). Claude Code's first user message starts with a
// generic <system-reminder> text block (clients.md: "[system-reminder text block (commit
// attribution), the prompt text]"), the same for the main conversation and for every
// subagent or side request of the session. All of them then share one thread key: one
// threadState (cut, gap, strip, block, usage sample) and one messages.thread value. The
// contract says "a subagent or side request is its own thread" (002, messages.thread) and
// keys the trim state "per conversation thread ... by the first message's fingerprint"
// (001, token estimate). Consequence: a subagent's trim overwrites the main conversation's
// cut, the main conversation's next request no longer finds its cut and is cut again (a new
// pointer, a prompt-cache miss) — the two conversations keep re-trimming each other.
func TestReviewSubagentIsItsOwnThread(t *testing.T) {
	run := func(t *testing.T, withSub bool) (threads, followUp int) {
		r := newRig(t, testSettings(3000), fakeupstream.Options{})
		main := r.client(t, "agents", "claude-mythos-5-1")
		sub := r.client(t, "agents", "claude-mythos-5-1")
		db := sessionDB(t, r, "agents")
		lastTurnTrimmed := func(since int) bool {
			var n int
			r.root.SettleAll()
			must(t, db.QueryRow(`SELECT count(*) FROM events WHERE kind = 'usage' AND id > ? AND trimmed = 2`, since).Scan(&n))
			return n > 0
		}
		maxID := func() (id int) {
			r.root.SettleAll()
			must(t, db.QueryRow(`SELECT coalesce(max(id), 0) FROM events`).Scan(&id))
			return id
		}
		main.userTurn("Main task: refactor the parser, use tools", output(20, 2))
		if withSub {
			sub.userTurn("Subagent task: list the tests, use tools", output(20, 2))
		}
		// The main conversation goes on until a turn of it makes a new cut.
		for turn := 0; ; turn++ {
			if turn == 10 {
				t.Fatal("the main conversation never trimmed")
			}
			since := maxID()
			main.userTurn(fmt.Sprintf("main turn %d, use tools", turn), output(20, 2))
			if lastTurnTrimmed(since) {
				break
			}
		}
		if withSub { // the subagent works (and trims) in the same session
			for turn := 0; turn < 3; turn++ {
				sub.userTurn(fmt.Sprintf("sub turn %d, use tools", turn), output(20, 2))
			}
		}
		// A short follow-up of the main conversation: it carries its cut, no new trim.
		main.msgs = append(main.msgs, map[string]any{"role": "user", "content": "main: short question"})
		if status, body := main.send(); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
		must(t, db.QueryRow(`SELECT count(DISTINCT thread) FROM messages`).Scan(&threads))
		must(t, db.QueryRow(`SELECT trimmed FROM events WHERE kind = 'usage' ORDER BY id DESC LIMIT 1`).Scan(&followUp))
		return threads, followUp
	}
	if _, followUp := run(t, false); followUp != 1 {
		t.Fatalf("control (no subagent): the follow-up has trimmed=%d, want 1; the test is miscalibrated", followUp)
	}
	threads, followUp := run(t, true)
	if threads != 2 {
		t.Errorf("two conversations (a main one and a subagent) are stored as %d thread(s)", threads)
	}
	if followUp != 1 {
		t.Errorf("with a subagent in the session the main conversation's short follow-up has trimmed=%d, want 1 (as without the subagent): the subagent's trim replaced the main conversation's cut", followUp)
	}
}
