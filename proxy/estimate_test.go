package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// R3. The estimate discounts base64 payloads only for image/document blocks at the top of
// a message's content (parseBlock, "source"). An image inside a tool_result (Claude Code's
// Read of a PNG, screenshots from MCP tools) counts with its full base64 length, so one
// 500 kB screenshot makes a ~20 k-token prompt look like ~200 k tokens and forces a trim
// far below the threshold (seed 001, token estimate: "6400 per binary block"). Calibration
// does not help on the request that brings the image: with a thread sample the estimate is
// sample tokens + (new chars) / ratio, and the new chars are the whole base64 payload, so
// every large screenshot mid-session (Playwright/MCP screenshots, Read of a PNG) forces a
// new cut and a prompt-cache miss.
//
// Regression test from the first review of proxy/ (R1…R11 name its findings).
func TestReviewImageInToolResultDoesNotForceATrim(t *testing.T) {
	r := newRig(t, testSettings(0), fakeupstream.Options{}) // threshold follows the model: 120000
	c := r.client(t, "shot", "claude-mythos-5-1")
	c.userTurn("Open the app, use tools", output(20, 1)) // calibrated: the thread has usage samples
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": "Take a screenshot of the login page, use tools"})
	if status, body := c.send(); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var results []any
	for _, b := range c.msgs[len(c.msgs)-1]["content"].([]any) {
		if blk := b.(map[string]any); blk["type"] == "tool_use" {
			img := strings.Repeat("iVBORw0KGgo", 500_000/11) // a ~370 kB PNG, ~1600 real tokens
			results = append(results, map[string]any{"type": "tool_result", "tool_use_id": blk["id"], "content": []any{
				map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": img}},
			}})
		}
	}
	if len(results) == 0 {
		t.Fatal("the model called no tool")
	}
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": results})
	if status, body := c.send(); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	reqs := r.accepted(t)
	last := reqs[len(reqs)-1]
	if strings.Contains(string(last.Body), "[smarter-compact: continuing session") {
		t.Fatal("a short session was trimmed when one screenshot arrived in a tool_result: the image was estimated at its base64 length")
	}
}

// R8. The calibration pairs two different character counts. recordUsage stores the
// characters render() actually forwarded (thinking stripped), while the next request's
// estimate uses viewChars(), which counts every kept message at its raw length, signed
// thinking included. After a trim on a model that binds thinking to its prefix every kept
// assistant message before the strip point is sent without its thinking, so each later
// estimate is too high by the stripped bytes / ratio, for as long as the cut stands, and the
// next trim fires early (seed 001, token estimate: the characters counted are the request's,
// i.e. what is sent). The two counts must agree for the same view.
//
// Regression test from the first review of proxy/ (R1…R11 name its findings).
func TestReviewEstimateCountsTheCharactersItForwards(t *testing.T) {
	long := strings.Repeat("thinking about it ", 2000) // a summarized thinking block, ~36 kB
	atLong := func(id string) string {
		return fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":%q,"signature":"sig"},{"type":"tool_use","id":%q,"name":"Bash","input":{"command":"ls"}}]}`, long, id)
	}
	replyLong := fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":%q,"signature":"sig"},{"type":"text","text":"done"}]}`, long)
	// The reply before the cut turn is kept and, on a binding model, loses its thinking.
	raws := []string{u("task"), a("r1"), u("q2"), atLong("t1"), ur("t1"), atLong("t2"), ur("t2"), replyLong, u("q3")}
	body := reviewBody("claude-opus-5-5", "", raws...)
	req, err := parseAnthropic(body, nil)
	must(t, err)
	msgs := buildMsgs(t, raws...)
	plan := planTrim(msgs, noPlan(firstRealUser(msgs)), func(cutPlan) bool { return false }, true)
	if !plan.active() {
		t.Fatal("no trim")
	}
	block := PointerText("s", plan.dropped(msgs))
	estimated := viewChars(req, msgs, plan, block)
	sent := render(req, msgs, plan, block, false, "anthropic").chars
	if d := estimated - sent; d > 200 || d < -200 {
		t.Fatalf("the estimate counts %d characters for a view that forwards %d (off by %d): stripped thinking is counted", estimated, sent, d)
	}
}
