package proxy

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

func TestUsageEventsCountBreakpoints(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "bp", "claude-opus-5-5")
	c.userTurn("hi", output(1, 0))
	c.userTurn("again", output(1, 0))
	r.accepted(t)
	rows, err := sessionDB(t, r, "bp").Query(`SELECT breakpoints, breakpoint_at, trimmed, cache_read_tokens IS NOT NULL, model FROM events WHERE kind='usage' ORDER BY id`)
	must(t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var n, trimmed, hasRead int
		var at, model string
		must(t, rows.Scan(&n, &at, &trimmed, &hasRead, &model))
		got = append(got, strings.Join([]string{at, model}, " "))
		if n != 3 || trimmed != 0 || hasRead != 1 {
			t.Errorf("usage event: %d breakpoints at %q, trimmed %d, cache read reported %d", n, at, trimmed, hasRead)
		}
	}
	want := []string{"system,system,m-1 claude-opus-5-5", "system,system,m-1 claude-opus-5-5"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q want %q", got, want)
	}
}

// The usage tap on the Chat and Responses routes (api-rules §7), one case a route:
//   - chat: the final chunk of a stream (the others carry "usage": null) or the JSON body's
//     usage; input excludes the cached tokens.
//   - responses: response.completed's usage in a stream (other events' usage ignored), the
//     body's usage otherwise, and a gzip stream, which the tap reads after the end; input
//     excludes the cached tokens.
//
// TestChatUsageTap (chat_test.go) and TestResponsesUsageTap (responses_test.go) are its
// cases chat and responses.
func TestUsageTap(t *testing.T) {
	type post struct {
		kind              string // stream, json or gzip stream
		path, body, sid   string
		hdr               map[string]string
		wantBody, wantUse string
	}
	const (
		chatStream = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\n" +
			"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n" +
			"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":1200,\"completion_tokens\":7,\"total_tokens\":1207,\"prompt_tokens_details\":{\"cached_tokens\":1024}}}\n\n" +
			"data: [DONE]\n\n"
		chatJSON   = `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":900,"completion_tokens":12,"total_tokens":912,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":300}}}`
		respStream = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"usage\":null}}\n\n" +
			"event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":{\"id\":\"resp_1\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n" +
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n" +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"usage\":{\"input_tokens\":5000,\"input_tokens_details\":{\"cached_tokens\":4096},\"output_tokens\":42,\"output_tokens_details\":{\"reasoning_tokens\":30},\"total_tokens\":5042}}}\n\n"
		respJSON = `{"id":"resp_2","object":"response","status":"completed","output":[],"usage":{"input_tokens":800,"input_tokens_details":{"cached_tokens":0},"output_tokens":9,"total_tokens":809}}`
	)
	for _, tc := range []struct {
		name       string
		stream     string // the upstream's answer to "stream":true
		streamType string // its Content-Type
		json       string // the upstream's answer otherwise
		posts      []post
	}{
		{"chat", chatStream, "text/event-stream", chatJSON, []post{
			{"stream", "/v1/chat/completions", `{"model":"gpt-5.4","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "chat-usage-s",
				map[string]string{"X-Session-Id": "chat-usage-s"}, chatStream, "input=176 read=1024 write=NULL output=7 trimmed=0"},
			{"json", "/v1/chat/completions", `{"model":"gpt-5.4","messages":[{"role":"user","content":"hi"}]}`, "chat-usage-j",
				map[string]string{"X-Session-Id": "chat-usage-j"}, chatJSON, "input=600 read=0 write=300 output=12 trimmed=0"},
		}},
		{"responses", respStream, "text/event-stream; charset=utf-8", respJSON, []post{
			{"stream", "/codex/responses", `{"model":"gpt-5.4","input":"hi","stream":true,"prompt_cache_key":"resp-usage-s"}`, "resp-usage-s",
				nil, respStream, "input=904 read=4096 write=NULL output=42 trimmed=0"},
			{"json", "/v1/responses", `{"model":"gpt-5.4","input":"hi","prompt_cache_key":"resp-usage-j"}`, "resp-usage-j",
				nil, respJSON, "input=800 read=0 write=NULL output=9 trimmed=0"},
			{"gzip stream", "/codex/responses", `{"model":"gpt-5.4","input":"hi","stream":true,"prompt_cache_key":"resp-usage-gz"}`, "resp-usage-gz",
				nil, respStream, "input=904 read=4096 write=NULL output=42 trimmed=0"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newAdUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				if bytes.Contains(body, []byte(`usage-gz`)) {
					// a compressed stream: the tap reads it after the end
					w.Header().Set("Content-Type", "text/event-stream")
					w.Header().Set("Content-Encoding", "gzip")
					zw := gzip.NewWriter(w)
					io.WriteString(zw, tc.stream)
					zw.Close()
					return
				}
				if bytes.Contains(body, []byte(`"stream":true`)) {
					w.Header().Set("Content-Type", tc.streamType)
					for _, part := range strings.SplitAfter(tc.stream, "\n\n") {
						io.WriteString(w, part)
						w.(http.Flusher).Flush()
					}
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, tc.json)
			})
			h := newAdHTTP(t, testSettings(10_000_000), allOn{}, up.srv.URL)
			for _, p := range tc.posts {
				what := p.kind
				if what == "json" {
					what = "body"
				}
				r, b := h.post(t, p.path, []byte(p.body), p.hdr)
				if r.StatusCode != 200 || string(b) != p.wantBody {
					t.Fatalf("the %s did not reach the client unchanged: %d %q", what, r.StatusCode, b)
				}
				if got := adUsage(t, h, p.sid); got != p.wantUse {
					t.Errorf("%s usage %s, want %s", p.kind, got, p.wantUse)
				}
			}
		})
	}
}
