package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

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

// Regressions found in review of the OpenAI adapters; each test failed before its fix.

// A later turn sent as two user items (Codex: <environment_context> then the prompt) is one
// cut turn: the in-turn gap once dropped the prompt and kept only the environment item,
// which carried the pointer.
func TestCutTurnOfTwoUserItemsKeepsItsPrompt(t *testing.T) {
	dev := `{"type":"message","role":"developer","content":[{"type":"input_text","text":"sys"}]}`
	items := []string{dev, regUser("<environment_context>a</environment_context>"), regUser("task one"), regAsst("done one"), regUser("task mid"), regAsst("done mid"),
		regUser("<environment_context>b</environment_context>"), regUser("TASK TWO: fix the bug")}
	for n := 1; n <= 6; n++ {
		items = append(items, regStep(n))
	}
	body := []byte(`{"model":"gpt-5.4","input":[` + strings.Join(items, ",") + `]}`)
	e := newAdEnv(t, testSettings(1_000_000))
	res := e.send(t, adCodex, adHeader("two"), body, true)
	if res.trimmed != 2 {
		t.Fatalf("trimmed = %d", res.trimmed)
	}
	if !strings.Contains(string(res.body), "TASK TWO: fix the bug") {
		t.Fatalf("the cut turn's prompt is not in the view:\n%s", respIDs(t, res.body))
	}
}

// The thread cache is keyed by format: a message first parsed as Chat was reused for an
// Anthropic request of the same session and thread when its bytes were identical (a plain
// {"role":"user","content":"…"} is valid in both), and the Anthropic renderer, finding no
// blocks, sent the cut turn as the pointer alone.
func TestThreadCacheIsPerFormat(t *testing.T) {
	msgs := `[{"role":"user","content":"first task"},{"role":"assistant","content":"a1"},` +
		`{"role":"user","content":"second"},{"role":"assistant","content":"a2"},{"role":"user","content":"THIRD QUESTION"}]`
	e := newAdEnv(t, testSettings(1_000_000))
	h := adHeader("xfmt")
	e.send(t, adChat, h, []byte(`{"model":"gpt-5.4","messages":`+msgs+`}`), false)
	res := e.send(t, adAnthropic, h, []byte(`{"model":"claude-sonnet-4-5","max_tokens":100,"messages":`+msgs+`}`), true)
	if res.trimmed != 2 {
		t.Fatalf("trimmed = %d", res.trimmed)
	}
	if !strings.Contains(string(res.body), "THIRD QUESTION") {
		t.Fatalf("the cut turn lost its text:\n%s", res.body)
	}
}

// Legacy function calling names only the function, so pairing by name made two calls of
// the same function in different turns one pair: every cut whose kept part called it again
// was rejected, and a forced trim of a long conversation dropped nothing.
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

// A Responses request with "conversation" keeps its history upstream like a
// previous_response_id continuation: input holds only the new items, and each is appended
// to the stored conversation, so it passes through untouched (a rewrite would add a
// standing-instruction item to the user's conversation on every turn).
func TestResponsesConversationPassesThrough(t *testing.T) {
	e := newAdEnv(t, testSettings(1_000_000))
	body := []byte(`{"model":"gpt-5.4","conversation":"conv_123","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"next question"}]}]}`)
	res, _, err := e.p.rewriteAs(adResponses, adHeader("conv"), body)
	if err != errPassThrough {
		got := ""
		if res != nil {
			got = string(res.body)
		}
		t.Fatalf("want pass-through (history lives upstream), got err=%v body:\n%.400s", err, got)
	}
}

// A trim the threshold asks for must shrink the request: dropping two short messages while
// adding a pointer of about 1 KB made it bigger (seen by a new user with a small threshold:
// tokens_before=11430 tokens_after=11577). A forced trim still happens.
func TestThresholdTrimThatWouldGrowTheRequestIsSkipped(t *testing.T) {
	body := []byte(`{"model":"gpt-5.4","messages":[{"role":"system","content":"sys"},` +
		`{"role":"user","content":"task"},{"role":"assistant","content":"r1"},` +
		`{"role":"user","content":"q2"},{"role":"assistant","content":"r2"},{"role":"user","content":"q3"}]}`)
	h := http.Header{}
	h.Set("X-Session-Id", "grow")
	p := benchProxy(t, 1) // every request is over the threshold
	res, _, err := p.rewriteAs(target{chatFormat, "openai"}, h, body)
	if err != nil {
		t.Fatal(err)
	}
	if res.trimmed != 0 || strings.Contains(string(res.body), "[smarter-compact: continuing session") {
		t.Fatalf("a trim that drops 2 short messages and adds the pointer was made (trimmed=%d)", res.trimmed)
	}

	forced := benchProxy(t, 1)
	if err := forced.root.SetForce("grow"); err != nil {
		t.Fatal(err)
	}
	res, _, err = forced.rewriteAs(target{chatFormat, "openai"}, h, body)
	if err != nil {
		t.Fatal(err)
	}
	if res.trimmed != 2 {
		t.Fatalf("a forced trim was skipped (trimmed=%d)", res.trimmed)
	}
}
