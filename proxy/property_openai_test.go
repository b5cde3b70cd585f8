package proxy

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

// Property tests of the Chat Completions and Responses adapters, the OpenAI counterparts of
// TestPropertyGeneratedConversations: generated OpenCode (Chat, Responses) and Codex
// (Responses) sessions run through the proxy's HTTP server at random thresholds against a
// strict fake, with tool loops, parallel calls, messages before calls, reasoning on and off
// (with and without a summary), multi-item first turns, extra user and developer items in
// later turns, huge and non-ASCII tool results, forced trims, sessions without a session
// header (Chat), Claude models behind LiteLLM (signed reasoning is stripped) and the Codex
// backend route with zstd bodies. Invariants:
//
//   - the fake rejects nothing: call/output pairing both ways, reasoning linkage (an item
//     the fake issued after a reasoning item comes with it), no reasoning item last, message
//     roles, encrypted_content as issued;
//   - every forwarded request is valid UTF-8, keeps the first user turn (every item of it,
//     in order) as its first unpinned items, and carries the standing instruction exactly
//     once, in its place (after the leading pinned messages, or at the end of instructions);
//   - before the first trim, a forwarded request is the client's, the standing instruction
//     added and long tool results compressed, nothing else;
//   - a request that makes a new cut carries the pointer, whose count is the number of
//     items left out (stripped reasoning aside) and the trim event's dropped; signed
//     reasoning (Chat thinking_blocks, Responses reasoning items of a Claude model) is left
//     only in the latest assistant run, and nowhere for a model that binds it to its prefix;
//   - once a trim happened, every forwarded request carries the pointer, in exactly one
//     item: a user message whose first part it is;
//   - between two trims (usage events, trimmed = 2), each forwarded request's item list
//     starts with the previous forwarded request's items byte for byte, and its
//     instructions and tools are unchanged;
//   - the session database holds each row of the conversation exactly once, in order
//     (role, kind, name, text computed from the client's own last request), in one thread,
//     and the text and thinking rows' in_context flags match what the last request sent;
//   - one usage event per request, one trim event per new cut, no fail-open line.
//
// The conversations are short (mostly two or three turns of zero to two tool steps, some
// longer) so that 1000 of each format run in well under a minute: most of the time is the
// proxy's own work per request (the session database above all).

func TestPropertyGeneratedChatConversations(t *testing.T) { runOpenAIProperty(t, "chat") }

func TestPropertyGeneratedResponsesConversations(t *testing.T) { runOpenAIProperty(t, "responses") }

// propStats counts what the generated conversations exercised.
type propStats struct {
	conversations, requests, trims, pointered, compressed, extended int
	reasoning, parallel, stripped, forced, multiFirst, zstd, codex  int
	gapped, cutInFirst, fingerprinted                               int
	trimmedConversations                                            int
}

func (s *propStats) add(o propStats) {
	s.conversations += o.conversations
	s.requests += o.requests
	s.trims += o.trims
	s.pointered += o.pointered
	s.compressed += o.compressed
	s.extended += o.extended
	s.reasoning += o.reasoning
	s.parallel += o.parallel
	s.stripped += o.stripped
	s.forced += o.forced
	s.multiFirst += o.multiFirst
	s.zstd += o.zstd
	s.codex += o.codex
	s.gapped += o.gapped
	s.cutInFirst += o.cutInFirst
	s.fingerprinted += o.fingerprinted
	s.trimmedConversations += o.trimmedConversations
}

func runOpenAIProperty(t *testing.T, format string) {
	var total propStats
	propertyWorkers(t, func(t *testing.T, first, count, stride int) func() {
		st := generatedOpenAIConversations(t, format, first, count, stride)
		return func() { total.add(st) }
	})
	t.Cleanup(func() {
		t.Logf("%s: %+v", format, total)
		if t.Failed() {
			return
		}
		if total.trims == 0 || total.compressed == 0 || total.extended == 0 || total.reasoning == 0 ||
			total.parallel == 0 || total.forced == 0 || total.multiFirst == 0 || total.gapped == 0 || total.cutInFirst == 0 {
			t.Error("the generator missed a feature (trim, compression, extension, reasoning, parallel calls, force, multi-item first turn, in-turn gap, cut in the first turn): it tests less than it claims")
		}
		if format == "responses" && (total.stripped == 0 || total.zstd == 0 || total.codex == 0) {
			t.Error("the generator never stripped signed reasoning, never sent zstd or never used the Codex route")
		}
		if format == "chat" && total.fingerprinted == 0 {
			t.Error("the generator never sent a Chat conversation without a session header")
		}
	})
}

// fancyOutput is output with text that JSON escapes or spells in several bytes: quotes,
// backslashes, tabs, <tags> and & (which Go writes as \u003c and \u0026), combining marks,
// CJK, emoji, U+2028, and a long line of multi-byte characters that a compression head cut
// falls inside.
func fancyOutput(lines, final int) func(int) string {
	plain := output(lines, final)
	return func(step int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "résumé ✓ → 日本語 <tag a=\"1\"> & \\path\\to\tfile 🚀 e\u0301 \u2028 step %d\n", step)
		b.WriteString(strings.Repeat("日本語テキスト✓", 700))
		b.WriteString("\n")
		return b.String() + plain(step)
	}
}

// propConv is one generated conversation, whichever simulator plays it.
type propConv struct {
	sid, format, family string
	model               string
	turn                func(text string, out func(int) string)
	sent                func() [][]byte
	firstTexts          func() [][]string
	// history is the client's conversation after the last answer, pinned items left out:
	// what its next request would send, the last reply included.
	history        func() []json.RawMessage
	pinned         int  // leading pinned items the client sends
	instructions   bool // the client sends instructions
	thinkingBlocks bool // Chat: the client keeps LiteLLM's thinking_blocks
}

// switcher serves whatever handler is current, so one listener serves a fresh fake (or
// proxy) per conversation.
type switcher struct{ cur atomic.Pointer[http.Handler] }

func (s *switcher) set(h http.Handler)                               { s.cur.Store(&h) }
func (s *switcher) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*s.cur.Load()).ServeHTTP(w, r) }

// generatedOpenAIConversations runs count conversations of format, seeds first,
// first+stride, …
func generatedOpenAIConversations(t *testing.T, format string, first, count, stride int) propStats {
	var st propStats
	upSwitch, proxySwitch := &switcher{}, &switcher{}
	up := httptest.NewServer(upSwitch)
	defer up.Close()
	front := httptest.NewServer(proxySwitch)
	defer front.Close()
	client := &http.Client{}
	// one context root for the worker's conversations, each its own session, as a proxy
	// serving many sessions has
	root, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	dbs := map[string]bool{} // the sessions of earlier conversations
	for k := 0; k < count; k++ {
		i := first + k*stride
		seed := int64(i)
		if format == "responses" {
			seed += 1 << 20
		}
		rng := rand.New(rand.NewSource(seed))
		fake := fakeupstream.New(fakeupstream.Options{Reply: simReply})
		fake.URL = up.URL
		upSwitch.set(fake)
		s := DefaultSettings()
		s.TrimAtTokens = 800 + rng.Intn(5000)
		s.CompressOverTokens = []int{0, 300, 4000}[rng.Intn(3)]
		s.TrimToFraction = []float64{0.1, 0.3, 0.6}[rng.Intn(3)]
		s.Upstreams = simUpstreams(fake)
		logs := &logBuf{}
		p := New(s, allOn{}, root, slog.New(slog.NewTextHandler(logs, nil)))
		proxySwitch.set(p)

		var c propConv
		if format == "chat" {
			c = genChat(t, rng, front.URL, i, client)
		} else {
			c = genResponses(t, rng, front.URL, i, client, &st)
		}
		// mostly two or three turns, which is enough for a cut (the first turn usually uses
		// tools), and some long sessions with several cuts; the file must stay fast
		turns := 2
		switch r := rng.Intn(10); {
		case r >= 9:
			turns = 4 + rng.Intn(2)
		case r >= 7:
			turns = 3
		}
		firstPrompt := fmt.Sprintf("Task %d: remember VALUE-%d. use tools", i, rng.Intn(1e6))
		if rng.Intn(8) == 0 {
			// a first turn without tools: nothing before the second turn can drop, so
			// that cut keeps the head and only its in-turn gap drops
			firstPrompt = fmt.Sprintf("Task %d: remember VALUE-%d. Say hello first.", i, rng.Intn(1e6))
		}
		for turn := 0; turn < turns; turn++ {
			text := propTurnText(rng, firstPrompt, turn, i, 3)
			if rng.Intn(4) == 0 {
				text += " in parallel"
				st.parallel++
				if rng.Intn(3) == 0 {
					text += " interleaved"
				}
			}
			if c.format == "responses" && rng.Intn(5) == 0 {
				text += " with mcp"
			}
			if rng.Intn(6) == 0 {
				text += " tersely"
			}
			if rng.Intn(5) == 0 {
				text += ", explain"
			}
			steps := rng.Intn(2)
			if rng.Intn(8) == 0 {
				steps = 4 + rng.Intn(2) // a long agent loop: an in-turn gap
			}
			lines := 1 + rng.Intn(60)
			if rng.Intn(6) == 0 {
				lines = 200 + rng.Intn(400) // huge results
			}
			if rng.Intn(10) == 0 && c.sid != "" {
				if err := root.SetForce(c.sid); err != nil {
					t.Fatal(err)
				}
				st.forced++
			}
			out := output(lines, steps)
			if rng.Intn(4) == 0 {
				out = fancyOutput(lines, steps)
			}
			c.turn(text, out)
			if c.sid == "" {
				c.sid = newSessionDB(t, root, dbs)
				st.fingerprinted++
			}
		}
		dbs[c.sid] = true
		checkOpenAIConversation(t, fmt.Sprintf("seed %d", seed), c, fake, root, logs, &st)
		st.conversations++
	}
	return st
}

var propModelsChat = []string{"gpt-4.1", "fake-model", "claude-sonnet-4-5", "claude-opus-5-5", "deepseek-reasoner"}
var propModelsResponses = []string{"gpt-5-codex", "gpt-5.3-codex", "claude-sonnet-4-5", "claude-opus-5-5"}

func genChat(t *testing.T, rng *rand.Rand, base string, i int, client *http.Client) propConv {
	route := routeOpenCodeChat
	if rng.Intn(3) == 0 {
		route = routeBareChat
	}
	sid := fmt.Sprintf("ses_chat%06d", i)
	c := newChatSim(t, base+route, sid, propModelsChat[rng.Intn(len(propModelsChat))])
	c.http = client
	c.system = simPrompt("You are opencode, an interactive CLI tool.", 300+rng.Intn(3000))
	if rng.Intn(5) == 0 {
		c.developer = "Instructions from AGENTS.md: run go vet before committing."
	}
	c.reasoning = rng.Intn(2) == 0
	c.keepReasoning = c.reasoning && rng.Intn(2) == 0
	c.thinkingBlocks = c.keepReasoning && strings.Contains(c.model, "claude")
	c.firstTurn = 1 + rng.Intn(3)
	c.nullContent = rng.Intn(3) == 0
	c.partsOutput = rng.Intn(4) == 0
	if rng.Intn(10) == 0 {
		c.system = "" // no system prompt: the standing instruction becomes the first message
	}
	c.noSession = rng.Intn(10) == 0
	pinned := 0
	if c.system != "" {
		pinned++
	}
	if c.developer != "" {
		pinned++
	}
	if c.noSession {
		sid = "" // the proxy names it fp-…; found after the conversation
	}
	turn := func(text string, out func(int) string) {
		if c.turns > 0 && rng.Intn(8) == 0 {
			c.extraUser = fmt.Sprintf("(pasted log of conversation %d)\n%s", i, strings.Repeat("log line\n", 3+rng.Intn(20)))
		}
		c.userTurn(text, out)
	}
	return propConv{sid: sid, format: "chat", family: "openai", model: c.model, turn: turn, thinkingBlocks: c.thinkingBlocks,
		sent: func() [][]byte { return c.sent }, firstTexts: func() [][]string { return c.firstTexts },
		history: func() []json.RawMessage { return c.msgs }, pinned: pinned}
}

func genResponses(t *testing.T, rng *rand.Rand, base string, i int, client *http.Client, st *propStats) propConv {
	style := respStyle(rng.Intn(2))
	route, family := routeOpenCodeResponses, "openai"
	if style == codexStyle {
		route, family = routeCodexResponses, "codex"
	}
	if rng.Intn(4) == 0 {
		route, family = routeBareResponses, "openai"
	}
	if family == "codex" {
		st.codex++
	}
	sid := fmt.Sprintf("ses_resp%06d", i)
	if style == codexStyle {
		sid = fmt.Sprintf("019a2b3c-%04x-7000-8000-%012d", i&0xffff, i)
	}
	c := newRespSim(t, base+route, sid, propModelsResponses[rng.Intn(len(propModelsResponses))], style)
	c.http = client
	c.system = simPrompt("You are a coding agent.", 300+rng.Intn(3000))
	pinned := 1
	if style == codexStyle {
		if rng.Intn(2) == 0 {
			c.skills = simPrompt("<skills_instructions>", 200+rng.Intn(1500))
			pinned = 2
		} else {
			c.skills = ""
		}
		c.zstd = family == "codex" && rng.Intn(2) == 0
		if c.zstd {
			st.zstd++
		}
	}
	c.reasoning = rng.Intn(10) < 7
	if rng.Intn(4) == 0 {
		c.instructions = "You are a helpful assistant. Follow the repository's conventions."
	}
	if rng.Intn(3) == 0 {
		c.extraFirst = 1 + rng.Intn(2)
	}
	if style == opencodeStyle {
		c.partsOutput = rng.Intn(4) == 0
		c.stringReply = rng.Intn(4) == 0
	}
	turn := func(text string, out func(int) string) {
		if c.turns > 0 && rng.Intn(6) == 0 {
			c.nextDeveloper = fmt.Sprintf("<collaboration_mode>turn %d: default</collaboration_mode>", c.turns)
		}
		if c.turns > 0 && rng.Intn(6) == 0 {
			c.nextUser = fmt.Sprintf("<environment_context>\n  <cwd>/work/%s/sub%d</cwd>\n</environment_context>", sid, c.turns)
		}
		c.userTurn(text, out)
	}
	return propConv{sid: sid, format: "responses", family: family, model: c.model, turn: turn,
		sent: func() [][]byte { return c.sent }, firstTexts: func() [][]string { return c.firstTexts },
		history: func() []json.RawMessage { return c.items }, pinned: pinned, instructions: c.instructions != ""}
}

// checkNewCut checks request j, which made the conversation's cut-th new cut: the pointer
// counts the dropped messages, as the trim event does, and signed reasoning is left only
// in the latest assistant run (none for a model that binds thinking to its prefix).
func checkNewCut(t *testing.T, fail func(string, ...any), j int, c propConv, f, own fwdRequest, pointer string, signed, binds bool, trimDropped []int, cut int) {
	t.Helper()
	var n int
	found := false
	for _, it := range f.items {
		if texts := it.texts(); len(texts) > 0 && strings.HasPrefix(texts[0], pointer) {
			if _, err := fmt.Sscanf(strings.TrimPrefix(texts[0], pointer), " %d earlier messages", &n); err != nil {
				fail("request %d: pointer %.120q: %v", j, texts[0], err)
			}
			found = true
		}
	}
	if !found {
		fail("request %d made a new cut without a pointer", j)
	}
	if cut <= len(trimDropped) && trimDropped[cut-1] != n {
		fail("request %d: the pointer says %d dropped, the trim event %d", j, n, trimDropped[cut-1])
	}
	unpinned := func(items []fwdItem) int {
		k := 0
		for _, it := range items {
			if !it.pinned() {
				k++
			}
		}
		return k
	}
	// every message the view left out is a dropped one, except stripped reasoning items
	if missing := unpinned(own.items) - unpinned(f.items); missing != n && !(signed && c.format == "responses" && missing > n) {
		fail("request %d: %d items left out, the pointer counts %d", j, missing, n)
	}
	if !signed {
		return
	}
	// signed reasoning: Chat thinking_blocks, Responses reasoning items (Claude behind LiteLLM)
	// the latest assistant run: the run of assistant items ending at the last one
	assistant := func(it fwdItem) bool {
		return it.role == "assistant" || c.format == "responses" && (it.typ == "reasoning" || it.typ == "function_call")
	}
	lastRun := len(f.items)
	for lastRun > 0 && !assistant(f.items[lastRun-1]) {
		lastRun--
	}
	for lastRun > 0 && assistant(f.items[lastRun-1]) {
		lastRun--
	}
	for k, it := range f.items {
		has := it.typ == "reasoning" && simStr(it.obj, "encrypted_content") != ""
		if c.format == "chat" {
			_, has = it.obj["thinking_blocks"]
		}
		if has && (binds || k < lastRun) {
			fail("request %d: item %d keeps signed reasoning after the trim (latest run from %d, binding model %v): %.200s", j, k, lastRun, binds, it.raw)
		}
	}
}

// newSessionDB returns the session whose database is not among known: the fingerprint
// session a conversation without a session id made.
func newSessionDB(t *testing.T, root *store.Root, known map[string]bool) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root.Dir(), "sessions", "*.db"))
	must(t, err)
	var found []string
	for _, f := range files {
		if sid := strings.TrimSuffix(filepath.Base(f), ".db"); !known[sid] {
			found = append(found, sid)
		}
	}
	if len(found) != 1 || !strings.HasPrefix(found[0], "fp-") {
		t.Fatalf("want one new fingerprint session, found %q", found)
	}
	return found[0]
}

// fwdItem is one item of a forwarded request, decoded.
type fwdItem struct {
	raw  json.RawMessage
	typ  string // Responses item type ("message" for a role without type); Chat ""
	role string
	obj  map[string]any
}

func (it fwdItem) pinned() bool {
	return (it.typ == "" || it.typ == "message") && (it.role == "system" || it.role == "developer")
}

// texts returns the text of a message's content: a string, or its text parts.
func (it fwdItem) texts() []string { return simTexts(it.obj["content"]) }

type fwdRequest struct {
	items        []fwdItem
	instructions json.RawMessage
	tools        json.RawMessage
}

// parseForwarded splits a forwarded body into its items; an item already in cache (the
// same bytes in an earlier request of the conversation) is not decoded again.
func parseForwarded(t *testing.T, format string, body []byte, cache map[string]*fwdItem) fwdRequest {
	t.Helper()
	var top struct {
		Messages     []json.RawMessage `json:"messages"`
		Input        []json.RawMessage `json:"input"`
		Instructions json.RawMessage   `json:"instructions"`
		Tools        json.RawMessage   `json:"tools"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("forwarded body: %v", err)
	}
	raws := top.Input
	if format == "chat" {
		raws = top.Messages
	}
	out := fwdRequest{instructions: top.Instructions, tools: top.Tools, items: make([]fwdItem, 0, len(raws))}
	for _, raw := range raws {
		if it := cache[string(raw)]; it != nil {
			out.items = append(out.items, *it)
			continue
		}
		it := &fwdItem{raw: raw}
		if err := json.Unmarshal(raw, &it.obj); err != nil {
			t.Fatal(err)
		}
		it.role = simStr(it.obj, "role")
		if format == "responses" {
			it.typ = simStr(it.obj, "type")
			if it.typ == "" && it.role != "" {
				it.typ = "message"
			}
		}
		if cache != nil {
			cache[string(raw)] = it
		}
		out.items = append(out.items, *it)
	}
	return out
}

// expectedRow is a row the session database must hold.
type expectedRow struct{ role, kind, name, text string }

// expectedRows computes the rows of the client's unpinned history (contract: Rows), from
// the client's bytes: what the database must hold after the last request, once each.
func expectedRows(t *testing.T, format string, history []json.RawMessage) []expectedRow {
	t.Helper()
	var out []expectedRow
	names := map[string]string{}
	compact := func(s string) string {
		c, err := store.CompactJSON([]byte(s))
		if err != nil {
			return s
		}
		return c
	}
	for _, raw := range history {
		var m map[string]any
		must(t, json.Unmarshal(raw, &m))
		it := fwdItem{obj: m, role: simStr(m, "role"), typ: simStr(m, "type")}
		if format == "chat" {
			switch it.role {
			case "user":
				for _, s := range it.texts() {
					if s != "" {
						out = append(out, expectedRow{"user", "text", "", s})
					}
				}
			case "assistant":
				thought := false
				blocks, _ := m["thinking_blocks"].([]any)
				for _, e := range blocks {
					if s := simStr(e.(map[string]any), "thinking"); s != "" {
						out = append(out, expectedRow{"assistant", "thinking", "", s})
						thought = true
					}
				}
				if r := simStr(m, "reasoning_content"); r != "" && !thought {
					out = append(out, expectedRow{"assistant", "thinking", "", r})
				}
				for _, s := range it.texts() {
					if s != "" {
						out = append(out, expectedRow{"assistant", "text", "", s})
					}
				}
				calls, _ := m["tool_calls"].([]any)
				for _, e := range calls {
					call := e.(map[string]any)
					fn := call["function"].(map[string]any)
					names[simStr(call, "id")] = simStr(fn, "name")
					out = append(out, expectedRow{"assistant", "tool_use", simStr(fn, "name"), compact(simStr(fn, "arguments"))})
				}
			case "tool":
				out = append(out, expectedRow{"tool", "tool_result", names[simStr(m, "tool_call_id")], simText(m["content"])})
			}
			continue
		}
		if it.typ == "" && it.role != "" {
			it.typ = "message"
		}
		switch it.typ {
		case "message":
			for _, s := range it.texts() {
				if s != "" {
					out = append(out, expectedRow{it.role, "text", "", s})
				}
			}
		case "reasoning":
			var parts []string
			sum, _ := m["summary"].([]any)
			for _, e := range sum {
				if s := simStr(e.(map[string]any), "text"); s != "" {
					parts = append(parts, s)
				}
			}
			if len(parts) > 0 {
				out = append(out, expectedRow{"assistant", "thinking", "", strings.Join(parts, "\n")})
			}
		case "function_call":
			name := simStr(m, "name")
			if ns := simStr(m, "namespace"); ns != "" {
				name = ns + "__" + name
			}
			names[simStr(m, "call_id")] = name
			out = append(out, expectedRow{"assistant", "tool_use", name, compact(simStr(m, "arguments"))})
		case "function_call_output":
			out = append(out, expectedRow{"tool", "tool_result", names[simStr(m, "call_id")], simText(m["output"])})
		default:
			t.Fatalf("unexpected item type %q in the client's history", it.typ)
		}
	}
	return out
}

// checkOpenAIConversation checks the invariants (see the top of the file) for one
// conversation and adds to st.
func checkOpenAIConversation(t *testing.T, name string, c propConv, fake *fakeupstream.Server, root *store.Root, logs *logBuf, st *propStats) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s (%s %s, session %s): %s", name, c.format, c.family, c.sid, fmt.Sprintf(format, args...))
	}
	if rej := fake.Rejections(); len(rej) > 0 {
		fail("the fake rejected request %s: %d %s", rej[0].RequestID, rej[0].Status, rej[0].Error)
	}
	if strings.Contains(logs.String(), "fail-open") {
		fail("fail-open:\n%s", logs.String())
	}
	reqs := fake.Requests()
	sent := c.sent()
	if len(reqs) != len(sent) {
		fail("the fake saw %d requests, the client sent %d", len(reqs), len(sent))
	}
	root.SettleAll()
	db, err := sql.Open("sqlite3", "file:"+root.Dir()+"/sessions/"+c.sid+".db?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	trimmed, err := eventInts(db, "trimmed", "usage")
	if err != nil {
		fail("events: %v", err)
	}
	if len(trimmed) != len(reqs) {
		fail("%d usage events for %d requests", len(trimmed), len(reqs))
	}
	trimDropped, err := eventInts(db, "dropped", "trim") // the dropped count of each trim event, in order
	must(t, err)
	binds := bindsThinkingToPrefix(c.model, nil)
	signed := strings.Contains(strings.ToLower(c.model), "claude")

	pointer := "[smarter-compact: continuing session " + c.sid + ";"
	first := c.firstTexts()
	if len(first) > 1 {
		st.multiFirst++
	}
	newCuts := 0
	var prev fwdRequest
	cache := map[string]*fwdItem{}
	for j, rec := range reqs {
		st.requests++
		if !utf8.Valid(rec.Body) {
			fail("request %d: the forwarded body is not valid UTF-8", j)
		}
		f := parseForwarded(t, c.format, rec.Body, cache)
		var own fwdRequest // the client's own request, parsed where a check needs it
		if trimmed[j] == 2 || newCuts == 0 {
			own = parseForwarded(t, c.format, sent[j], cache)
		}
		if trimmed[j] == 2 {
			newCuts++
			st.trims++
			checkNewCut(t, fail, j, c, f, own, pointer, signed, binds, trimDropped, newCuts)
		}
		if newCuts == 0 {
			// untrimmed: the client's items as they came, the standing instruction added and
			// long tool results compressed, nothing else (contract: untrimmed requests keep
			// every block)
			var fwd []fwdItem
			for k, it := range f.items {
				if k != c.pinned || c.format == "responses" && c.instructions && c.family != "codex" {
					fwd = append(fwd, it)
				}
			}
			if len(fwd) != len(own.items) {
				fail("request %d: untrimmed, but %d items for the client's %d", j, len(fwd), len(own.items))
			}
			for k := range fwd {
				if !bytes.Equal(fwd[k].raw, own.items[k].raw) && !bytes.Contains(fwd[k].raw, []byte("[smarter-compact: tool result compressed")) {
					fail("request %d: untrimmed, but item %d changed:\nsent %.300s\nfwd  %.300s", j, k, own.items[k].raw, fwd[k].raw)
				}
			}
		}

		// the standing instruction, exactly once and in its place
		inInstr := bytes.Contains(f.instructions, []byte("Context management: to fit your context window"))
		var at []int
		for k, it := range f.items {
			if it.pinned() && len(it.texts()) == 1 && it.texts()[0] == StandingInstruction {
				at = append(at, k)
			}
		}
		wantInstr := c.format == "responses" && c.instructions && c.family != "codex"
		switch {
		case wantInstr && (!inInstr || len(at) != 0):
			fail("request %d: the standing instruction belongs in instructions (there: %v, as items at %v)", j, inInstr, at)
		case !wantInstr && (inInstr || len(at) != 1 || at[0] != c.pinned):
			fail("request %d: the standing instruction belongs once at item %d (items at %v, in instructions: %v)", j, c.pinned, at, inInstr)
		}
		if wantInstr {
			var s string
			must(t, json.Unmarshal(f.instructions, &s))
			if !strings.HasSuffix(s, "\n\n"+StandingInstruction) {
				fail("request %d: instructions %.80q… do not end with the standing instruction", j, s)
			}
		}

		// the first user turn: the first unpinned items, every one, in order
		var unpinned []fwdItem
		for _, it := range f.items {
			if !it.pinned() {
				unpinned = append(unpinned, it)
			}
		}
		if len(unpinned) < len(first) {
			fail("request %d has %d unpinned items, the first turn alone has %d", j, len(unpinned), len(first))
		}
		for k, want := range first {
			it := unpinned[k]
			got := it.texts()
			if len(got) > 0 && strings.HasPrefix(got[0], pointer) {
				got = got[1:]
			}
			if it.role != "user" || strings.Join(got, "\x00") != strings.Join(want, "\x00") {
				fail("request %d: item %d of the first turn is %s %q, want user %q", j, k, it.role, got, want)
			}
		}

		// the pointer: after the first new cut, in every request, in one user item, first
		holders := 0
		for h, it := range f.items {
			if !bytes.Contains(it.raw, []byte("[smarter-compact: continuing session")) {
				continue
			}
			holders++
			texts := it.texts()
			if it.role != "user" || len(texts) < 2 || !strings.HasPrefix(texts[0], pointer) {
				fail("request %d: the pointer is not the first part of a user message: %.300s", j, it.raw)
			}
			if trimmed[j] != 2 {
				continue
			}
			// what the new cut kept: fewer items after the cut turn than the client sent is
			// a gap
			for k := len(own.items) - 1; k >= 0; k-- {
				if own.items[k].role == "user" && strings.Join(own.items[k].texts(), "\x00") == strings.Join(texts[1:], "\x00") {
					if len(f.items)-h < len(own.items)-k {
						st.gapped++
					}
					if k < c.pinned+len(first) {
						st.cutInFirst++
					}
					break
				}
			}
		}
		if holders > 1 {
			fail("request %d carries %d pointers", j, holders)
		}
		if newCuts > 0 && holders == 0 {
			fail("request %d lost the pointer after a trim", j)
		}
		if holders > 0 {
			st.pointered++
			if newCuts == 0 {
				fail("request %d carries a pointer before any trim", j)
			}
		}
		if bytes.Contains(rec.Body, []byte("[smarter-compact: tool result compressed")) {
			st.compressed++
		}
		for _, it := range f.items {
			if it.typ == "reasoning" || simStr(it.obj, "reasoning_content") != "" {
				st.reasoning++
				break
			}
		}

		// sticky prefix between trims
		if j > 0 && trimmed[j] != 2 {
			if len(f.items) < len(prev.items) {
				fail("request %d has %d items, fewer than request %d's %d without a new cut", j, len(f.items), j-1, len(prev.items))
			}
			for k := range prev.items {
				if !bytes.Equal(prev.items[k].raw, f.items[k].raw) {
					fail("request %d does not extend request %d at item %d:\nprev %.400s\ncur  %.400s", j, j-1, k, prev.items[k].raw, f.items[k].raw)
				}
			}
			if !bytes.Equal(prev.instructions, f.instructions) || !bytes.Equal(prev.tools, f.tools) {
				fail("request %d changed instructions or tools without a new cut", j)
			}
			st.extended++
		}
		prev = f
	}
	if newCuts > 0 {
		st.trimmedConversations++
	}
	if newCuts != len(trimDropped) {
		fail("%d requests made a new cut, %d trim events", newCuts, len(trimDropped))
	}

	// rows: each once, in order, one thread
	var history []json.RawMessage // the unpinned items of the last request the client sent
	for _, it := range parseForwarded(t, c.format, sent[len(sent)-1], nil).items {
		if !it.pinned() {
			history = append(history, it.raw)
		}
	}
	// stripped signed reasoning: a Claude model behind the Responses API
	if c.format == "responses" && newCuts > 0 {
		last := parseForwarded(t, c.format, reqs[len(reqs)-1].Body, cache)
		n := 0
		for _, it := range last.items {
			if it.typ == "reasoning" {
				n++
			}
		}
		m := 0
		for _, raw := range history {
			if bytes.Contains(raw, []byte(`"type":"reasoning"`)) {
				m++
			}
		}
		if n < m && bytes.Contains(reqs[0].Body, []byte(`"model":"claude`)) {
			st.stripped++
		}
	}

	// The store has the last reply too, with the rows the next request would give it. A
	// Chat client that sends reasoning_content back is known from its second request on:
	// the first reply was stored without its thinking row, so the client's copy of it
	// forks the chain and is stored again after it (a limit of storing the reply).
	var clientHistory []json.RawMessage
	forked, reasoned, unpinned := 0, false, 0
	for _, raw := range c.history() {
		var it struct {
			Type, Role string
			Reasoning  string `json:"reasoning_content"`
		}
		must(t, json.Unmarshal(raw, &it))
		if (it.Type == "" || it.Type == "message") && (it.Role == "system" || it.Role == "developer") {
			continue
		}
		unpinned++
		if c.format == "chat" && it.Role == "assistant" && it.Reasoning != "" && !reasoned {
			// no earlier reply showed that the client keeps reasoning: stored without it
			var m map[string]any
			must(t, json.Unmarshal(raw, &m))
			delete(m, "reasoning_content")
			delete(m, "thinking_blocks")
			guess := simJSON(t, m)
			clientHistory = append(clientHistory, guess)
			if unpinned > len(history) {
				continue // the last reply: never sent back, so never forked
			}
			forked += len(expectedRows(t, c.format, []json.RawMessage{guess}))
		}
		if it.Role == "assistant" && it.Reasoning != "" {
			reasoned = true
		}
		clientHistory = append(clientHistory, raw)
	}
	want := expectedRows(t, c.format, clientHistory)
	// rows past those of the last request are the last reply's
	lastRows := len(expectedRows(t, c.format, history)) + forked
	rows, err := db.Query(`SELECT role, kind, coalesce(name, ''), text, in_context, thread FROM messages ORDER BY seq`)
	must(t, err)
	var got []expectedRow
	var inCtx []bool
	threads := map[string]bool{}
	for rows.Next() {
		var r expectedRow
		var in int
		var thread string
		must(t, rows.Scan(&r.role, &r.kind, &r.name, &r.text, &in, &thread))
		got = append(got, r)
		inCtx = append(inCtx, in == 1)
		threads[thread] = true
	}
	rows.Close()
	if len(threads) != 1 {
		fail("%d threads in one conversation", len(threads))
	}
	if len(got) != len(want) {
		for k := 0; k < len(got) && k < len(want); k++ {
			if got[k] != want[k] {
				fail("%d rows stored, want %d; first difference at row %d: %+.120v, want %+.120v", len(got), len(want), k, got[k], want[k])
			}
		}
		fail("%d rows stored, want %d", len(got), len(want))
	}
	for k := range want {
		if got[k] != want[k] {
			fail("row %d is %+.200v, want %+.200v", k, got[k], want[k])
		}
	}

	// in_context of text and thinking rows against the last request's texts
	last := parseForwarded(t, c.format, reqs[len(reqs)-1].Body, cache)
	sentTexts := map[string]bool{}
	for _, it := range last.items {
		if it.pinned() {
			continue
		}
		for _, s := range it.texts() {
			sentTexts[s] = true
		}
		// Chat thinking: LiteLLM forwards thinking_blocks to Claude, not reasoning_content
		if blocks, ok := it.obj["thinking_blocks"].([]any); ok {
			for _, e := range blocks {
				sentTexts[simStr(e.(map[string]any), "thinking")] = true
			}
		} else if s := simStr(it.obj, "reasoning_content"); s != "" && !c.thinkingBlocks {
			sentTexts[s] = true
		}
		if it.typ == "reasoning" {
			var parts []string
			sum, _ := it.obj["summary"].([]any)
			for _, e := range sum {
				if s := simStr(e.(map[string]any), "text"); s != "" {
					parts = append(parts, s)
				}
			}
			sentTexts[strings.Join(parts, "\n")] = true
		}
	}
	count := map[string]int{}
	for _, r := range got {
		count[r.text]++
	}
	for k, r := range got {
		if k >= lastRows {
			if !inCtx[k] {
				fail("row %d (%s %s %.60q) of the last reply: in_context=0", k, r.role, r.kind, r.text)
			}
			continue
		}
		if (r.kind != "text" && r.kind != "thinking") || count[r.text] > 1 {
			continue
		}
		if sentTexts[r.text] != inCtx[k] {
			fail("row %d (%s %s %.60q): in_context=%v, but the last request sent it: %v", k, r.role, r.kind, r.text, inCtx[k], sentTexts[r.text])
		}
	}
}
