package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func respIsCall(it map[string]any) bool {
	t, _ := it["type"].(string)
	_, hasCallID := it["call_id"]
	return strings.HasSuffix(t, "_call") && hasCallID
}

func respIsOutput(it map[string]any) bool {
	t, _ := it["type"].(string)
	return strings.HasSuffix(t, "_call_output")
}

// respIsModelOutput: what a response produces (reasoning, an assistant message, a call).
func respIsModelOutput(it map[string]any) bool {
	t, _ := it["type"].(string)
	return t == "reasoning" || t == "message" && it["role"] == "assistant" || strings.HasSuffix(t, "_call")
}

// respInvariants checks a forwarded Responses body against the API's rules (api-rules
// §4.2), written from the rules: calls and outputs pair by call_id in both directions, a
// reasoning item is followed by the item it produced (never last), an item that carries
// its fc_/msg_ id has its reasoning item before it in the same response, the standing
// instruction is there once, and the first user item of the request is kept.
func respInvariants(t testing.TB, label string, orig, body []byte) {
	t.Helper()
	items := adList(t, body, "input")
	calls, outs := map[string]int{}, map[string]int{}
	for i, it := range items {
		id, _ := it["call_id"].(string)
		switch {
		case respIsCall(it):
			calls[id] = i
		case respIsOutput(it):
			outs[id] = i
			if c, ok := calls[id]; !ok || c > i {
				t.Fatalf("%s: output %d (%s) without its call before it\n%s", label, i, id, body)
			}
		}
		if it["type"] == "reasoning" {
			if i == len(items)-1 {
				t.Fatalf("%s: a reasoning item is last\n%s", label, body)
			}
			if next := items[i+1]; !respIsModelOutput(next) || next["type"] == "reasoning" {
				t.Fatalf("%s: reasoning item %d is not followed by what it produced: %v", label, i, next)
			}
		}
		if _, hasID := it["id"]; hasID && respIsModelOutput(it) && it["type"] != "reasoning" {
			j := i - 1
			for j >= 0 && respIsModelOutput(items[j]) && items[j]["type"] != "reasoning" {
				j--
			}
			if j < 0 || items[j]["type"] != "reasoning" {
				t.Fatalf("%s: item %d keeps its id %v without its reasoning item\n%s", label, i, it["id"], body)
			}
		}
	}
	for id, c := range calls {
		if o, ok := outs[id]; !ok || o < c {
			t.Fatalf("%s: call %s without its output\n%s", label, id, body)
		}
	}
	var doc struct {
		Instructions *string `json:"instructions"`
	}
	must(t, json.Unmarshal(body, &doc))
	si := 0
	if doc.Instructions != nil {
		si = strings.Count(*doc.Instructions, StandingInstruction)
	}
	for _, it := range items {
		if it["role"] == "developer" {
			si += strings.Count(fmt.Sprint(it["content"]), StandingInstruction)
		}
	}
	if si != 1 {
		t.Fatalf("%s: %d standing instructions, want 1", label, si)
	}
	if !adFirstUserInView(t, orig, "input", items, "input_text") {
		t.Fatalf("%s: the first user item is not in the view\n%s", label, body)
	}
}

// respGen writes a random Codex-like conversation: reasoning items (with ids and
// encrypted content), preambles, function / custom / local shell calls and their outputs.
type respGen struct {
	rng   *rand.Rand
	items []string
	sends []int
	n     int
}

func (g *respGen) add(s string) { g.items = append(g.items, s) }

func (g *respGen) reasoning() bool {
	if g.rng.Intn(5) < 3 {
		g.n++
		g.add(fmt.Sprintf(`{"type":"reasoning","id":"rs_%d","summary":[{"type":"summary_text","text":"thinking %d"}],"encrypted_content":"gAAA%d"}`, g.n, g.n, g.n))
		return true
	}
	return false
}

func (g *respGen) msg(text string, withID bool) {
	g.n++
	id := ""
	if withID {
		id = fmt.Sprintf(`"id":"msg_%d",`, g.n)
	}
	g.add(fmt.Sprintf(`{"type":"message",%s"role":"assistant","content":[{"type":"output_text","text":%q}]}`, id, text))
}

func (g *respGen) turn(k int) {
	rng := g.rng
	if k == 0 {
		g.add(`{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"}]}`)
	}
	g.add(fmt.Sprintf(`{"type":"message","role":"user","content":[{"type":"input_text","text":"turn %d: do item %d"}]}`, k, rng.Intn(100)))
	g.sends = append(g.sends, len(g.items))
	for s, steps := 0, rng.Intn(7); s < steps; s++ {
		r := g.reasoning()
		if rng.Intn(5) == 0 {
			g.msg("Working on it.", r)
		}
		var outs []string
		for c, nc := 0, 1+rng.Intn(3); c < nc; c++ {
			if c > 0 && r && rng.Intn(2) == 0 {
				// reasoning between the parallel calls of one response: a step start whose
				// boundary the earlier call's output (after it) must not be split from
				g.n++
				g.add(fmt.Sprintf(`{"type":"reasoning","id":"rs_%d","summary":[],"encrypted_content":"gBBB%d"}`, g.n, g.n))
			}
			g.n++
			id := ""
			switch rng.Intn(3) {
			case 0:
				if r {
					id = fmt.Sprintf(`"id":"fc_%d",`, g.n)
				}
				g.add(fmt.Sprintf(`{"type":"function_call",%s"call_id":"call_%d","name":"shell","arguments":"{\"command\":[\"ls\",\"%d\"]}"}`, id, g.n, g.n))
				outs = append(outs, fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%d","output":%q}`, g.n, strings.Repeat("file\n", 3+rng.Intn(80))))
			case 1:
				if r {
					id = fmt.Sprintf(`"id":"ctc_%d",`, g.n)
				}
				g.add(fmt.Sprintf(`{"type":"custom_tool_call",%s"call_id":"call_%d","name":"apply_patch","input":"*** Begin Patch\n*** End Patch"}`, id, g.n))
				outs = append(outs, fmt.Sprintf(`{"type":"custom_tool_call_output","call_id":"call_%d","output":"Done!"}`, g.n))
			default:
				if r {
					id = fmt.Sprintf(`"id":"lsh_%d",`, g.n)
				}
				g.add(fmt.Sprintf(`{"type":"local_shell_call",%s"call_id":"call_%d","status":"completed","action":{"type":"exec","command":["ls"],"env":{}}}`, id, g.n))
				outs = append(outs, fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%d","output":"ok"}`, g.n))
			}
		}
		rng.Shuffle(len(outs), func(i, j int) { outs[i], outs[j] = outs[j], outs[i] })
		for _, o := range outs {
			g.add(o)
		}
		g.sends = append(g.sends, len(g.items))
	}
	if rng.Intn(8) != 0 {
		r := g.reasoning()
		g.msg(fmt.Sprintf("Done with turn %d.", k), r)
	}
}

// respIDs summarizes a view: each item as type[:id], reasoning by its id.
func respIDs(t testing.TB, body []byte) string {
	var out []string
	for _, it := range adList(t, body, "input") {
		s, _ := it["type"].(string)
		if s == "" {
			s = "message"
		}
		if r, ok := it["role"].(string); ok {
			s += "/" + r
		}
		if id, ok := it["id"].(string); ok {
			s += ":" + id
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// The linkage rule (api-rules §4.2): an item a response produced after a reasoning item
// names it by its fc_/msg_ id; when the view leaves the reasoning out, the item loses its
// "id" member; when the reasoning stays, the id stays.
func TestResponsesLinkageIDRemoval(t *testing.T) {
	dev := `{"type":"message","role":"developer","content":[{"type":"input_text","text":"perm"}]}`
	user := func(s string) string {
		return `{"type":"message","role":"user","content":[{"type":"input_text","text":"` + s + `"}]}`
	}
	rs := func(n int) string {
		return fmt.Sprintf(`{"type":"reasoning","id":"rs_%d","summary":[{"type":"summary_text","text":"s%d"}],"encrypted_content":"e%d"}`, n, n, n)
	}
	fc := func(n int) string {
		return fmt.Sprintf(`{"type":"function_call","id":"fc_%d","call_id":"c%d","name":"shell","arguments":"{}"}`, n, n)
	}
	out := func(n int) string {
		return fmt.Sprintf(`{"type":"function_call_output","call_id":"c%d","output":"o%d"}`, n, n)
	}
	msg := func(n int) string {
		return fmt.Sprintf(`{"type":"message","id":"msg_%d","role":"assistant","content":[{"type":"output_text","text":"m%d"}]}`, n, n)
	}
	plain := func(n int) string {
		return fmt.Sprintf(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"p%d"}]}`, n)
	}
	body := func(model string, items ...string) []byte {
		return []byte(`{"model":"` + model + `","input":[` + dev + `,` + strings.Join(items, ",") + `]}`)
	}
	const si = "message/developer"
	cases := []struct {
		name, model string
		items       []string
		want        string
	}{
		{"the reply before the cut loses the id of its dropped reasoning", "gpt-5.4",
			[]string{user("a"), rs(1), fc(1), out(1), rs(2), msg(2), user("b")},
			"message/developer " + si + " message/user message/assistant message/user"},
		{"kept reasoning keeps the ids after it", "gpt-5.4",
			[]string{user("a"), plain(1), user("b"), plain(2), user("c"), rs(2), fc(2), out(2), rs(3), msg(3), fc(3), out(3)},
			"message/developer " + si + " message/user message/assistant message/user reasoning:rs_2 function_call:fc_2 function_call_output reasoning:rs_3 message/assistant:msg_3 function_call:fc_3 function_call_output"},
		{"stripped signed reasoning (Claude) takes the ids after it", "claude-sonnet-4-5",
			[]string{user("a"), plain(1), user("b"), plain(2), user("c"), rs(2), msg(2), fc(2), out(2), rs(3), fc(3), out(3)},
			"message/developer " + si + " message/user message/assistant message/user message/assistant function_call function_call_output reasoning:rs_3 function_call:fc_3 function_call_output"},
		{"the in-turn gap drops a reasoning step and keeps the call after its preamble", "gpt-5.4",
			[]string{user("a"), plain(1), user("b"), plain(2), user("c"), rs(2), msg(2), fc(2), out(2), rs(4), fc(4), out(4), rs(5), fc(5), out(5), rs(6), fc(6), out(6)},
			"message/developer " + si + " message/user message/assistant message/user function_call function_call_output reasoning:rs_4 function_call:fc_4 function_call_output reasoning:rs_5 function_call:fc_5 function_call_output reasoning:rs_6 function_call:fc_6 function_call_output"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newAdEnv(t, testSettings(1_000_000))
			in := body(tc.model, tc.items...)
			res := e.send(t, adResponses, adHeader("link"), in, true)
			if res.trimmed != 2 {
				t.Fatalf("trimmed = %d", res.trimmed)
			}
			if got := respIDs(t, res.body()); got != tc.want {
				t.Fatalf("view\n got %s\nwant %s", got, tc.want)
			}
			respInvariants(t, tc.name, in, res.body())
		})
	}
}

// Signed reasoning (contract: Trim, Responses row): a reasoning item with encrypted_content
// is LiteLLM's signed Anthropic thinking only for a Claude model, and only then leaves the
// older kept steps; OpenAI's encrypted reasoning and a Claude reasoning item without
// encrypted content stay.
func TestResponsesSignedReasoningClaudeOnly(t *testing.T) {
	items := []string{
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"a"}]}`,
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}`,
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"a2"}]}`,
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok2"}]}`,
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"b"}]}`,
		`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"enc1"}`,
		`{"type":"function_call","call_id":"c1","name":"shell","arguments":"{}"}`,
		`{"type":"function_call_output","call_id":"c1","output":"o1"}`,
		`{"type":"reasoning","id":"rs_2","summary":[{"type":"summary_text","text":"plain"}]}`,
		`{"type":"function_call","call_id":"c2","name":"shell","arguments":"{}"}`,
		`{"type":"function_call_output","call_id":"c2","output":"o2"}`,
		`{"type":"reasoning","id":"rs_3","summary":[],"encrypted_content":"enc3"}`,
		`{"type":"function_call","call_id":"c3","name":"shell","arguments":"{}"}`,
		`{"type":"function_call_output","call_id":"c3","output":"o3"}`,
	}
	for _, tc := range []struct {
		model, want string
	}{
		{"gpt-5.4", "rs_1 rs_2 rs_3"},
		{"o3", "rs_1 rs_2 rs_3"},
		{"gpt-5.3-codex", "rs_1 rs_2 rs_3"},
		{"claude-sonnet-4-5", "rs_2 rs_3"},
		{"anthropic/Claude-Opus-4-1", "rs_2 rs_3"},
		{"bedrock/us.anthropic.claude-haiku-4-5", "rs_2 rs_3"},
	} {
		t.Run(tc.model, func(t *testing.T) {
			e := newAdEnv(t, testSettings(1_000_000))
			in := []byte(`{"model":"` + tc.model + `","instructions":"x","input":[` + strings.Join(items, ",") + `]}`)
			res := e.send(t, adResponses, adHeader("signed"), in, true)
			var got []string
			for _, it := range adList(t, res.body(), "input") {
				if it["type"] == "reasoning" {
					got = append(got, it["id"].(string))
				}
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("reasoning items in the view: %v, want %s", got, tc.want)
			}
			respInvariants(t, tc.model, in, res.body())
			// without a trim, nothing is stripped
			e2 := newAdEnv(t, testSettings(1_000_000))
			if res := e2.send(t, adResponses, adHeader("signed"), in, false); !bytes.Contains(res.body(), []byte(`"rs_1"`)) {
				t.Fatal("an untrimmed request lost its reasoning")
			}
		})
	}
}

// Requests that carry their history upstream pass through byte for byte and store nothing
// (issue 4, never rewrite): a compaction item, a compaction_trigger item, a
// previous_response_id continuation; also zstd-encoded on the Codex route.
func TestResponsesPassThroughUntouched(t *testing.T) {
	up := newAdUpstream(t, nil)
	h := newAdHTTP(t, testSettings(0), allOn{}, up.srv.URL)
	bodies := map[string]string{
		"compaction":           `{"model":"gpt-5.4","instructions":"x","input":[{"type":"compaction","id":"cmp_1","encrypted_content":"gAAAA"},{"type":"message","role":"user","content":[{"type":"input_text","text":"go on"}]}],"store":false}`,
		"compaction_trigger":   `{"model":"gpt-5.4","input":[{"role":"user","content":"a"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b"}]},{"type" : "compaction_trigger"}]}`,
		"previous_response_id": `{"model":"gpt-5.4","previous_response_id":"resp_123","input":[{"role":"user","content":"next"}]}`,
	}
	enc, err := zstd.NewWriter(nil)
	must(t, err)
	for name, body := range bodies {
		for _, route := range []string{"/v1/responses", "/codex/responses"} {
			sid := "pass-" + strings.ReplaceAll(name, "_", "-")
			r, _ := h.post(t, route, []byte(body), map[string]string{"Session_id": sid})
			if got := up.last(t); r.StatusCode != 200 || string(got.Body) != body {
				t.Errorf("%s on %s: upstream got %s", name, route, got.Body)
			}
			z := enc.EncodeAll([]byte(body), nil)
			h.post(t, route, z, map[string]string{"Session_id": sid, "Content-Encoding": "zstd"})
			if got := up.last(t); !bytes.Equal(got.Body, z) || got.Header.Get("Content-Encoding") != "zstd" {
				t.Errorf("%s on %s (zstd): the encoded body changed", name, route)
			}
			if n := adRowCount(t, h.root, sid); n != 0 {
				t.Errorf("%s: %d rows stored", name, n)
			}
		}
	}
	if strings.Contains(h.logs.String(), "fail-open") {
		t.Fatalf("a pass-through is not a fault: %s", h.logs.String())
	}
	// and a rewrite still happens on the same routes for an ordinary request
	h.post(t, "/v1/responses", []byte(`{"model":"gpt-5.4","previous_response_id":null,"input":"hi"}`), map[string]string{"Session_id": "pass-null"})
	if got := up.last(t); !bytes.Contains(got.Body, []byte("Context management: to fit")) {
		t.Fatalf("a null previous_response_id was not rewritten: %s", got.Body)
	}
}

// The output of a local shell call as the Responses API types it (openai-python
// response_input_item_param.py, LocalShellCallOutput): it names its call in "id" ("The
// unique ID of the local shell tool call generated by the model", the call's call_id), not
// in call_id. Its row is a tool result named by its call, like every other output.
func TestResponsesLocalShellOutputNamedByItsCall(t *testing.T) {
	e := newAdEnv(t, testSettings(10_000_000))
	body := []byte(`{"model":"gpt-5.4","input":[{"role":"user","content":"list"},` +
		`{"type":"local_shell_call","id":"lsh_1","call_id":"call_9","status":"completed","action":{"type":"exec","command":["ls"],"env":{}}},` +
		`{"type":"local_shell_call_output","id":"call_9","output":"a.txt"}]}`)
	e.send(t, adResponses, adHeader("lsh"), body, false)
	var name string
	must(t, adDB(t, e.root, "lsh").QueryRow(`SELECT coalesce(name, '') FROM messages WHERE kind = 'tool_result'`).Scan(&name))
	if name != "local_shell" {
		t.Fatalf("the local shell output row is named %q, want local_shell (its call)", name)
	}
}

// in_context means "the latest request that carried the row also sends it to the model"
// (contract: Session database, messages.in_context). An OpenAI reasoning item is not
// signed, so a trim keeps it in the view (contract: Trim, Responses row, "Kept"); its
// thinking row must then stay in context.
func TestResponsesKeptReasoningRowStaysInContext(t *testing.T) {
	e := newAdEnv(t, testSettings(10_000_000))
	in := []byte(`{"model":"gpt-5.4","input":[` +
		`{"role":"user","content":"a"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]},` +
		`{"role":"user","content":"a2"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok2"}]},` +
		`{"role":"user","content":"b"},` +
		`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"first look"}],"encrypted_content":"enc1"},` +
		`{"type":"function_call","id":"fc_1","call_id":"c1","name":"shell","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"o1"},` +
		`{"type":"reasoning","id":"rs_2","summary":[{"type":"summary_text","text":"second look"}],"encrypted_content":"enc2"},` +
		`{"type":"function_call","id":"fc_2","call_id":"c2","name":"shell","arguments":"{}"},{"type":"function_call_output","call_id":"c2","output":"o2"}]}`)
	res := e.send(t, adResponses, adHeader("kept-rs"), in, true)
	if !bytes.Contains(res.body(), []byte(`"id":"rs_1"`)) {
		t.Fatalf("the OpenAI reasoning item left the view: %s", res.body())
	}
	var inCtx int
	must(t, adDB(t, e.root, "kept-rs").QueryRow(`SELECT in_context FROM messages WHERE text = 'first look'`).Scan(&inCtx))
	if inCtx != 1 {
		t.Fatalf("the reasoning row the view still sends has in_context = %d", inCtx)
	}
}

func regUser(s string) string {
	return `{"type":"message","role":"user","content":[{"type":"input_text","text":"` + s + `"}]}`
}

func regAsst(s string) string {
	return `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"` + s + `"}]}`
}

func regStep(n int) string {
	return fmt.Sprintf(`{"type":"reasoning","id":"rs_%d","summary":[],"encrypted_content":"e%d"},`+
		`{"type":"function_call","id":"fc_%d","call_id":"c%d","name":"shell","arguments":"{}"},`+
		`{"type":"function_call_output","call_id":"c%d","output":"o%d"}`, n, n, n, n, n, n)
}
