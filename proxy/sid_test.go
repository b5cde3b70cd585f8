package proxy

import (
	"net/http"
	"testing"
)

func TestSessionIDSources(t *testing.T) {
	jsonUID := `{"metadata":{"user_id":"{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"meta-json-1\"}"},"messages":[]}`
	legacy := `{"metadata":{"user_id":"user_abc_account_123_session_legacy-1234"},"messages":[]}`
	pck := `{"prompt_cache_key":"conv 7","messages":[]}`
	tests := []struct {
		name    string
		headers map[string]string
		body    string
		want    string
	}{
		{"our header first", map[string]string{"X-Smarter-Compact-Session-Id": "ours", "X-Claude-Code-Session-Id": "cc"}, jsonUID, "ours"},
		{"blank header falls through", map[string]string{"X-Smarter-Compact-Session-Id": " \t", "X-Claude-Code-Session-Id": "cc-1"}, jsonUID, "cc-1"},
		{"claude code header", map[string]string{"X-Claude-Code-Session-Id": "a/b"}, jsonUID, "a_b"},
		{"metadata json", nil, jsonUID, "meta-json-1"},
		{"metadata legacy", nil, legacy, "legacy-1234"},
		{"prompt cache key", nil, pck, "conv_7"},
		{"session_id header", map[string]string{"Session_id": "s1", "Conversation_id": "c1"}, `{"messages":[]}`, "s1"},
		{"conversation_id header", map[string]string{"Conversation_id": "c1"}, `{"messages":[]}`, "c1"},
		{"none", nil, `{"messages":[]}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			req, err := parseAnthropic([]byte(tc.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := sessionID(h, req); got != tc.want {
				t.Fatalf("got %q want %q", got, tc.want)
			}
		})
	}
}

func TestBindsThinkingToPrefix(t *testing.T) {
	for model, want := range map[string]bool{
		"claude-opus-5-5": true, "claude-fable-5-1": true, "claude-opus-5-5-20261001": true,
		"claude-sonnet-5-5": false, "claude-opus-6-0": false,
		"claude-mythos-5-1": false, "claude-sonnet-4-5": false, "claude-haiku-4-5-20251001": false,
		"claude-opus-5": false, "claude-sonnet-4-20250514": false, "gpt-5": false,
	} {
		if got := bindsThinkingToPrefix(model, nil); got != want {
			t.Errorf("%s: got %v want %v", model, got, want)
		}
	}
	if !bindsThinkingToPrefix("claude-sonnet-4-5", []byte(`{"type":"enabled","block_binding":{"prefix_mismatch_behavior":"error"}}`)) {
		t.Error("a request that sets block_binding binds")
	}
}
