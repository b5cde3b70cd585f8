package fakeupstream_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// oaHeaders returns the headers an OpenAI client sends; extra are "Name: value" lines.
func oaHeaders(extra ...string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Authorization", "Bearer dummy-key")
	return withLines(h, extra)
}

// oaErr is a decoded OpenAI error envelope; Param and Code are "<null>" when null.
type oaErr struct {
	Message, Type, Param, Code string
}

// openAIError decodes an OpenAI error envelope and checks its shape (api-rules §4.6): one key
// "error" holding exactly message, type, param and code.
func openAIError(t *testing.T, body []byte) oaErr {
	t.Helper()
	var env map[string]map[string]any
	if err := json.Unmarshal(body, &env); err != nil || len(env) != 1 || env["error"] == nil {
		t.Fatalf("not an OpenAI error envelope: %s", body)
	}
	e := env["error"]
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Fatalf("error lacks %q: %s", k, body)
		}
	}
	if len(e) != 4 {
		t.Fatalf("error has extra keys: %s", body)
	}
	orNull := func(v any) string {
		if v == nil {
			return "<null>"
		}
		return v.(string)
	}
	return oaErr{e["message"].(string), e["type"].(string), orNull(e["param"]), orNull(e["code"])}
}

// oaReject posts body to path, requires a 400, and returns the error.
func oaReject(t *testing.T, srv *fakeupstream.Server, path string, body any) oaErr {
	t.Helper()
	resp, out := post(t, srv.URL+path, body, oaHeaders())
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %s", resp.StatusCode, out)
	}
	e := openAIError(t, out)
	if e.Type != "invalid_request_error" {
		t.Fatalf("error type %q", e.Type)
	}
	return e
}

// oaRejectCase is a request body the fake must reject with a 400 and its error's message,
// param and code.
type oaRejectCase struct {
	name                 string
	body                 any
	message, param, code string
}

// checkOARejects posts each case's body to path, in a subtest of the case's name, and
// checks the error's message, param and code.
func checkOARejects(t *testing.T, srv *fakeupstream.Server, path string, cases []oaRejectCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := oaReject(t, srv, path, c.body)
			if e.Message != c.message || e.Param != c.param || e.Code != c.code {
				t.Errorf("error\n got: %q param %s code %s\nwant: %q param %s code %s", e.Message, e.Param, e.Code, c.message, c.param, c.code)
			}
		})
	}
}

// oaAccept posts body to path, requires a 200, and returns the body.
func oaAccept(t *testing.T, srv *fakeupstream.Server, path string, body any) []byte {
	t.Helper()
	return accept(t, srv, path, body, oaHeaders())
}

// chatStreamed is a Chat Completions stream accumulated the way the OpenAI SDKs do.
type chatStreamed struct {
	chunks    []map[string]any
	role      string
	content   string
	reasoning string
	calls     []map[string]any // {"id","type","function":{"name","arguments"}}
	argPieces int              // argument deltas received
	finish    string
	usage     map[string]any // the usage chunk's usage
	err       map[string]any // an error chunk's error
	done      bool           // data: [DONE] received
}

// readChatStream parses a Chat Completions stream and fails where a client would: a line
// that is not `data: …`, a chunk that is not a chat.completion.chunk, data after [DONE],
// tool call deltas out of order. With includeUsage every chunk must carry "usage" (null
// except on the last, whose choices are empty); without it no chunk may.
func readChatStream(t *testing.T, body []byte, includeUsage bool) chatStreamed {
	t.Helper()
	var s chatStreamed
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected stream line %q", line)
		}
		if s.done {
			t.Fatalf("data after [DONE]: %s", line)
		}
		if data == "[DONE]" {
			s.done = true
			continue
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk is not JSON: %v: %s", err, data)
		}
		if e, ok := c["error"].(map[string]any); ok {
			s.err = e
			continue
		}
		if s.usage != nil {
			t.Fatalf("chunk after the usage chunk: %s", data)
		}
		s.chunks = append(s.chunks, c)
		if c["object"] != "chat.completion.chunk" {
			t.Fatalf("object %v", c["object"])
		}
		u, has := c["usage"]
		if has != includeUsage {
			t.Fatalf("chunk has usage key %v, include_usage %v: %s", has, includeUsage, data)
		}
		choices := c["choices"].([]any)
		if u != nil {
			if len(choices) != 0 {
				t.Fatalf("usage chunk with choices: %s", data)
			}
			s.usage = u.(map[string]any)
			continue
		}
		if len(choices) != 1 {
			t.Fatalf("chunk with %d choices: %s", len(choices), data)
		}
		ch := choices[0].(map[string]any)
		if f, ok := ch["finish_reason"].(string); ok {
			s.finish = f
		}
		d := ch["delta"].(map[string]any)
		if r, ok := d["role"].(string); ok {
			s.role = r
		}
		if v, ok := d["content"].(string); ok {
			s.content += v
		}
		if v, ok := d["reasoning_content"].(string); ok {
			s.reasoning += v
		}
		tcs, _ := d["tool_calls"].([]any)
		for _, e := range tcs {
			tc := e.(map[string]any)
			ix := int(tc["index"].(float64))
			fn := tc["function"].(map[string]any)
			switch {
			case ix == len(s.calls):
				if tc["id"] == nil || tc["type"] != "function" || fn["name"] == nil {
					t.Fatalf("first delta of tool call %d lacks id, type or name: %s", ix, data)
				}
				s.calls = append(s.calls, map[string]any{"id": tc["id"], "type": "function",
					"function": map[string]any{"name": fn["name"], "arguments": fn["arguments"]}})
			case ix == len(s.calls)-1:
				f := s.calls[ix]["function"].(map[string]any)
				f["arguments"] = f["arguments"].(string) + fn["arguments"].(string)
				s.argPieces++
			default:
				t.Fatalf("tool call delta for index %d with %d calls open", ix, len(s.calls))
			}
		}
	}
	return s
}

// respStreamed is a Responses stream accumulated the way Codex reads it (api-rules §4.3).
type respStreamed struct {
	events    []string         // event names in order
	items     []map[string]any // output items from response.output_item.done
	texts     map[string]string
	completed map[string]any // response.completed's response
	failed    map[string]any // response.failed's response
	created   map[string]any
}

// readResponsesStream parses a Responses stream and fails where a client would: an event
// name that differs from the data's type, sequence numbers that are not 0, 1, 2, …, an item
// event for an item that is not open, deltas that do not join to the done text, an event
// after response.completed or response.failed.
func readResponsesStream(t *testing.T, body []byte) respStreamed {
	t.Helper()
	s := respStreamed{texts: map[string]string{}}
	open := -1
	ended := false
	eachNamedEvent(t, body, "the end", func(name string, d map[string]any) bool {
		if seq := int(d["sequence_number"].(float64)); seq != len(s.events) {
			t.Fatalf("sequence_number %d, want %d", seq, len(s.events))
		}
		s.events = append(s.events, name)
		idx := -1
		if f, ok := d["output_index"].(float64); ok {
			idx = int(f)
		}
		if idx >= 0 && name != "response.output_item.added" && idx != open {
			t.Fatalf("%s for output_index %d, open %d", name, idx, open)
		}
		key := func() string { return d["item_id"].(string) }
		switch name {
		case "response.created":
			s.created = d["response"].(map[string]any)
		case "response.in_progress":
		case "response.output_item.added":
			if open != -1 || idx != len(s.items) {
				t.Fatalf("output_item.added index %d, want %d (open %d)", idx, len(s.items), open)
			}
			open = idx
		case "response.output_text.delta", "response.reasoning_summary_text.delta", "response.function_call_arguments.delta":
			s.texts[key()] += d["delta"].(string)
		case "response.output_text.done", "response.reasoning_summary_text.done":
			if s.texts[key()] != d["text"] {
				t.Fatalf("%s text %q, deltas %q", name, d["text"], s.texts[key()])
			}
		case "response.function_call_arguments.done":
			if s.texts[key()] != d["arguments"] {
				t.Fatalf("arguments %q, deltas %q", d["arguments"], s.texts[key()])
			}
		case "response.content_part.added", "response.content_part.done",
			"response.reasoning_summary_part.added", "response.reasoning_summary_part.done":
		case "response.output_item.done":
			s.items = append(s.items, d["item"].(map[string]any))
			open = -1
		case "response.completed":
			s.completed = d["response"].(map[string]any)
			ended = true
		case "response.failed":
			s.failed = d["response"].(map[string]any)
			ended = true
		default:
			t.Fatalf("unexpected event %q", name)
		}
		return ended
	})
	return s
}

// respTurn posts a streaming Responses request, requires 200, and returns the parsed stream.
func respTurn(t *testing.T, srv *fakeupstream.Server, body any) respStreamed {
	t.Helper()
	s := readResponsesStream(t, oaAccept(t, srv, "/v1/responses", body))
	if s.completed == nil {
		t.Fatalf("stream ended without response.completed: %v", s.events)
	}
	return s
}

func inputText(role, s string) obj {
	return obj{"type": "message", "role": role, "content": []any{obj{"type": "input_text", "text": s}}}
}

func fnCall(callID, name, args string) obj {
	return obj{"type": "function_call", "call_id": callID, "name": name, "arguments": args}
}

func fnOutput(callID, output string) obj {
	return obj{"type": "function_call_output", "call_id": callID, "output": output}
}

// without returns a copy of m without keys.
func without(m map[string]any, keys ...string) obj {
	c := obj{}
	for k, v := range m {
		c[k] = v
	}
	for _, k := range keys {
		delete(c, k)
	}
	return c
}

// with returns a copy of m with k set to v.
func with(m map[string]any, k string, v any) obj {
	c := without(m)
	c[k] = v
	return c
}

// usageNum reads a number at a dotted path of a decoded usage object.
func usageNum(m map[string]any, path string) int {
	var v any = m
	for _, k := range strings.Split(path, ".") {
		v = v.(map[string]any)[k]
	}
	return num(v)
}
