package fakeupstream_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// codexBody is a request shaped like Codex CLI 0.171.0's (clients.md): no instructions, a
// developer message first, function and namespace tools, store false, encrypted reasoning
// included, a prompt_cache_key, streaming.
func codexBody(input ...any) obj {
	return obj{
		"model": "gpt-5-codex", "stream": true, "store": false,
		"include":          []any{"reasoning.encrypted_content"},
		"prompt_cache_key": "01a2277d-bf7a-71b2-a814-afbbf2e99473",
		"tool_choice":      "auto", "parallel_tool_calls": true, "reasoning": obj{"summary": "auto"},
		"tools": []any{
			obj{"type": "function", "name": "exec_command", "strict": false, "parameters": obj{"type": "object", "properties": obj{"cmd": obj{"type": "string"}}, "required": []any{"cmd"}}},
			obj{"type": "namespace", "name": "mcp__ctx", "description": "Tools in the mcp__ctx namespace.", "tools": []any{
				obj{"type": "function", "name": "fake_lookup", "parameters": obj{"type": "object"}},
			}},
			obj{"type": "web_search", "external_web_access": false},
		},
		"input": append([]any{
			obj{"type": "message", "id": "msg_dev", "role": "developer", "content": []any{obj{"type": "input_text", "text": "You are a coding agent."}}},
			obj{"type": "message", "id": "msg_user", "role": "user", "content": []any{obj{"type": "input_text", "text": "run echo hello"}}},
		}, input...),
	}
}

// plain is a minimal valid Responses request with the given input items.
func plain(input ...any) obj { return obj{"model": "gpt-5-codex", "input": input} }

// Each rule of checklist items 17–19 with the exact message, param and code; every case
// has an accepted twin in TestResponsesAccepted.
func TestResponsesRejections(t *testing.T) {
	user := inputText("user", "run it")
	call := fnCall("call_a", "exec_command", `{"cmd":"ls"}`)
	output := fnOutput("call_a", "a.txt")
	rs := obj{"type": "reasoning", "id": "rs_client", "summary": []any{}, "encrypted_content": "opaque"}
	cases := []oaRejectCase{
		{name: "missing model", body: obj{"input": "hi"},
			message: "Missing required parameter: 'model'.", param: "model", code: "missing_required_parameter"},
		{name: "message role tool", body: plain(user, obj{"type": "message", "role": "tool", "content": "x"}),
			message: "Invalid value: 'tool'. Supported values are: 'assistant', 'system', 'developer', and 'user'.", param: "input[1].role", code: "invalid_value"},
		{name: "easy message role tool", body: plain(obj{"role": "tool", "content": "x"}),
			message: "Invalid value: 'tool'. Supported values are: 'assistant', 'system', 'developer', and 'user'.", param: "input[0].role", code: "invalid_value"},

		// §4.2 pairing (item 17)
		{name: "function call without output", body: plain(user, call),
			message: "No tool output found for function call call_a.", param: "input", code: "<null>"},
		{name: "custom tool call without output", body: plain(user, obj{"type": "custom_tool_call", "call_id": "call_c", "name": "apply_patch", "input": "*** Begin Patch"}),
			message: "No tool output found for custom tool call call_c.", param: "input", code: "<null>"},
		{name: "local shell call without output", body: plain(user, obj{"type": "local_shell_call", "id": "lsc_1", "call_id": "call_l", "status": "completed", "action": obj{"type": "exec", "command": []any{"ls"}}}),
			message: "No tool output found for local shell call call_l.", param: "input", code: "<null>"},
		{name: "function output without call", body: plain(user, output),
			message: "No tool call found for function call output with call_id call_a.", param: "input", code: "<null>"},
		{name: "custom output without call", body: plain(user, obj{"type": "custom_tool_call_output", "call_id": "call_c", "output": "done"}),
			message: "No tool call found for custom tool call output with call_id call_c.", param: "input", code: "<null>"},
		{name: "local shell output without call", body: plain(user, obj{"type": "local_shell_call_output", "call_id": "call_l", "output": "x"}),
			message: "No tool call found for local shell call output with call_id call_l.", param: "input", code: "<null>"},
		{name: "output before its call", body: plain(user, output, call),
			message: "No tool call found for function call output with call_id call_a.", param: "input", code: "<null>"},
		{name: "output for another call", body: plain(user, call, fnOutput("call_b", "x")),
			message: "No tool output found for function call call_a.", param: "input", code: "<null>"},

		// reasoning items (item 18)
		{name: "reasoning without summary", body: plain(user, without(rs, "summary"), call, output),
			message: "Input[1] missing required field `summary`", param: "input", code: "<null>"},
		{name: "reasoning last", body: plain(user, rs),
			message: "Item 'rs_client' of type 'reasoning' was provided without its required following item.", param: "input", code: "<null>"},
		{name: "reasoning followed by reasoning", body: plain(user, rs, with(rs, "id", "rs_other"), call, output),
			message: "Item 'rs_client' of type 'reasoning' was provided without its required following item.", param: "input", code: "<null>"},
		{name: "reasoning by id only, store false", body: with(plain(user, without(rs, "encrypted_content"), call, output), "store", false),
			message: "Item with id 'rs_client' not found. Items are not persisted when store is set to false.", param: "input", code: "<null>"},
		{name: "reasoning by id only, never stored", body: plain(user, without(rs, "encrypted_content"), call, output),
			message: "Item with id 'rs_client' not found.", param: "input", code: "<null>"},
		{name: "item_reference, store false", body: with(plain(user, obj{"type": "item_reference", "id": "fc_old"}), "store", false),
			message: "Item with id 'fc_old' not found. Items are not persisted when store is set to false.", param: "input", code: "<null>"},
		{name: "unknown previous_response_id", body: with(plain(user), "previous_response_id", "resp_gone"),
			message: "Previous response with id 'resp_gone' not found.", param: "previous_response_id", code: "previous_response_not_found"},
	}
	srv := fakeupstream.Start(t, fakeupstream.Options{})
	checkOARejects(t, srv, "/v1/responses", cases)
	if rej := srv.Rejections(); len(rej) != len(cases) || rej[1].Format != fakeupstream.FormatResponses || rej[1].Error != cases[1].message {
		t.Errorf("%d rejections recorded, want %d; second %+v", len(rej), len(cases), rej[1])
	}
}

// The accepted twins of the rejection cases, and what real clients send.
func TestResponsesAccepted(t *testing.T) {
	user := inputText("user", "run it")
	call := fnCall("call_a", "exec_command", `{"cmd":"ls"}`)
	output := fnOutput("call_a", "a.txt")
	rs := obj{"type": "reasoning", "id": "rs_client", "summary": []any{}, "encrypted_content": "opaque"}
	srv := fakeupstream.Start(t, fakeupstream.Options{})
	for name, body := range map[string]any{
		"string input":       obj{"model": "gpt-5-codex", "input": "hi"},
		"no input":           obj{"model": "gpt-5-codex", "instructions": "be terse"},
		"roles":              plain(inputText("system", "s"), inputText("developer", "d"), user, obj{"type": "message", "role": "assistant", "content": []any{obj{"type": "output_text", "text": "ok"}}}),
		"easy messages":      plain(obj{"role": "developer", "content": "You are OpenCode."}, obj{"role": "user", "content": []any{obj{"type": "input_text", "text": "hi"}}}),
		"function loop":      plain(user, call, output),
		"custom tool loop":   plain(user, obj{"type": "custom_tool_call", "call_id": "call_c", "name": "apply_patch", "input": "x"}, obj{"type": "custom_tool_call_output", "call_id": "call_c", "output": "done"}),
		"local shell loop":   plain(user, obj{"type": "local_shell_call", "call_id": "call_l", "action": obj{"type": "exec"}}, obj{"type": "local_shell_call_output", "call_id": "call_l", "output": "x"}),
		"parallel calls":     plain(user, call, fnCall("call_b", "exec_command", "{}"), fnOutput("call_b", "b"), output),
		"reasoning inline":   plain(user, rs, call, output),
		"reasoning, no id":   with(plain(user, without(rs, "id"), call, output), "store", false),
		"unknown item types": plain(user, obj{"type": "web_search_call", "id": "ws_1", "status": "completed"}, obj{"type": "compaction", "encrypted_content": "opaque"}),
		"codex":              codexBody(call, output),
	} {
		resp, out := post(t, srv.URL+"/v1/responses", body, oaHeaders())
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d: %s", name, resp.StatusCode, out)
		}
	}
}

func reasoningReply(req *fakeupstream.Request) fakeupstream.Reply {
	if req.EndsWithToolResults() {
		return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Thinking("It worked."), fakeupstream.Text("It printed hello.")}}
	}
	return fakeupstream.Reply{Content: []fakeupstream.Block{
		fakeupstream.Thinking("I should run it."),
		fakeupstream.ToolUse("exec_command", map[string]any{"cmd": "echo hello"}),
	}}
}

// Reasoning linkage (§4.2, checklist item 18) on items the fake issued: a Codex turn sends
// back the reasoning item with its encrypted_content and the function_call; dropping the
// reasoning, keeping it without its call, changing its encrypted_content, or sending it by id
// only under store:false is rejected. Stripping ids the way the documented fixes do is not.
func TestResponsesReasoningLinkage(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: reasoningReply})
	first := respTurn(t, srv, codexBody())
	if len(first.items) != 2 {
		t.Fatalf("items %v", first.items)
	}
	rs, fc := obj(first.items[0]), obj(first.items[1])
	if rs["type"] != "reasoning" || fc["type"] != "function_call" || rs["encrypted_content"] == nil {
		t.Fatalf("items %v", first.items)
	}
	out := fnOutput(fc["call_id"].(string), "hello\n")
	rsID, fcID := rs["id"].(string), fc["id"].(string)

	second := respTurn(t, srv, codexBody(rs, fc, out))
	if len(second.items) != 2 || second.items[1]["type"] != "message" {
		t.Fatalf("second turn items %v", second.items)
	}

	for _, c := range []struct {
		name  string
		input []any
		want  string // "" = accepted
	}{
		{"reasoning dropped", []any{fc, out}, "Item '" + fcID + "' of type 'function_call' was provided without its required 'reasoning' item: '" + rsID + "'."},
		{"call dropped, reasoning kept", []any{rs, inputText("user", "next")}, "Item '" + rsID + "' of type 'reasoning' was provided without its required following item."},
		{"reasoning moved after the call", []any{fc, rs, out}, "Item '" + fcID + "' of type 'function_call' was provided without its required 'reasoning' item: '" + rsID + "'."},
		{"encrypted_content changed", []any{with(rs, "encrypted_content", rs["encrypted_content"].(string)+"x"), fc, out}, "The encrypted content for item " + rsID + " could not be verified."},
		{"encrypted_content of another item", []any{with(rs, "encrypted_content", second.items[0]["encrypted_content"]), fc, out}, "The encrypted content for item " + rsID + " could not be verified."},
		{"reasoning by id only", []any{without(rs, "encrypted_content"), fc, out}, "Item with id '" + rsID + "' not found. Items are not persisted when store is set to false."},
		{"reasoning last", []any{rs}, "Item '" + rsID + "' of type 'reasoning' was provided without its required following item."},

		{"reasoning without id", []any{without(rs, "id"), fc, out}, ""},
		{"call without id after its reasoning", []any{rs, without(fc, "id", "status"), out}, ""},
		{"reasoning dropped and call id stripped", []any{without(fc, "id"), out}, ""},
		{"whole turn dropped", []any{inputText("user", "next")}, ""},
		{"two turns", []any{rs, fc, out, second.items[0], second.items[1], inputText("user", "thanks")}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := codexBody(c.input...)
			body["stream"] = false
			if c.want == "" {
				oaAccept(t, srv, "/v1/responses", body)
				return
			}
			if e := oaReject(t, srv, "/v1/responses", body); e.Message != c.want || e.Param != "input" {
				t.Errorf("error\n got: %q (param %s)\nwant: %q", e.Message, e.Param, c.want)
			}
		})
	}
}

// Without include reasoning.encrypted_content the reasoning item has none; with store:false
// it then cannot come back, with store (the default) it can, by id or by item_reference.
func TestResponsesStoreAndPreviousResponse(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: reasoningReply})
	body := plain(inputText("user", "run it"))
	var first struct {
		ID     string           `json:"id"`
		Object string           `json:"object"`
		Status string           `json:"status"`
		Output []map[string]any `json:"output"`
		Usage  map[string]any   `json:"usage"`
	}
	if err := json.Unmarshal(oaAccept(t, srv, "/v1/responses", body), &first); err != nil {
		t.Fatal(err)
	}
	if first.Object != "response" || first.Status != "completed" || len(first.Output) != 2 || first.Output[0]["encrypted_content"] != nil {
		t.Fatalf("first response %+v", first)
	}
	rs, fc := first.Output[0], first.Output[1]
	out := fnOutput(fc["call_id"].(string), "hello")

	oaAccept(t, srv, "/v1/responses", plain(inputText("user", "run it"), rs, fc, out))
	oaAccept(t, srv, "/v1/responses", plain(inputText("user", "run it"), obj{"type": "item_reference", "id": rs["id"]}, obj{"type": "item_reference", "id": fc["id"]}, out))
	// previous_response_id brings the stored items: the output alone pairs with the stored call.
	oaAccept(t, srv, "/v1/responses", with(plain(out), "previous_response_id", first.ID))
	if e := oaReject(t, srv, "/v1/responses", with(plain(out), "previous_response_id", first.ID+"x")); e.Code != "previous_response_not_found" {
		t.Errorf("unknown previous response: %+v", e)
	}

	// A response made with store:false is not stored.
	var unstored struct{ ID string }
	json.Unmarshal(oaAccept(t, srv, "/v1/responses", with(body, "store", false)), &unstored)
	e := oaReject(t, srv, "/v1/responses", with(plain(inputText("user", "go on")), "previous_response_id", unstored.ID))
	if e.Message != "Previous response with id '"+unstored.ID+"' not found." || e.Param != "previous_response_id" || e.Code != "previous_response_not_found" {
		t.Errorf("previous response made with store:false: %+v", e)
	}
}

// A compaction_trigger item is answered with exactly one compaction item, which later
// requests may carry as an opaque item.
func TestResponsesCompaction(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: reasoningReply})
	s := respTurn(t, srv, codexBody(obj{"type": "compaction_trigger"}))
	if len(s.items) != 1 || s.items[0]["type"] != "compaction" || !strings.HasPrefix(s.items[0]["id"].(string), "cmp_item_") || s.items[0]["encrypted_content"] == "" {
		t.Fatalf("compaction output %v", s.items)
	}
	if out := s.completed["output"].([]any); len(out) != 1 {
		t.Errorf("completed output %v", out)
	}
	respTurn(t, srv, obj{"model": "gpt-5-codex", "stream": true, "store": false, "input": []any{s.items[0], inputText("user", "continue")}})
}

// The stream is what api-rules §4.3 and clients.md describe (checklist item 20), and the
// usage of response.completed is the recorded usage (§7).
func TestResponsesStream(t *testing.T) {
	reply := func(*fakeupstream.Request) fakeupstream.Reply {
		return fakeupstream.Reply{Content: []fakeupstream.Block{
			fakeupstream.Thinking("Look it up."),
			fakeupstream.Text("Looking."),
			fakeupstream.NamespacedToolUse("mcp__ctx", "fake_lookup", map[string]any{"id": "msg-42"}),
		}}
	}
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: reply, OpenAIMinCacheTokens: -1})
	resp, body := post(t, srv.URL+"/backend-api/codex/responses", codexBody(), oaHeaders())
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	s := readResponsesStream(t, body)
	var names []string
	for _, n := range s.events {
		if len(names) == 0 || names[len(names)-1] != n {
			names = append(names, n) // runs of the same delta collapse
		}
	}
	want := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done",
		"response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.completed",
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("events\n got %v\nwant %v", names, want)
	}
	if len(s.items) != 3 {
		t.Fatalf("items %v", s.items)
	}
	rs, msg, fc := s.items[0], s.items[1], s.items[2]
	if rs["summary"].([]any)[0].(map[string]any)["text"] != "Look it up." || rs["encrypted_content"] == nil {
		t.Errorf("reasoning %v", rs)
	}
	if msg["role"] != "assistant" || msg["status"] != "completed" || msg["content"].([]any)[0].(map[string]any)["text"] != "Looking." {
		t.Errorf("message %v", msg)
	}
	if fc["name"] != "fake_lookup" || fc["namespace"] != "mcp__ctx" || fc["arguments"] != `{"id":"msg-42"}` || fc["status"] != "completed" || !strings.HasPrefix(fc["call_id"].(string), "call_fake_") {
		t.Errorf("function_call %v", fc)
	}
	ids := map[any]bool{s.completed["id"]: true}
	for _, it := range s.items {
		ids[it["id"]] = true
	}
	if len(ids) != 4 || !strings.HasPrefix(s.completed["id"].(string), "resp_fake_") || s.created["id"] != s.completed["id"] {
		t.Errorf("ids not unique: %v", ids)
	}

	rec := srv.Requests()[0]
	u := s.completed["usage"].(map[string]any)
	if usageNum(u, "input_tokens") != rec.Usage.InputTokens+rec.Usage.CacheReadInputTokens || rec.Usage.InputTokens == 0 ||
		usageNum(u, "input_tokens_details.cached_tokens") != rec.Usage.CacheReadInputTokens ||
		usageNum(u, "output_tokens") != rec.Usage.OutputTokens || usageNum(u, "output_tokens_details.reasoning_tokens") < 1 ||
		usageNum(u, "total_tokens") != usageNum(u, "input_tokens")+usageNum(u, "output_tokens") {
		t.Errorf("usage %v, recorded %+v", u, rec.Usage)
	}
	if rec.Format != fakeupstream.FormatResponses || rec.MessageID != s.completed["id"] || rec.Path != "/backend-api/codex/responses" {
		t.Errorf("recorded %+v", rec)
	}

	// A second, different response gets fresh ids.
	again := readResponsesStream(t, oaAccept(t, srv, "/v1/responses", codexBody()))
	if again.completed["id"] == s.completed["id"] || again.items[0]["id"] == rs["id"] || again.items[2]["call_id"] == fc["call_id"] {
		t.Errorf("ids repeat across responses")
	}
}

// Injected errors: StreamError as response.failed with the error code (Codex maps
// context_length_exceeded and others, §4.3), Truncate as a stream without response.completed.
func TestResponsesInjectedErrors(t *testing.T) {
	var reply fakeupstream.Reply
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: func(*fakeupstream.Request) fakeupstream.Reply { return reply }})

	reply = fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("a"), fakeupstream.Text("b")},
		StreamError: &fakeupstream.Error{Status: 400, Type: "context_length_exceeded", Message: "Your input exceeds the context window of this model."}, StreamErrorAfter: 1}
	s := readResponsesStream(t, oaAccept(t, srv, "/v1/responses", codexBody()))
	if s.completed != nil || s.failed == nil || len(s.items) != 1 {
		t.Fatalf("StreamError: events %v", s.events)
	}
	e := s.failed["error"].(map[string]any)
	if s.failed["status"] != "failed" || e["code"] != "context_length_exceeded" || e["message"] != "Your input exceeds the context window of this model." {
		t.Errorf("response.failed %v", s.failed)
	}

	reply = fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("cut")}, Truncate: true}
	s = readResponsesStream(t, oaAccept(t, srv, "/v1/responses", codexBody()))
	if s.completed != nil || s.failed != nil || len(s.items) != 1 || s.events[len(s.events)-1] != "response.output_item.done" {
		t.Errorf("Truncate: events %v", s.events)
	}

	reply = fakeupstream.Reply{Error: &fakeupstream.Error{Status: http.StatusTooManyRequests, Type: "rate_limit_exceeded", Message: "Rate limit reached. Please try again in 2s."}}
	resp, out := post(t, srv.URL+"/v1/responses", codexBody(), oaHeaders())
	if got := openAIError(t, out); resp.StatusCode != http.StatusTooManyRequests || got.Type != "rate_limit_exceeded" || got.Message != reply.Error.Message {
		t.Errorf("Reply.Error: %d %+v", resp.StatusCode, got)
	}
	if r := srv.Requests()[2]; r.Status != http.StatusTooManyRequests || r.Error != reply.Error.Message || r.Format != fakeupstream.FormatResponses {
		t.Errorf("recorded %+v", r)
	}
}
