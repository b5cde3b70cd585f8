package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"strings"
	"testing"
)

// adList decodes the conversation list ("messages" or "input") of a forwarded body.
func adList(t testing.TB, body []byte, key string) []map[string]any {
	t.Helper()
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("forwarded body is not JSON: %v\n%s", err, body)
	}
	var list []map[string]any
	if err := json.Unmarshal(doc[key], &list); err != nil {
		t.Fatalf("%s is not a list of objects: %v", key, err)
	}
	return list
}

// chatInvariants checks a forwarded Chat body against the API's pairing rules (api-rules
// §3.2), written from the rules, not from the adapter: every tool message answers a call
// of the assistant message before its run of tool messages, every call of an assistant
// message is answered in the run of tool messages right after it, and no assistant message
// is left without content and calls. orig is the request the client sent.
func chatInvariants(t testing.TB, label string, orig, body []byte) {
	t.Helper()
	msgs := adList(t, body, "messages")
	si := 0
	for i, m := range msgs {
		role, _ := m["role"].(string)
		if s, _ := m["content"].(string); (role == "system" || role == "developer") && strings.Contains(s, StandingInstruction) {
			si++
		}
		switch role {
		case "tool":
			j := i - 1
			for j >= 0 && msgs[j]["role"] == "tool" {
				j--
			}
			if j < 0 || msgs[j]["role"] != "assistant" || !chatCallIDs(msgs[j])[m["tool_call_id"].(string)] {
				t.Fatalf("%s: tool message %d (%v) answers no call of the message before it\n%s", label, i, m["tool_call_id"], body)
			}
		case "assistant":
			ids := chatCallIDs(m)
			for j := i + 1; j < len(msgs) && msgs[j]["role"] == "tool"; j++ {
				delete(ids, msgs[j]["tool_call_id"].(string))
			}
			if len(ids) > 0 {
				t.Fatalf("%s: assistant message %d has calls without results %v\n%s", label, i, ids, body)
			}
			content := m["content"]
			if s, ok := content.(string); (content == nil || ok && s == "") && len(chatCallIDs(m)) == 0 {
				t.Fatalf("%s: assistant message %d has neither content nor calls", label, i)
			}
		}
	}
	if si != 1 {
		t.Fatalf("%s: %d standing instructions, want 1", label, si)
	}
	// the first user message of the request is kept verbatim (contract: Trim)
	if !adFirstUserInView(t, orig, "messages", msgs, "text") {
		t.Fatalf("%s: the first user message is not in the view", label)
	}
}

// adFirstUserInView reports whether the first user element of orig's list key ("messages",
// "input") is one of view's elements as it was, or once adWithoutPointer(…, partType) undoes
// the pointer on it; true when orig has no user element.
func adFirstUserInView(t testing.TB, orig []byte, key string, view []map[string]any, partType string) bool {
	t.Helper()
	for _, m := range adList(t, orig, key) {
		if m["role"] == "user" {
			for _, v := range view {
				if fmt.Sprint(v) == fmt.Sprint(m) || fmt.Sprint(adWithoutPointer(v, partType)) == fmt.Sprint(m) {
					return true
				}
			}
			return false
		}
	}
	return true
}

// adWithoutPointer undoes the pointer on a cut message (the first turn is the cut while
// it is still in flight): the leading pointer part goes, and a lone remaining text part of
// type partType becomes the string content it was.
func adWithoutPointer(m map[string]any, partType string) map[string]any {
	parts, ok := m["content"].([]any)
	if !ok || len(parts) < 2 {
		return m
	}
	first, _ := parts[0].(map[string]any)
	if s, _ := first["text"].(string); first["type"] != partType || !strings.HasPrefix(s, "[smarter-compact: continuing session ") {
		return m
	}
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	out["content"] = parts[1:]
	if rest, _ := parts[1].(map[string]any); len(parts) == 2 && rest["type"] == partType && len(rest) == 2 {
		out["content"] = rest["text"]
	}
	return out
}

func chatCallIDs(m map[string]any) map[string]bool {
	ids := map[string]bool{}
	calls, _ := m["tool_calls"].([]any)
	for _, c := range calls {
		ids[c.(map[string]any)["id"].(string)] = true
	}
	return ids
}

// chatGen writes a random agent conversation in the Chat format and says where a client
// would send it (after a user message, after a batch of tool results).
type chatGen struct {
	rng   *rand.Rand
	msgs  []string
	sends []int
	call  int
}

func (g *chatGen) add(m string) { g.msgs = append(g.msgs, m) }

func (g *chatGen) turn(n int) {
	rng := g.rng
	text := fmt.Sprintf("turn %d: please work on item %d", n, rng.Intn(1000))
	if rng.Intn(3) == 0 {
		g.add(fmt.Sprintf(`{"role":"user","content":[{"type":"text","text":%q},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}`, text))
	} else {
		g.add(fmt.Sprintf(`{"role":"user","content":%q}`, text))
	}
	if rng.Intn(6) == 0 {
		g.add(`{"role":"system","content":"Environment changed."}`)
	}
	g.sends = append(g.sends, len(g.msgs))
	for s, steps := 0, rng.Intn(7); s < steps; s++ {
		k := 1 + rng.Intn(3)
		var calls []string
		var ids []string
		for c := 0; c < k; c++ {
			g.call++
			id := fmt.Sprintf("call_%d", g.call)
			ids = append(ids, id)
			calls = append(calls, fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls %d\"}"}}`, id, g.call))
		}
		think := ""
		if rng.Intn(2) == 0 {
			think = fmt.Sprintf(`,"reasoning_content":"step %d","thinking_blocks":[{"type":"thinking","thinking":"step %d","signature":"c2ln"}]`, s, s)
		}
		content := "null"
		if rng.Intn(3) == 0 {
			content = `"Running it."`
		}
		g.add(fmt.Sprintf(`{"role":"assistant","content":%s%s,"tool_calls":[%s]}`, content, think, strings.Join(calls, ",")))
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		for _, id := range ids {
			g.add(fmt.Sprintf(`{"role":"tool","tool_call_id":%q,"content":%q}`, id, strings.Repeat("output line of "+id+"\n", 5+rng.Intn(60))))
		}
		g.sends = append(g.sends, len(g.msgs))
	}
	if rng.Intn(8) != 0 {
		think := ""
		if rng.Intn(2) == 0 {
			think = `,"thinking_blocks":[{"type":"thinking","thinking":"wrap up","signature":"c2ln"}]`
		}
		g.add(fmt.Sprintf(`{"role":"assistant","content":"Done with turn %d."%s}`, n, think))
	}
}

func (g *chatGen) body(n int, system bool) []byte {
	msgs := g.msgs[:n]
	if system {
		msgs = append([]string{`{"role":"system","content":"You are an agent."}`}, msgs...)
	}
	return []byte(`{"model":"claude-sonnet-4-5","messages":[` + strings.Join(msgs, ",") + `],"stream":true}`)
}

// LiteLLM's thinking_blocks (signed Anthropic thinking) leave every kept assistant message
// before the latest assistant run at trim time; reasoning_content stays; a message left
// with nothing is dropped; the latest run goes out unchanged; an untrimmed request keeps
// every block; a model that binds thinking to its prefix loses it from the latest run too.
func TestChatThinkingBlocksStrip(t *testing.T) {
	tb := func(s string) string {
		return fmt.Sprintf(`"thinking_blocks":[{"type":"thinking","thinking":%q,"signature":"c2ln"}]`, s)
	}
	msgs := []string{
		`{"role":"user","content":"task"}`,
		`{"role":"assistant","content":"r1",` + tb("t-r1") + `}`,
		`{"role":"user","content":"q2"}`,
		`{"role":"assistant","content":"r2","reasoning_content":"rc-r2",` + tb("t-r2") + `}`,
		`{"role":"user","content":"q3"}`, // 4: the cut
		// 5, 6: the step right after the cut turn, dropped by the in-turn gap (5 steps)
		`{"role":"assistant","content":null,` + tb("t-0") + `,"tool_calls":[{"id":"c0","type":"function","function":{"name":"Bash","arguments":"{}"}}]}`,
		`{"role":"tool","tool_call_id":"c0","content":"o0"}`,
		`{"role":"assistant","content":null,` + tb("t-only") + `}`, // left with nothing: dropped
		`{"role":"assistant","content":null,"reasoning_content":"rc-a",` + tb("t-a") + `,"tool_calls":[{"id":"c1","type":"function","function":{"name":"Bash","arguments":"{}"}}]}`,
		`{"role":"tool","tool_call_id":"c1","content":"o1"}`,
		`{"role":"assistant","content":null,"reasoning_content":"rc-only"}`,
		`{"role":"assistant","content":null,` + tb("t-b") + `,"tool_calls":[{"id":"c2","type":"function","function":{"name":"Bash","arguments":"{}"}}]}`,
		`{"role":"tool","tool_call_id":"c2","content":"o2"}`,
	}
	body := func(model string, n int) []byte {
		return []byte(`{"model":"` + model + `","messages":[` + strings.Join(msgs[:n], ",") + `]}`)
	}
	thinking := func(m map[string]any) string {
		blocks, _ := m["thinking_blocks"].([]any)
		var out []string
		for _, b := range blocks {
			out = append(out, b.(map[string]any)["thinking"].(string))
		}
		return strings.Join(out, ",")
	}
	summary := func(view []map[string]any) string {
		var out []string
		for _, m := range view {
			if m["role"] == "system" {
				continue
			}
			s := fmt.Sprint(m["role"], ":", m["content"])
			if th := thinking(m); th != "" {
				s += " tb=" + th
			}
			if rc, ok := m["reasoning_content"].(string); ok {
				s += " rc=" + rc
			}
			out = append(out, s)
		}
		return strings.Join(out, " | ")
	}

	t.Run("untrimmed keeps everything", func(t *testing.T) {
		e := newAdEnv(t, testSettings(10_000_000))
		res := e.send(t, adChat, adHeader("tb-0"), body("claude-sonnet-4-5", len(msgs)), false)
		for i, m := range adList(t, res.body(), "messages")[1:] {
			var want map[string]any
			must(t, json.Unmarshal([]byte(msgs[i]), &want))
			if fmt.Sprint(m) != fmt.Sprint(want) {
				t.Fatalf("message %d changed without a trim: %v", i, m)
			}
		}
	})
	t.Run("trim strips older kept messages", func(t *testing.T) {
		e := newAdEnv(t, testSettings(10_000_000))
		res := e.send(t, adChat, adHeader("tb-1"), body("claude-sonnet-4-5", len(msgs)), true)
		got := summary(adList(t, res.body(), "messages"))
		want := "user:task | assistant:r2 rc=rc-r2 | user:[map[text:" + adContractPointer(t, "tb-1", 4) + " type:text] map[text:q3 type:text]]" +
			" | assistant:<nil> rc=rc-a | tool:o1 | assistant:<nil> rc=rc-only | assistant:<nil> tb=t-b | tool:o2"
		if got != want {
			t.Fatalf("view\n got %s\nwant %s", got, want)
		}
	})
	t.Run("a binding model strips the latest run too", func(t *testing.T) {
		e := newAdEnv(t, testSettings(10_000_000))
		res := e.send(t, adChat, adHeader("tb-2"), body("claude-opus-5-5", len(msgs)), true)
		got := summary(adList(t, res.body(), "messages"))
		if strings.Contains(got, "tb=") {
			t.Fatalf("thinking_blocks left in the view of a binding model: %s", got)
		}
	})
	t.Run("thinking after the trim stays", func(t *testing.T) {
		e := newAdEnv(t, testSettings(10_000_000))
		e.send(t, adChat, adHeader("tb-3"), body("claude-sonnet-4-5", len(msgs)), true)
		msgs = append(msgs, `{"role":"assistant","content":"done",`+tb("t-late")+`}`, `{"role":"user","content":"more"}`)
		defer func() { msgs = msgs[:len(msgs)-2] }()
		res := e.send(t, adChat, adHeader("tb-3"), body("claude-sonnet-4-5", len(msgs)), false)
		got := summary(adList(t, res.body(), "messages"))
		if !strings.Contains(got, "tb=t-b") || !strings.Contains(got, "tb=t-late") || strings.Contains(got, "tb=t-a") {
			t.Fatalf("the strip point moved after the trim: %s", got)
		}
	})
}

// The session id follows the contract's order of sources, then Codex's session-id and
// thread-id, and the trim state records the source (issue 4, Session ids), in both
// OpenAI formats.
func TestOpenAISessionIDSource(t *testing.T) {
	type tc struct {
		name        string
		hdr         map[string]string
		meta, pck   string
		sid, source string
	}
	all := map[string]string{"Session_id": "h-sess", "X-Session-Id": "h-xs", "Conversation_id": "h-conv", "Session-Id": "h-dash", "Thread-Id": "h-thread"}
	with := func(extra map[string]string, drop ...string) map[string]string {
		m := map[string]string{}
		for k, v := range all {
			m[k] = v
		}
		for _, d := range drop {
			delete(m, d)
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	jsonMeta := `{"user_id":"{\"device_id\":\"d\",\"session_id\":\"m-json\"}"}`
	cases := []tc{
		{"our header first", with(map[string]string{"X-Smarter-Compact-Session-Id": "ours", "X-Claude-Code-Session-Id": "cc"}), jsonMeta, "pck", "ours", "x-smarter-compact-session-id"},
		{"blank header falls through", with(map[string]string{"X-Smarter-Compact-Session-Id": "  \t", "X-Claude-Code-Session-Id": "cc"}), jsonMeta, "pck", "cc", "x-claude-code-session-id"},
		{"metadata json", with(nil), jsonMeta, "pck", "m-json", "metadata"},
		{"metadata legacy", with(nil), `{"user_id":"user_abc_account_x_session_0123abcd-ef"}`, "pck", "0123abcd-ef", "metadata"},
		{"prompt_cache_key", with(nil), "", "019a/b c", "019a_b_c", "prompt_cache_key"},
		{"session_id header", with(nil), "", "", "h-sess", "session_id"},
		{"x-session-id", with(nil, "Session_id"), "", "", "h-xs", "x-session-id"},
		{"conversation_id", with(nil, "Session_id", "X-Session-Id"), "", "", "h-conv", "conversation_id"},
		{"session-id", with(nil, "Session_id", "X-Session-Id", "Conversation_id"), "", "", "h-dash", "session-id"},
		{"thread-id", with(nil, "Session_id", "X-Session-Id", "Conversation_id", "Session-Id"), "", "", "h-thread", "thread-id"},
		{"fingerprint", nil, "", "", "", "fingerprint"},
	}
	for _, f := range []struct {
		name string
		tg   target
		body func(meta, pck string) string
	}{
		{"chat", adChat, func(meta, pck string) string {
			return `{"model":"gpt-5.4","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]` + adOpt("metadata", meta) + adOptS("prompt_cache_key", pck) + `}`
		}},
		{"responses", adCodex, func(meta, pck string) string {
			return `{"model":"gpt-5.4","instructions":"s","input":[{"role":"user","content":"hi"}]` + adOpt("metadata", meta) + adOptS("prompt_cache_key", pck) + `}`
		}},
	} {
		for _, c := range cases {
			t.Run(f.name+"/"+c.name, func(t *testing.T) {
				e := newAdEnv(t, testSettings(10_000_000))
				h := http.Header{}
				for k, v := range c.hdr {
					h.Set(k, v)
				}
				_, sess, err := e.p.rewriteAs(f.tg, h, []byte(f.body(c.meta, c.pck)))
				must(t, err)
				sid := sess.sid
				if c.sid != "" && sid != c.sid || c.sid == "" && !(strings.HasPrefix(sid, "fp-") && len(sid) == 19) {
					t.Fatalf("session id %q, want %q", sid, c.sid)
				}
				must(t, e.p.Close())
				b, err := e.root.LoadTrimState(sid)
				must(t, err)
				var st struct{ Source string }
				if err := json.Unmarshal(b, &st); err != nil || st.Source != c.source {
					t.Fatalf("trim state %s: source %q, want %q", b, st.Source, c.source)
				}
			})
		}
	}
}

func adOpt(key, raw string) string {
	if raw == "" {
		return ""
	}
	return `,"` + key + `":` + raw
}

func adOptS(key, s string) string {
	if s == "" {
		return ""
	}
	b, _ := json.Marshal(s)
	return `,"` + key + `":` + string(b)
}

// adUsage waits for the session's usage event and returns its counts ("NULL" for null).
func adUsage(t *testing.T, h *adHTTP, sid string) string {
	t.Helper()
	var got string
	waitFor(t, func() bool {
		var in, read, write, out, trimmed string
		err := adDB(t, h.root, sid).QueryRow(`SELECT coalesce(input_tokens,'NULL'), coalesce(cache_read_tokens,'NULL'),
			coalesce(cache_creation_tokens,'NULL'), coalesce(output_tokens,'NULL'), coalesce(trimmed,'NULL') FROM events WHERE kind='usage'`).Scan(&in, &read, &write, &out, &trimmed)
		if err != nil {
			return false
		}
		got = "input=" + in + " read=" + read + " write=" + write + " output=" + out + " trimmed=" + trimmed
		return true
	})
	return got
}

// LiteLLM's Chat usage for an Anthropic model reports the cache split in top-level
// cache_read_input_tokens / cache_creation_input_tokens (prompt_tokens includes both).
// The contract's table (Events, usage counts, LiteLLM Usage row): cache_read_tokens =
// cache_read_input_tokens, else prompt_tokens_details.cached_tokens; cache_creation_tokens
// = cache_creation_input_tokens, else prompt_tokens_details.cache_creation_tokens /
// cache_write_tokens; input_tokens = prompt_tokens minus read and creation.
func TestChatUsageTapLiteLLMCacheCreation(t *testing.T) {
	const jsonBody = `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":5,"total_tokens":1005,"prompt_tokens_details":{"cached_tokens":600},"cache_creation_input_tokens":300,"cache_read_input_tokens":600}}`
	up := newAdUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, jsonBody)
	})
	h := newAdHTTP(t, testSettings(10_000_000), allOn{}, up.srv.URL)
	h.post(t, "/v1/chat/completions", []byte(`{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`), map[string]string{"X-Session-Id": "chat-usage-ll"})
	if got, want := adUsage(t, h, "chat-usage-ll"), "input=100 read=600 write=300 output=5 trimmed=0"; got != want {
		t.Errorf("usage %s, want %s", got, want)
	}
}

// Legacy function calling (api-rules §3.1, role "function"): an assistant message's
// function_call is a tool call like a tool_calls entry. Its row is a tool_use named by the
// function (contract: Rows), and a trim never leaves a function message without the call
// before it: an older assistant message that loses its thinking_blocks still carries its
// function_call, so it must not be dropped as empty.
func TestChatLegacyFunctionCall(t *testing.T) {
	fc := func(name, args, think string) string {
		tb := ""
		if think != "" {
			tb = `,"thinking_blocks":[{"type":"thinking","thinking":"` + think + `","signature":"c2ln"}]`
		}
		return `{"role":"assistant","content":null` + tb + `,"function_call":{"name":"` + name + `","arguments":` + args + `}}`
	}
	fr := func(name, out string) string {
		return `{"role":"function","name":"` + name + `","content":"` + out + `"}`
	}
	t.Run("rows", func(t *testing.T) {
		e := newAdEnv(t, testSettings(10_000_000))
		body := `{"model":"gpt-5.4","messages":[{"role":"user","content":"weather?"},` + fc("get_weather", `"{\"city\": \"Paris\"}"`, "") + `,` +
			fr("get_weather", "sunny") + `,{"role":"assistant","content":"It is sunny."}]}`
		e.send(t, adChat, adHeader("legacy-rows"), []byte(body), false)
		got := adRows(t, e.root, "legacy-rows")
		want := []string{"user/text/-/weather?", `assistant/tool_use/get_weather/{"city":"Paris"}`, "tool/tool_result/get_weather/sunny", "assistant/text/-/It is sunny."}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("rows\n got %q\nwant %q", got, want)
		}
	})
	t.Run("a trim keeps the call of a kept result", func(t *testing.T) {
		e := newAdEnv(t, testSettings(10_000_000))
		body := `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"task"},{"role":"assistant","content":"r1"},` +
			`{"role":"user","content":"q2"},{"role":"assistant","content":"r2"},{"role":"user","content":"q3"},` +
			fc("get_weather", `"{}"`, "first") + `,` + fr("get_weather", "sunny") + `,` +
			fc("get_time", `"{}"`, "second") + `,` + fr("get_time", "noon") + `]}`
		res := e.send(t, adChat, adHeader("legacy-trim"), []byte(body), true)
		msgs := adList(t, res.body(), "messages")
		for i, m := range msgs {
			if m["role"] != "function" {
				continue
			}
			prev := msgs[i-1]
			call, _ := prev["function_call"].(map[string]any)
			if prev["role"] != "assistant" || call["name"] != m["name"] {
				t.Fatalf("function message %d (%v) is not preceded by its call\n%s", i, m["name"], res.body())
			}
		}
	})
}

// adFatal stands in for a test so an invariant checker's failure can be observed.
type adFatal struct {
	testing.TB
	msg string
}

func (r *adFatal) Helper()                           {}
func (r *adFatal) Fatalf(format string, args ...any) { r.msg = fmt.Sprintf(format, args...); panic(r) }
func (r *adFatal) Fatal(args ...any)                 { r.msg = fmt.Sprint(args...); panic(r) }

// adCatches runs check and returns its failure message, "" when it passed.
func adCatches(t *testing.T, check func(tb testing.TB)) (msg string) {
	rec := &adFatal{TB: t}
	defer func() {
		if v := recover(); v != nil {
			if v != any(rec) {
				panic(v)
			}
			msg = rec.msg
		}
	}()
	check(rec)
	return ""
}

// The invariant checkers the random tests rely on do fail on broken views, so a passing
// run means something.
func TestAdapterInvariantCheckersCatchBrokenViews(t *testing.T) {
	si := `"` + adJSONInner(StandingInstruction) + `"`
	chatOrig := `{"messages":[{"role":"user","content":"task"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"x","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"o"}]}`
	chatViews := map[string]string{
		"":                          `{"messages":[{"role":"system","content":` + si + `},{"role":"user","content":"task"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"x","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"o"}]}`,
		"answers no call":           `{"messages":[{"role":"system","content":` + si + `},{"role":"user","content":"task"},{"role":"tool","tool_call_id":"c1","content":"o"}]}`,
		"calls without results":     `{"messages":[{"role":"system","content":` + si + `},{"role":"user","content":"task"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"x","arguments":"{}"}}]}]}`,
		"standing instructions":     `{"messages":[{"role":"user","content":"task"}]}`,
		"first user message":        `{"messages":[{"role":"system","content":` + si + `},{"role":"user","content":"other"}]}`,
		"neither content nor calls": `{"messages":[{"role":"system","content":` + si + `},{"role":"user","content":"task"},{"role":"assistant","content":null}]}`,
	}
	for want, view := range chatViews {
		got := adCatches(t, func(tb testing.TB) { chatInvariants(tb, "x", []byte(chatOrig), []byte(view)) })
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("chat view %s: checker said %q, want %q", view, got, want)
		}
	}
	dev := `{"type":"message","role":"developer","content":[{"type":"input_text","text":` + si + `}]}`
	user := `{"type":"message","role":"user","content":[{"type":"input_text","text":"task"}]}`
	respOrig := `{"input":[` + user + `]}`
	respViews := map[string]string{
		"":                                 `{"input":[` + dev + `,` + user + `,{"type":"reasoning","id":"rs_1","summary":[]},{"type":"function_call","id":"fc_1","call_id":"c1","name":"x","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"o"}]}`,
		"without its call before it":       `{"input":[` + dev + `,` + user + `,{"type":"function_call_output","call_id":"c1","output":"o"}]}`,
		"without its output":               `{"input":[` + dev + `,` + user + `,{"type":"custom_tool_call","call_id":"c1","name":"x","input":""}]}`,
		"reasoning item is last":           `{"input":[` + dev + `,` + user + `,{"type":"reasoning","id":"rs_1","summary":[]}]}`,
		"not followed by what it produced": `{"input":[` + dev + `,` + user + `,{"type":"reasoning","id":"rs_1","summary":[]},` + user + `]}`,
		"keeps its id":                     `{"input":[` + dev + `,` + user + `,{"type":"function_call","id":"fc_1","call_id":"c1","name":"x","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"o"}]}`,
		"standing instructions":            `{"input":[` + user + `]}`,
		"first user item":                  `{"input":[` + dev + `]}`,
	}
	for want, view := range respViews {
		got := adCatches(t, func(tb testing.TB) { respInvariants(tb, "x", []byte(respOrig), []byte(view)) })
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("responses view %s: checker said %q, want %q", view, got, want)
		}
	}
}

// Legacy function calling names only the function, so pairing by name made two calls of
// the same function in different turns one pair: every cut whose kept part called it again
// was rejected, and a forced trim of a long conversation dropped nothing.
//
// Regression test from the review of the OpenAI adapters.
func TestChatLegacyFunctionCallsPairPerCall(t *testing.T) {
	var msgs []string
	for k := 0; k < 6; k++ {
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"user","content":"question %d"}`, k),
			`{"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":"{}"}}`,
			fmt.Sprintf(`{"role":"function","name":"get_weather","content":"sunny %d"}`, k),
			fmt.Sprintf(`{"role":"assistant","content":"answer %d"}`, k))
	}
	msgs = append(msgs, `{"role":"user","content":"question 6"}`,
		`{"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":"{}"}}`,
		`{"role":"function","name":"get_weather","content":"rainy"}`)
	body := []byte(`{"model":"gpt-4o","messages":[` + strings.Join(msgs, ",") + `]}`)
	e := newAdEnv(t, testSettings(1_000_000))
	res := e.send(t, adChat, adHeader("legacy"), body, true)
	if res.trimmed != 2 {
		t.Fatalf("forced trim of 7 turns dropped nothing (trimmed = %d): every call of %s is one pair",
			res.trimmed, "get_weather")
	}
}
