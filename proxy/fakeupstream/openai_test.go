package fakeupstream_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

func TestOpenAIRoutes(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{APIKey: "dummy-key"})
	get := func(path string, extra ...string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header = oaHeaders(extra...)
		return do(t, req)
	}

	for _, path := range []string{"/v1/models", "/backend-api/codex/models?client_version=0.171.0", "/models"} {
		if resp, out := get(path); resp.StatusCode != http.StatusOK || string(out) != `{"object":"list","data":[],"models":[]}` {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, out)
		}
	}

	// Codex's websocket upgrade is refused with 426, after which it falls back to HTTP.
	resp, out := get("/v1/responses", "Upgrade: websocket", "Connection: Upgrade", "OpenAI-Beta: responses_websockets=2026-02-06")
	if e := openAIError(t, out); resp.StatusCode != http.StatusUpgradeRequired || e.Message != "websocket transport is not supported by this fake; use HTTP" || e.Type != "invalid_request_error" {
		t.Errorf("websocket: %d %+v", resp.StatusCode, e)
	}
	if resp, _ := get("/v1/responses"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/responses without upgrade: %d", resp.StatusCode)
	}

	// Remote compaction.
	var c struct {
		ID     string           `json:"id"`
		Object string           `json:"object"`
		Output []map[string]any `json:"output"`
		Usage  map[string]any   `json:"usage"`
	}
	if err := json.Unmarshal(oaAccept(t, srv, "/backend-api/codex/responses/compact", codexBody()), &c); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.ID, "cmp_fake_") || c.Object != "response.compaction" || len(c.Output) != 1 || c.Output[0]["type"] != "compaction" ||
		!strings.HasPrefix(c.Output[0]["id"].(string), "cmp_item_") || c.Output[0]["encrypted_content"] == "" || usageNum(c.Usage, "input_tokens") < 1 {
		t.Errorf("compact: %+v", c)
	}

	// Errors on the OpenAI routes use the OpenAI envelope.
	h := oaHeaders("Authorization: Bearer wrong")
	resp, out = post(t, srv.URL+"/v1/chat/completions", chatMinimal, h)
	if e := openAIError(t, out); resp.StatusCode != http.StatusUnauthorized || e.Code != "invalid_api_key" {
		t.Errorf("wrong key: %d %+v", resp.StatusCode, e)
	}
	resp, out = post(t, srv.URL+"/v1/responses", `{"model":`, oaHeaders())
	if e := openAIError(t, out); resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(e.Message, "We could not parse the JSON body of your request.") {
		t.Errorf("invalid JSON: %d %+v", resp.StatusCode, e)
	}
	resp, out = post(t, srv.URL+"/v1/completions", chatMinimal, oaHeaders())
	if typ, _ := apiError(t, out); resp.StatusCode != http.StatusNotFound || typ != "not_found_error" {
		t.Errorf("unknown path: %d %s", resp.StatusCode, out)
	}
	for _, path := range []string{"/chat/completions", "/openai/v1/chat/completions"} {
		oaAccept(t, srv, path, chatMinimal)
	}
	for _, path := range []string{"/responses", "/backend-api/codex/responses"} {
		oaAccept(t, srv, path, plain(inputText("user", "hi")))
	}

	var recorded []string
	for _, r := range srv.Requests() {
		recorded = append(recorded, r.Method+" "+r.Path+" "+r.Format+" "+strconv.Itoa(r.Status))
	}
	for _, want := range []string{
		"GET /v1/models  200", "GET /v1/responses responses 426", "GET /v1/responses  404",
		"POST /backend-api/codex/responses/compact responses 200", "POST /v1/chat/completions chat 401",
		"POST /v1/responses responses 400", "POST /v1/completions  404", "POST /chat/completions chat 200",
	} {
		if !slices.Contains(recorded, want) {
			t.Errorf("no record %q in %q", want, recorded)
		}
	}
}

// Codex compresses its body with zstd on the ChatGPT backend (api-rules §4.4); the fake
// decodes it and records both forms, and refuses a body that is not what its header says.
func TestOpenAIZstdBody(t *testing.T) {
	raw := mustJSON(t, codexBody(fnCall("call_a", "exec_command", `{"cmd":"ls"}`), fnOutput("call_a", "a.txt")))
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		t.Fatal(err)
	}
	zs := enc.EncodeAll(raw, nil)
	enc.Close()

	srv := fakeupstream.Start(t, fakeupstream.Options{})
	readResponsesStream(t, accept(t, srv, "/backend-api/codex/responses", zs, oaHeaders("Content-Encoding: zstd")))
	if r := srv.Requests()[0]; string(r.Body) != string(raw) || string(r.Raw) != string(zs) {
		t.Errorf("recorded raw %d bytes, body %d bytes", len(r.Raw), len(r.Body))
	}
	zc := enc.EncodeAll(mustJSON(t, obj{"model": "gpt-fake", "messages": []any{obj{"role": "user", "content": "hi"}}}), nil)
	if resp, out := post(t, srv.URL+"/v1/chat/completions", zc, oaHeaders("Content-Encoding: zstd")); resp.StatusCode != http.StatusOK {
		t.Errorf("zstd chat: %d %s", resp.StatusCode, out)
	}

	resp, out := post(t, srv.URL+"/backend-api/codex/responses", raw, oaHeaders("Content-Encoding: zstd"))
	if e := openAIError(t, out); resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(e.Message, "The request body could not be decoded with Content-Encoding zstd") {
		t.Errorf("undecodable body: %d %+v", resp.StatusCode, e)
	}
}

// The OpenAI prompt cache is automatic and exact-prefix (api-rules §3.4): a request that
// repeats an earlier request of the same model and prompt_cache_key reads it all from the
// cache; a change early in the prompt, another key or another model reads nothing; ids and
// string-vs-parts content do not count; prefixes under the minimum are not cached.
func TestOpenAIPromptCache(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: reasoningReply, OpenAIMinCacheTokens: -1})
	send := func(body obj) fakeupstream.Usage {
		t.Helper()
		body["stream"] = false
		oaAccept(t, srv, "/v1/responses", body)
		reqs := srv.Requests()
		return reqs[len(reqs)-1].Usage
	}
	first := codexBody()
	u1 := send(first)
	if u1.CacheReadInputTokens != 0 || u1.InputTokens == 0 {
		t.Fatalf("first request usage %+v", u1)
	}
	call := fnCall("call_1", "exec_command", `{"cmd":"ls"}`)
	out := fnOutput("call_1", "a.txt")
	u2 := send(codexBody(call, out))
	if u2.CacheReadInputTokens != u1.InputTokens || u2.InputTokens == 0 {
		t.Errorf("second request read %d, want the first prompt's %d (usage %+v)", u2.CacheReadInputTokens, u1.InputTokens, u2)
	}

	// A changed first item leaves only the tools, which come before the items, cached.
	probe := codexBody()
	probe["input"] = []any{inputText("user", "something else")}
	onlyTools := send(probe).CacheReadInputTokens
	if onlyTools == 0 || onlyTools >= u1.InputTokens {
		t.Errorf("same tools, other input: read %d of %d", onlyTools, u1.InputTokens)
	}
	changed := codexBody(call, out)
	changed["input"].([]any)[0] = inputText("developer", "You are a different agent.")
	if u := send(changed); u.CacheReadInputTokens != onlyTools {
		t.Errorf("changed first item: read %d, want the tools' %d", u.CacheReadInputTokens, onlyTools)
	}
	noTools := func(dev string) obj {
		return obj{"model": "gpt-5-codex", "prompt_cache_key": "k2", "input": []any{inputText("developer", dev), inputText("user", "hi")}}
	}
	send(noTools("You are terse."))
	if u := send(noTools("You are verbose.")); u.CacheReadInputTokens != 0 {
		t.Errorf("changed first item without tools: read %d", u.CacheReadInputTokens)
	}
	if u := send(noTools("You are terse.")); u.CacheReadInputTokens == 0 {
		t.Errorf("repeated request without tools: read 0")
	}
	otherKey := codexBody(call, out)
	otherKey["prompt_cache_key"] = "another-thread"
	if u := send(otherKey); u.CacheReadInputTokens != 0 {
		t.Errorf("other prompt_cache_key: read %d", u.CacheReadInputTokens)
	}
	otherModel := codexBody(call, out)
	otherModel["model"] = "gpt-5.3-codex"
	if u := send(otherModel); u.CacheReadInputTokens != 0 {
		t.Errorf("other model: read %d", u.CacheReadInputTokens)
	}
	toolsChanged := codexBody(call, out)
	toolsChanged["tools"] = toolsChanged["tools"].([]any)[1:]
	if u := send(toolsChanged); u.CacheReadInputTokens != 0 {
		t.Errorf("first tool dropped: read %d", u.CacheReadInputTokens)
	}

	// Ids and status do not reach the model; a string content is its one part.
	stripped := codexBody(without(call, "id"), out)
	in := stripped["input"].([]any)
	in[0], in[1] = without(in[0].(obj), "id"), obj{"type": "message", "role": "user", "content": "run echo hello"}
	if u := send(stripped); u.CacheReadInputTokens != u2.InputTokens+u2.CacheReadInputTokens {
		t.Errorf("ids stripped: read %d, want %d", u.CacheReadInputTokens, u2.InputTokens+u2.CacheReadInputTokens)
	}

	// Chat: the same, keyed on model and prompt_cache_key.
	chat := func(msgs []any) fakeupstream.Usage {
		t.Helper()
		oaAccept(t, srv, "/v1/chat/completions", obj{"model": "gpt-fake", "prompt_cache_key": "k", "messages": msgs})
		reqs := srv.Requests()
		return reqs[len(reqs)-1].Usage
	}
	loop := chatLoop()
	c1 := chat(loop[:2])
	c2 := chat(loop)
	if c2.CacheReadInputTokens != c1.InputTokens {
		t.Errorf("chat second request read %d, want %d", c2.CacheReadInputTokens, c1.InputTokens)
	}
	if c3 := chat(splice(loop, 0, obj{"role": "system", "content": "You are verbose."})); c3.CacheReadInputTokens != 0 {
		t.Errorf("chat changed system: read %d", c3.CacheReadInputTokens)
	}

	// The default minimum is 1024 tokens: a short prompt is never cached, a long one is.
	srv = fakeupstream.Start(t, fakeupstream.Options{})
	short := obj{"model": "gpt-fake", "messages": []any{obj{"role": "user", "content": "hi"}}}
	oaAccept(t, srv, "/v1/chat/completions", short)
	oaAccept(t, srv, "/v1/chat/completions", short)
	long := obj{"model": "gpt-fake", "messages": []any{obj{"role": "system", "content": strings.Repeat("Long system prompt. ", 200)}, obj{"role": "user", "content": "hi"}}}
	oaAccept(t, srv, "/v1/chat/completions", long)
	oaAccept(t, srv, "/v1/chat/completions", long)
	reqs := srv.Requests()
	if reqs[1].Usage.CacheReadInputTokens != 0 || reqs[3].Usage.CacheReadInputTokens < 1024 {
		t.Errorf("minimum: short read %d, long read %d", reqs[1].Usage.CacheReadInputTokens, reqs[3].Usage.CacheReadInputTokens)
	}
}

// A Reply function sees every format through the same Request, and the helpers answer for
// each.
func TestOpenAIRequestHelpers(t *testing.T) {
	seen := make(chan *fakeupstream.Request, 4)
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: func(req *fakeupstream.Request) fakeupstream.Reply {
		seen <- req
		return fakeupstream.DefaultReply(req)
	}})

	chatTools := []any{obj{"type": "function", "function": obj{"name": "bash", "parameters": obj{"type": "object"}}},
		obj{"type": "function", "function": obj{"name": "read"}}}
	oaAccept(t, srv, "/v1/chat/completions", obj{"model": "gpt-fake", "tools": chatTools, "messages": chatLoop()})
	req := <-seen
	if req.Format != fakeupstream.FormatChat || len(req.Items) != 5 || req.Model != "gpt-fake" || req.Stream || len(req.Tools) != 2 ||
		!req.EndsWithToolResults() || req.LastUserText() != "run both" || req.Messages != nil {
		t.Errorf("chat request %+v", req)
	}
	if got := req.ToolNames(); !slices.Equal(got, []string{"bash", "read"}) {
		t.Errorf("chat tool names %v", got)
	}
	if got := req.ToolResultTexts(); !slices.Equal(got, []string{"/tmp\n", "a.txt"}) {
		t.Errorf("chat tool results %q", got)
	}

	body := codexBody(fnCall("call_a", "fake_lookup", `{"id":"x"}`),
		obj{"type": "function_call_output", "call_id": "call_a", "output": []any{obj{"type": "input_text", "text": "Wall time: 0.0041 seconds\nOutput:"}, obj{"type": "input_text", "text": "found"}}})
	body["instructions"] = "be terse"
	oaAccept(t, srv, "/v1/responses", body)
	req = <-seen
	if req.Format != fakeupstream.FormatResponses || len(req.Items) != 4 || req.Instructions != "be terse" || !req.Stream ||
		!req.EndsWithToolResults() || req.LastUserText() != "run echo hello" {
		t.Errorf("responses request %+v", req)
	}
	if got := req.ToolNames(); !slices.Equal(got, []string{"exec_command", "mcp__ctx__fake_lookup"}) {
		t.Errorf("responses tool names %v", got)
	}
	if got := req.ToolResultTexts(); !slices.Equal(got, []string{"Wall time: 0.0041 seconds\nOutput:\nfound"}) {
		t.Errorf("responses tool results %q", got)
	}

	oaAccept(t, srv, "/v1/responses", obj{"model": "gpt-5-codex", "input": "just a string"})
	req = <-seen
	if len(req.Items) != 1 || req.LastUserText() != "just a string" || req.EndsWithToolResults() || req.Items[0]["type"] != "message" {
		t.Errorf("string input seen as %v", req.Items)
	}

	turn(t, srv, ccBody("claude-opus-5-5", assistant(obj{"type": "tool_use", "id": "toolu_a", "name": "Bash", "input": obj{}}),
		user(obj{"type": "tool_result", "tool_use_id": "toolu_a", "content": []any{text("one"), text("two")}})), ccHeaders())
	req = <-seen
	if req.Format != fakeupstream.FormatAnthropic || req.Items != nil || !slices.Equal(req.ToolResultTexts(), []string{"one\ntwo"}) {
		t.Errorf("anthropic request: format %q results %q", req.Format, req.ToolResultTexts())
	}
}
