package proxy

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// A format-neutral conversation, written out in the three wire formats by hand-written
// encoders below (contract: Rows, "the proxy's Chat, Anthropic and Responses adapters ...
// produce identical rows for the same conversation").

type pvCall struct {
	id, name string
	ns       string // Responses namespace: name on the wire is then the part after ns+"__"
	input    string // JSON object text, as the model wrote it (with spaces)
}

type pvEvent struct {
	kind     string // "user", "assistant", "results"
	texts    []string
	image    bool
	thinking string
	calls    []pvCall
	results  []pvResult
}

type pvResult struct{ id, out string }

func pvUser(texts ...string) pvEvent { return pvEvent{kind: "user", texts: texts} }

func pvJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// anthropic renders the conversation as Anthropic Messages request bodies.
func pvAnthropic(model, system string, evs []pvEvent) []byte {
	var msgs []string
	for i, ev := range evs {
		switch ev.kind {
		case "user":
			var parts []string
			for _, t := range ev.texts {
				parts = append(parts, `{"type":"text","text":`+pvJSON(t)+`}`)
			}
			if ev.image {
				parts = append(parts, `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}`)
			}
			if len(parts) == 1 && !ev.image {
				msgs = append(msgs, `{"role":"user","content":`+pvJSON(ev.texts[0])+`}`)
			} else {
				msgs = append(msgs, `{"role":"user","content":[`+strings.Join(parts, ",")+`]}`)
			}
		case "assistant":
			var parts []string
			if ev.thinking != "" {
				parts = append(parts, fmt.Sprintf(`{"type":"thinking","thinking":%s,"signature":"sig-%d"}`, pvJSON(ev.thinking), i))
			}
			for _, t := range ev.texts {
				parts = append(parts, `{"type":"text","text":`+pvJSON(t)+`}`)
			}
			for _, c := range ev.calls {
				parts = append(parts, fmt.Sprintf(`{"type":"tool_use","id":"toolu_%s","name":%s,"input":%s}`, c.id, pvJSON(c.name), c.input))
			}
			msgs = append(msgs, `{"role":"assistant","content":[`+strings.Join(parts, ",")+`]}`)
		case "results":
			var parts []string
			for _, r := range ev.results {
				parts = append(parts, fmt.Sprintf(`{"type":"tool_result","tool_use_id":"toolu_%s","content":%s}`, r.id, pvJSON(r.out)))
			}
			msgs = append(msgs, `{"role":"user","content":[`+strings.Join(parts, ",")+`]}`)
		}
	}
	return []byte(`{"model":` + pvJSON(model) + `,"max_tokens":4096,"system":[{"type":"text","text":` + pvJSON(system) +
		`}],"thinking":{"type":"enabled","budget_tokens":2048},"messages":[` + strings.Join(msgs, ",") + `],"stream":true}`)
}

// chat renders it as a Chat Completions body (LiteLLM shape: thinking_blocks next to
// reasoning_content).
func pvChat(model, system string, evs []pvEvent) []byte {
	msgs := []string{`{"role":"system","content":` + pvJSON(system) + `}`}
	for i, ev := range evs {
		switch ev.kind {
		case "user":
			if len(ev.texts) == 1 && !ev.image {
				msgs = append(msgs, `{"role":"user","content":`+pvJSON(ev.texts[0])+`}`)
				continue
			}
			var parts []string
			for _, t := range ev.texts {
				parts = append(parts, `{"type":"text","text":`+pvJSON(t)+`}`)
			}
			if ev.image {
				parts = append(parts, `{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}`)
			}
			msgs = append(msgs, `{"role":"user","content":[`+strings.Join(parts, ",")+`]}`)
		case "assistant":
			content := "null"
			if len(ev.texts) > 0 {
				content = pvJSON(strings.Join(ev.texts, ""))
			}
			m := `{"role":"assistant","content":` + content
			if ev.thinking != "" {
				m += `,"reasoning_content":` + pvJSON(ev.thinking) +
					fmt.Sprintf(`,"thinking_blocks":[{"type":"thinking","thinking":%s,"signature":"sig-%d"}]`, pvJSON(ev.thinking), i)
			}
			if len(ev.calls) > 0 {
				var calls []string
				for _, c := range ev.calls {
					calls = append(calls, fmt.Sprintf(`{"id":"call_%s","type":"function","function":{"name":%s,"arguments":%s}}`, c.id, pvJSON(c.name), pvJSON(c.input)))
				}
				m += `,"tool_calls":[` + strings.Join(calls, ",") + `]`
			}
			msgs = append(msgs, m+`}`)
		case "results":
			for _, r := range ev.results {
				msgs = append(msgs, fmt.Sprintf(`{"role":"tool","tool_call_id":"call_%s","content":%s}`, r.id, pvJSON(r.out)))
			}
		}
	}
	return []byte(`{"model":` + pvJSON(model) + `,"messages":[` + strings.Join(msgs, ",") + `],"stream":true,"stream_options":{"include_usage":true}}`)
}

// responses renders it as a Responses body: the reasoning item (summary text, LiteLLM's
// encrypted_content), the assistant text as a message item, each call as a function_call.
func pvResponses(model, system string, evs []pvEvent) []byte {
	var items []string
	for i, ev := range evs {
		switch ev.kind {
		case "user":
			var parts []string
			for _, t := range ev.texts {
				parts = append(parts, `{"type":"input_text","text":`+pvJSON(t)+`}`)
			}
			if ev.image {
				parts = append(parts, `{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}`)
			}
			items = append(items, `{"type":"message","role":"user","content":[`+strings.Join(parts, ",")+`]}`)
		case "assistant":
			if ev.thinking != "" {
				items = append(items, fmt.Sprintf(`{"type":"reasoning","id":"rs_%d","summary":[{"type":"summary_text","text":%s}],"encrypted_content":"enc-%d"}`, i, pvJSON(ev.thinking), i))
			}
			for j, t := range ev.texts {
				items = append(items, fmt.Sprintf(`{"type":"message","id":"msg_%d_%d","role":"assistant","status":"completed","content":[{"type":"output_text","text":%s,"annotations":[]}]}`, i, j, pvJSON(t)))
			}
			for _, c := range ev.calls {
				name := c.name
				ns := ""
				if c.ns != "" {
					name = strings.TrimPrefix(c.name, c.ns+"__")
					ns = `,"namespace":` + pvJSON(c.ns)
				}
				items = append(items, fmt.Sprintf(`{"type":"function_call","id":"fc_%s","call_id":"call_%s"%s,"name":%s,"arguments":%s}`, c.id, c.id, ns, pvJSON(name), pvJSON(c.input)))
			}
		case "results":
			for _, r := range ev.results {
				items = append(items, fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%s","output":%s}`, r.id, pvJSON(r.out)))
			}
		}
	}
	return []byte(`{"model":` + pvJSON(model) + `,"instructions":` + pvJSON(system) + `,"input":[` + strings.Join(items, ",") +
		`],"tools":[],"store":false,"stream":true,"include":["reasoning.encrypted_content"]}`)
}

// pvBigOutput is a multi-line tool result well over the test's compression threshold.
func pvBigOutput() string {
	var b strings.Builder
	for i := 1; i <= 120; i++ {
		if i == 77 {
			b.WriteString("config.toml:77: KEY-7 = 0x3f2a\n")
			continue
		}
		fmt.Fprintf(&b, "config.toml:%d: setting_%03d = \"value %d\"\n", i, i, i*13)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// pvConversation: three turns; tool calls with JSON arguments (one MCP tool, namespaced in
// Responses), a large multi-line result, thinking with summary text, an image.
func pvConversation() []pvEvent {
	return []pvEvent{
		pvUser("Find KEY-7 in config.toml and tell me its value."),
		{kind: "assistant", thinking: "I should grep the config.", calls: []pvCall{{id: "1", name: "Bash", input: `{"command": "grep -n KEY config.toml", "description": "Find the key"}`}}},
		{kind: "results", results: []pvResult{{"1", pvBigOutput()}}},
		{kind: "assistant", texts: []string{"KEY-7 is 0x3f2a."}},
		{kind: "user", texts: []string{"Now read notes.md — the one with the diagram."}, image: true},
		{kind: "assistant", texts: []string{"Reading it."}, calls: []pvCall{{id: "2", name: "mcp__fs__read_file", ns: "mcp__fs", input: `{"path":"notes.md","limit":20,"opts":{"raw":true,"n":1.5,"tag":"caf\u00e9"}}`}}},
		{kind: "results", results: []pvResult{{"2", "line one\nline two"}}},
		{kind: "assistant", texts: []string{"notes.md has two lines."}},
		pvUser("Run the tests, use tools."),
		{kind: "assistant", thinking: "Run go test first.", calls: []pvCall{{id: "3", name: "Bash", input: `{"command":"go test ./..."}`}}},
		{kind: "results", results: []pvResult{{"3", "ok  \tpkg\t0.1s"}}},
		{kind: "assistant", thinking: "Now vet.", calls: []pvCall{{id: "4", name: "Bash", input: `{"command":"go vet ./..."}`}}},
		{kind: "results", results: []pvResult{{"4", "vet: clean"}}},
		{kind: "assistant", texts: []string{"All green."}},
		pvUser("Thanks."),
	}
}

type pvFormat struct {
	name   string
	tg     target
	encode func(model, system string, evs []pvEvent) []byte
}

var pvFormats = []pvFormat{
	{"anthropic", adAnthropic, pvAnthropic},
	{"chat", adChat, pvChat},
	{"responses", adResponses, pvResponses},
}

type pvRow struct {
	Seq                 int64
	Fingerprint, Thread string
	Role, Kind          string
	Name                sql.NullString
	Text                string
	BlobID              sql.NullString
	InContext           int64
	TrimmedAtSeq        sql.NullInt64
	TrimmedAt           sql.NullString
	CreatedAt           string
}

type pvLine struct {
	ID, MessageSeq, LineNo int64
	Role, Text             string
}

type pvStore struct {
	rows  []pvRow
	lines []pvLine
	blobs map[string]string
}

func pvRead(t *testing.T, e *adEnv, sid string) pvStore {
	t.Helper()
	e.root.SettleAll()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(e.root.Dir(), "sessions", sid+".db")+"?mode=ro")
	must(t, err)
	defer db.Close()
	var st pvStore
	rs, err := db.Query(`SELECT seq, fingerprint, thread, role, kind, name, text, blob_id, in_context, trimmed_at_seq, trimmed_at, created_at FROM messages ORDER BY seq`)
	must(t, err)
	for rs.Next() {
		var r pvRow
		must(t, rs.Scan(&r.Seq, &r.Fingerprint, &r.Thread, &r.Role, &r.Kind, &r.Name, &r.Text, &r.BlobID, &r.InContext, &r.TrimmedAtSeq, &r.TrimmedAt, &r.CreatedAt))
		st.rows = append(st.rows, r)
	}
	must(t, rs.Err())
	rs.Close()
	ls, err := db.Query(`SELECT id, message_seq, line_no, role, text FROM lines ORDER BY id`)
	must(t, err)
	for ls.Next() {
		var l pvLine
		must(t, ls.Scan(&l.ID, &l.MessageSeq, &l.LineNo, &l.Role, &l.Text))
		st.lines = append(st.lines, l)
	}
	must(t, ls.Err())
	ls.Close()
	st.blobs = map[string]string{}
	ents, err := os.ReadDir(filepath.Join(e.root.Dir(), "blobs"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, ent := range ents {
		b, err := os.ReadFile(filepath.Join(e.root.Dir(), "blobs", ent.Name()))
		must(t, err)
		st.blobs[ent.Name()] = string(b)
	}
	return st
}

// pvCompare fails with the first differing row, line or blob of got against want.
func pvCompare(t *testing.T, step, name string, want, got pvStore) {
	t.Helper()
	if len(got.rows) != len(want.rows) {
		t.Errorf("%s: %s stored %d rows, anthropic %d", step, name, len(got.rows), len(want.rows))
	}
	for i := 0; i < len(got.rows) && i < len(want.rows); i++ {
		if !reflect.DeepEqual(got.rows[i], want.rows[i]) {
			t.Errorf("%s: %s row %d differs\n got  %+v\n want %+v", step, name, i+1, got.rows[i], want.rows[i])
			break
		}
	}
	if len(got.lines) != len(want.lines) {
		t.Errorf("%s: %s stored %d lines, anthropic %d", step, name, len(got.lines), len(want.lines))
	}
	for i := 0; i < len(got.lines) && i < len(want.lines); i++ {
		if got.lines[i] != want.lines[i] {
			t.Errorf("%s: %s line %d differs\n got  %+v\n want %+v", step, name, i+1, got.lines[i], want.lines[i])
			break
		}
	}
	if !reflect.DeepEqual(got.blobs, want.blobs) {
		t.Errorf("%s: %s blobs %v, anthropic %v", step, name, pvKeys(got.blobs), pvKeys(want.blobs))
	}
}

func pvKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The same conversation sent as Anthropic, Chat and Responses requests, growing one client
// round trip at a time, each format through its own Proxy (own store, same settings, same
// clock), yields the same session database: every column of messages and lines, and the
// same blob files. The request that ends the third turn's second tool step is forced to
// trim (the store's .force flag) in all three: the same turn is cut, the same rows leave
// context, and the stripped thinking of the older kept step leaves context too.
func TestParityAcrossFormats(t *testing.T) {
	const model, system, sid = "claude-sonnet-4-5", "You are a careful coding agent.", "parity-1"
	conv := pvConversation()
	s := testSettings(10_000_000) // only the forced trim cuts
	s.CompressOverTokens = 100
	envs := make([]*adEnv, len(pvFormats))
	for i := range pvFormats {
		envs[i] = newAdEnv(t, s)
	}
	// A client sends after each user turn and after each batch of tool results.
	var sends []int
	for i, ev := range conv {
		if ev.kind == "user" || ev.kind == "results" {
			sends = append(sends, i+1)
		}
	}
	const forcedAt = 13 // through the results of "go vet"
	for _, n := range sends {
		step := fmt.Sprintf("request through event %d", n)
		force := n == forcedAt
		for i, f := range pvFormats {
			res := envs[i].send(t, f.tg, adHeader(sid), f.encode(model, system, conv[:n]), force)
			want := int64(0)
			switch {
			case n == forcedAt:
				want = 2
			case n > forcedAt:
				want = 1
			}
			if res.trimmed != want {
				t.Fatalf("%s: %s trimmed = %d, want %d", step, f.name, res.trimmed, want)
			}
			if strings.Contains(envs[i].logs.String(), "fail-open") {
				t.Fatalf("%s: %s failed open: %s", step, f.name, envs[i].logs.String())
			}
			if n >= 3 && n < forcedAt && !strings.Contains(string(res.body()), "[smarter-compact: tool result compressed, ") {
				t.Errorf("%s: %s did not compress the large result in its view", step, f.name)
			}
		}
		base := pvRead(t, envs[0], sid)
		for i := 1; i < len(pvFormats); i++ {
			pvCompare(t, step, pvFormats[i].name, base, pvRead(t, envs[i], sid))
		}
		if n == forcedAt || n == sends[len(sends)-1] {
			pvCheckTrimmed(t, step, base, n == forcedAt)
		}
	}
}

// pvCheckTrimmed checks the Anthropic store against the rows the contract gives for the
// forced trim, written out by hand, so that three equal but wrong stores do not pass.
func pvCheckTrimmed(t *testing.T, step string, st pvStore, atTrim bool) {
	t.Helper()
	type exp struct {
		role, kind, name string
		in               int64
		head             string
	}
	want := []exp{
		{"user", "text", "", 1, "Find KEY-7"}, // the first turn stays
		{"assistant", "thinking", "", 0, "I should grep"},
		{"assistant", "tool_use", "Bash", 0, `{"command":"grep -n KEY config.toml","description":"Find the key"}`},
		{"tool", "tool_result", "Bash", 0, "config.toml:1: "},
		{"assistant", "text", "", 0, "KEY-7 is 0x3f2a."},
		{"user", "text", "", 0, "Now read notes.md"},
		{"user", "text", "", 0, "[image]"},
		{"assistant", "text", "", 0, "Reading it."},
		{"assistant", "tool_use", "mcp__fs__read_file", 0, `{"path":"notes.md","limit":20,"opts":{"raw":true,"n":1.5,"tag":"café"}}`},
		{"tool", "tool_result", "mcp__fs__read_file", 0, "line one\nline two"},
		{"assistant", "text", "", 1, "notes.md has two lines."}, // the reply before the cut
		{"user", "text", "", 1, "Run the tests"},                // the cut turn
		{"assistant", "thinking", "", 0, "Run go test first."},  // signed, before the latest run
		{"assistant", "tool_use", "Bash", 1, `{"command":"go test ./..."}`},
		{"tool", "tool_result", "Bash", 1, "ok  \tpkg"},
		{"assistant", "thinking", "", 1, "Now vet."}, // the latest run at trim time
		{"assistant", "tool_use", "Bash", 1, `{"command":"go vet ./..."}`},
		{"tool", "tool_result", "Bash", 1, "vet: clean"},
	}
	if !atTrim {
		want = append(want, exp{"assistant", "text", "", 1, "All green."}, exp{"user", "text", "", 1, "Thanks."})
	}
	if len(st.rows) != len(want) {
		t.Fatalf("%s: %d rows, want %d", step, len(st.rows), len(want))
	}
	cutSeq := st.rows[11].Seq
	for i, w := range want {
		r := st.rows[i]
		if r.Role != w.role || r.Kind != w.kind || r.Name.String != w.name || r.Name.Valid != (w.name != "") ||
			r.InContext != w.in || !strings.HasPrefix(r.Text, w.head) {
			t.Errorf("%s: row %d = (%s,%s,%q,in=%d,%.40q), want (%s,%s,%q,in=%d,%.40q)", step, i+1,
				r.Role, r.Kind, r.Name.String, r.InContext, r.Text, w.role, w.kind, w.name, w.in, w.head)
		}
		if w.in == 0 && (r.TrimmedAtSeq.Int64 != cutSeq || r.TrimmedAt.String != "2026-11-29T12:00:00Z") {
			t.Errorf("%s: row %d trimmed_at_seq %v trimmed_at %v, want %d and the clock", step, i+1, r.TrimmedAtSeq, r.TrimmedAt, cutSeq)
		}
		if w.in == 1 && (r.TrimmedAtSeq.Valid || r.TrimmedAt.Valid) {
			t.Errorf("%s: row %d in context with trimmed_at_seq %v", step, i+1, r.TrimmedAtSeq)
		}
		if r.Thread != st.rows[0].Fingerprint {
			t.Errorf("%s: row %d thread %s, want the first row's fingerprint", step, i+1, r.Thread)
		}
	}
	big := st.rows[3]
	if big.Text != pvBigOutput() || !big.BlobID.Valid || st.blobs[big.BlobID.String+".txt"] != pvBigOutput() || len(st.blobs) != 1 {
		t.Errorf("%s: the large result is not stored whole with its blob (blob %v, %d blobs)", step, big.BlobID, len(st.blobs))
	}
	lines := 0
	for _, l := range st.lines {
		if l.MessageSeq == big.Seq {
			lines++
		}
	}
	if lines != 120 {
		t.Errorf("%s: the large result has %d lines rows, want 120", step, lines)
	}
}

// The first turn sent in two parts: Codex sends its environment context and the prompt as
// two user items, the Anthropic form is one user message with two text blocks, the Chat
// form one message with two text parts. The rows are the same (one per block or item);
// messages.thread, a column of every row, must be too (contract: Rows, identical rows; the
// thread is the conversation's first row, not a wire message).
func TestParityFirstTurnInTwoParts(t *testing.T) {
	const model, system, sid = "claude-sonnet-4-5", "sys", "parity-2"
	conv := []pvEvent{
		pvUser("<environment_context>\n  <cwd>/work</cwd>\n</environment_context>", "Refactor the parser."),
		{kind: "assistant", texts: []string{"Done."}},
		pvUser("Thanks."),
	}
	// Responses sends the two parts as two user items, as Codex does.
	split := func(model, system string, evs []pvEvent) []byte {
		b := string(pvResponses(model, system, evs))
		return []byte(strings.Replace(b, `,{"type":"input_text","text":"Refactor the parser."}`,
			`]},{"type":"message","role":"user","content":[{"type":"input_text","text":"Refactor the parser."}`, 1))
	}
	formats := []pvFormat{pvFormats[0], pvFormats[1], {"responses (two items)", adResponses, split}}
	var stores []pvStore
	for _, f := range formats {
		e := newAdEnv(t, testSettings(10_000_000))
		body := f.encode(model, system, conv)
		if !json.Valid(body) {
			t.Fatalf("%s: fixture is not JSON: %s", f.name, body)
		}
		e.send(t, f.tg, adHeader(sid), body, false)
		stores = append(stores, pvRead(t, e, sid))
	}
	if len(stores[0].rows) != 4 || stores[0].rows[1].Text != "Refactor the parser." {
		t.Fatalf("anthropic rows: %+v", stores[0].rows)
	}
	for i := 1; i < len(formats); i++ {
		pvCompare(t, "one request", formats[i].name, stores[0], stores[i])
	}
}

// Without any session id source, the session is fp-<16 hex of SHA-256(system prompt +
// first user message)> (contract: Session id): the same conversation names the same
// session in all three formats.
func TestParityFallbackSessionID(t *testing.T) {
	conv := pvConversation()[:5]
	var sids []string
	for _, f := range pvFormats {
		e := newAdEnv(t, testSettings(10_000_000))
		_, sess, err := e.p.rewriteAs(f.tg, http.Header{}, f.encode("claude-sonnet-4-5", "You are a careful coding agent.", conv))
		must(t, err)
		if e.p.Close(); sess.state.Source != "fingerprint" || !strings.HasPrefix(sess.sid, "fp-") {
			t.Fatalf("%s: session %q from %q", f.name, sess.sid, sess.state.Source)
		}
		sids = append(sids, sess.sid)
	}
	if sids[1] != sids[0] || sids[2] != sids[0] {
		t.Fatalf("fallback session ids differ: anthropic %s, chat %s, responses %s", sids[0], sids[1], sids[2])
	}
}

// The rows an OpenAI adapter stores for a hand-written request (contract: Rows), one case
// a format:
//   - chat: user parts one row each, images as a placeholder; an assistant message's
//     thinking (thinking_blocks, else reasoning_content), text and calls in that order, call
//     arguments as compact JSON; a tool result named by its call; system and developer
//     messages never stored.
//   - responses (decisions of issue 4): user parts, reasoning summary text, assistant
//     output text, calls with compact JSON arguments (a namespaced call named NS__name),
//     custom tool input as sent, local shell action as compact JSON, outputs named by their
//     call; server-side tools and unknown items as compact JSON text; developer and system
//     items never stored.
//
// TestChatRows (chat_test.go) and TestResponsesRows (responses_test.go) are its cases chat
// and responses.
func TestOpenAIRows(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target target
		sid    string
		body   []byte
		want   []string
	}{
		{"chat", adChat, "chat-rows", []byte(`{"model":"gpt-5.4","messages":[` +
			`{"role":"system","content":"sys"},{"role":"developer","content":"dev"},` +
			`{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"https://x/y.png"}},{"type":"file","file":{"file_id":"f1"}}]},` +
			`{"role":"assistant","content":"Sure.","reasoning_content":"rc","thinking_blocks":[{"type":"thinking","thinking":"tb1","signature":"s"},{"type":"redacted_thinking","data":"x"}],` +
			`"tool_calls":[{"id":"c1","type":"function","function":{"name":"Grep","arguments":"{ \"pattern\" : \"a\\nb\", \"n\": 1.50 }"}},{"id":"c2","type":"function","function":{"name":"Raw","arguments":"not json"}}]},` +
			`{"role":"tool","tool_call_id":"c2","content":"raw out"},{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"l1"},{"type":"text","text":"l2"}]},` +
			`{"role":"assistant","content":null,"reasoning_content":"only rc"},` +
			`{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"refusal","refusal":"no"}]}]}`), []string{
			"user/text/-/look", "user/text/-/[image]", "user/text/-/[document]",
			"assistant/thinking/-/tb1", "assistant/text/-/Sure.",
			`assistant/tool_use/Grep/{"pattern":"a\nb","n":1.50}`, "assistant/tool_use/Raw/not json",
			"tool/tool_result/Raw/raw out", "tool/tool_result/Grep/l1\nl2",
			"assistant/thinking/-/only rc",
			"assistant/text/-/a", "assistant/text/-/no",
		}},
		{"responses", adResponses, "resp-rows", []byte(`{"model":"gpt-5.4","input":[` +
			`{"type":"message","role":"developer","content":"dev"},{"role":"system","content":"sys"},` +
			`{"role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"https://x/y.png"},{"type":"input_file","file_id":"f"}]},` +
			`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"**Plan**"},{"type":"summary_text","text":"then act"}],"encrypted_content":"e"},` +
			`{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Sure.","annotations":[]}]},` +
			`{"type":"function_call","id":"fc_1","call_id":"c1","namespace":"mcp__fs","name":"read_file","arguments":"{ \"path\" : \"a\" }"},` +
			`{"type":"custom_tool_call","call_id":"c2","name":"apply_patch","input":"*** Begin Patch\n*** End Patch"},` +
			`{"type":"local_shell_call","call_id":"c3","status":"completed","action":{"type":"exec","command":["ls", "-l"]}},` +
			`{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"go"}},` +
			`{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"p1"},{"type":"input_text","text":"p2"}]},` +
			`{"type":"custom_tool_call_output","call_id":"c2","output":"Done!"},` +
			`{"type":"function_call_output","call_id":"c3","output":"total 0"},` +
			`{"type":"item_reference","id":"msg_0"},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"All done."}]}]}`), []string{
			"user/text/-/look", "user/text/-/[image]", "user/text/-/[document]",
			"assistant/thinking/-/**Plan**\nthen act",
			"assistant/text/-/Sure.",
			`assistant/tool_use/mcp__fs__read_file/{"path":"a"}`,
			"assistant/tool_use/apply_patch/*** Begin Patch\n*** End Patch",
			`assistant/tool_use/local_shell/{"type":"exec","command":["ls","-l"]}`,
			`assistant/text/-/{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"go"}}`,
			"tool/tool_result/mcp__fs__read_file/p1\np2",
			"tool/tool_result/apply_patch/Done!",
			"tool/tool_result/local_shell/total 0",
			`assistant/text/-/{"type":"item_reference","id":"msg_0"}`,
			"assistant/text/-/All done.",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newAdEnv(t, testSettings(10_000_000))
			e.send(t, tc.target, adHeader(tc.sid), tc.body, false)
			got := adRows(t, e.root, tc.sid)
			if strings.Join(got, "\n---\n") != strings.Join(tc.want, "\n---\n") {
				t.Fatalf("rows\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// A request hands the store only the messages it has not handed before with the same flags
// (message.handed): a warm request its new step, a new cut the messages it moves. The
// database ends up the same as with a proxy that hands every request's whole history (the
// way before, here by forgetting handed before each request), over warm requests, a new cut,
// and warm requests after it.
func TestStoreRowsHandsOnlyWhatChanged(t *testing.T) {
	const sid = "handed"
	lean, whole := benchProxy(t, 10_000_000), benchProxy(t, 10_000_000)
	h := benchHeader(sid)
	c := benchConvoOf(30)
	send := func(p *Proxy, body []byte) *storeJob {
		t.Helper()
		if _, _, err := p.rewrite(h, body); err != nil {
			t.Fatal(err)
		}
		s := p.sessions[sid]
		return s.stores[len(s.stores)-1]
	}
	for step := range 12 {
		before := len(c.Items)
		c.Add()
		body := c.Body()
		newCut := step == 6
		for _, p := range []*Proxy{lean, whole} {
			p.cfg().TrimAtTokens = 10_000_000
			if newCut {
				p.cfg().TrimAtTokens = len(body) / 6 // a cut of about half the history
			}
		}
		if s := whole.sessions[sid]; s != nil {
			for _, msgs := range s.threads {
				for _, m := range msgs {
					m.handed = 0
				}
			}
		}
		cached := map[*message]bool{}
		if s := lean.sessions[sid]; s != nil {
			for _, msgs := range s.threads {
				for _, m := range msgs {
					cached[m] = true
				}
			}
		}
		send(whole, body)
		job := send(lean, body)
		// the messages parsed anew: the new step, and the ones whose bytes changed (Claude
		// Code moves its cache_control breakpoints), which the fast path parses again
		parsed := 0
		for _, msgs := range lean.sessions[sid].threads {
			for _, m := range msgs {
				if !cached[m] && len(m.rows) > 0 {
					parsed++
				}
			}
		}
		switch {
		case step == 0:
		case newCut:
			if len(job.msgs) <= parsed {
				t.Errorf("the new cut handed %d messages, want the %d parsed anew and the ones it moved", len(job.msgs), parsed)
			}
		case len(job.msgs) != parsed || parsed < len(c.Items)-before || parsed > 10:
			t.Errorf("step %d handed %d messages, want the %d parsed anew (its %d new ones, and a few whose bytes changed)",
				step, len(job.msgs), parsed, len(c.Items)-before)
		}
	}
	dump := func(p *Proxy) []string {
		p.root.SettleAll()
		db, err := sql.Open("sqlite3", "file:"+p.root.Dir()+"/sessions/"+sid+".db?mode=ro")
		must(t, err)
		defer db.Close()
		q, err := db.Query(`SELECT seq, fingerprint, thread, role, kind, coalesce(name, ''), text, in_context,
			coalesce(trimmed_at_seq, 0), trimmed_at IS NULL FROM messages ORDER BY seq`)
		must(t, err)
		defer q.Close()
		var out []string
		for q.Next() {
			var seq, trimmedSeq int64
			var fp, thread, role, kind, name, text string
			var in, untrimmed bool
			must(t, q.Scan(&seq, &fp, &thread, &role, &kind, &name, &text, &in, &trimmedSeq, &untrimmed))
			out = append(out, fmt.Sprint(seq, fp, thread, role, kind, name, len(text), in, trimmedSeq, untrimmed))
		}
		must(t, q.Err())
		return out
	}
	got, want := dump(lean), dump(whole)
	out := 0
	for _, r := range want {
		if strings.Contains(r, " false ") {
			out++
		}
	}
	if out == 0 {
		t.Fatal("no row is out of context: the test made no cut")
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the stores differ (%d rows vs %d handing everything):\n got %q\nwant %q", len(got), len(want), got, want)
	}
}
