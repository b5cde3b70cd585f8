package proxy

import (
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// A trim in the middle of a tool loop, on both model families the fake models: Mythos 5.1
// (the open tool loop must start with its thinking, no prefix check) and Opus 5.5 (thinking
// bound to its prefix, api-rules §1.7.4).
func runMidLoopTrim(t *testing.T, model string, contractOnly bool) *rig {
	r := newRig(t, testSettings(2500), fakeupstream.Options{})
	r.proxy.contractStripOnly = contractOnly
	c := r.client(t, "think", model)
	c.tolerate = contractOnly
	c.userTurn("first task, use tools", output(20, 2))
	c.userTurn("second task, use tools", output(20, 2))
	if c.failed != "" {
		return r
	}
	// A long loop: the trim comes while a tool call is open.
	for _, text := range []string{"third task, use tools"} {
		c.msgs = append(c.msgs, map[string]any{"role": "user", "content": text})
		for step := 0; step < 8; step++ {
			if status, body := c.send(); status != 200 {
				r.t(t, "request %d: %d %s", len(c.sent), status, body)
				return r
			}
			last := c.msgs[len(c.msgs)-1]["content"].([]any)
			var results []any
			for _, b := range last {
				if blk := b.(map[string]any); blk["type"] == "tool_use" {
					results = append(results, map[string]any{"type": "tool_result", "tool_use_id": blk["id"], "content": output(20, 99)(step)})
				}
			}
			if len(results) == 0 {
				break
			}
			c.msgs = append(c.msgs, map[string]any{"role": "user", "content": results})
		}
	}
	return r
}

func (r *rig) t(t *testing.T, format string, args ...any) { t.Logf(format, args...) }

func TestTrimMidLoopAcceptedByBothThinkingFamilies(t *testing.T) {
	for _, model := range []string{"claude-mythos-5-1", "claude-opus-5-5"} {
		t.Run(model, func(t *testing.T) {
			r := runMidLoopTrim(t, model, false)
			reqs := r.accepted(t)
			trimmedMidLoop := false
			for _, rec := range reqs {
				body := string(rec.Body)
				if strings.Contains(body, "[smarter-compact: continuing session") && strings.HasSuffix(strings.TrimSpace(lastMessageRole(t, rec.Body)), "tool_result") {
					trimmedMidLoop = true
				}
			}
			if !trimmedMidLoop {
				t.Fatal("no trimmed request ended in an open tool loop: the test did not test it")
			}
		})
	}
}

// The contract's strip alone (keep the latest assistant run's thinking) is not enough on a
// model that binds thinking to its prefix: the fake answers the documented 400. This is why
// the proxy strips every kept assistant message on those models.
func TestContractStripAloneFailsOnPrefixBindingModels(t *testing.T) {
	r := runMidLoopTrim(t, "claude-opus-5-5", true)
	rej := r.fake.Rejections()
	if len(rej) == 0 {
		t.Fatal("want the fake to reject the kept, re-prefixed thinking block")
	}
	if !strings.Contains(rej[0].Error, "bound to a different conversation") {
		t.Fatalf("want the prefix-binding 400, got %q", rej[0].Error)
	}
}

// lastMessageRole describes the last message: its role and, for a block list, the type of
// its first block ("user tool_result").
func lastMessageRole(t *testing.T, body []byte) string {
	m := decodeJSON(t, body)
	msgs := m["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	desc := last["role"].(string)
	if blocks, ok := last["content"].([]any); ok && len(blocks) > 0 {
		desc += " " + blocks[0].(map[string]any)["type"].(string)
	}
	return desc
}

// R10. On a model that binds thinking to its prefix the strip point is "the message after
// the latest assistant message" (planTrim: strip = la+1). When the trimming request ends
// with an assistant message (a pause_turn continuation after a server tool, or a prefill on
// a model that allows it), la+1 == len(msgs): rewrite() then stores no strip_fp, and
// resolvePlan on the following requests strips nothing. The kept reply before the cut still
// carries thinking bound to the untrimmed prefix, and the API answers "bound to a different
// conversation" (api-rules §1.7.4) on every request until the next trim.
//
// Regression test from the first review of proxy/ (R1…R11 name its findings).
func TestReviewStripPointSurvivesATrimOfARequestEndingWithAnAssistantMessage(t *testing.T) {
	rules := fakeupstream.DefaultRules("claude-opus-5-5")
	rules.RejectPrefill = false // the request may end with an assistant message (pause_turn, prefill)
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{Models: map[string]fakeupstream.ModelRules{"claude-opus-5-5": rules}})
	c := r.client(t, "tail", "claude-opus-5-5")
	c.userTurn("one, use tools", output(3, 1))
	c.userTurn("two", output(1, 0))
	c.userTurn("three", output(1, 0))

	// The request that trims ends with an assistant message.
	must(t, r.root.SetForce("tail"))
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": "four"})
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "Answer:"}}})
	if status, body := c.send(); status != 200 {
		t.Fatalf("trimming request: %d %s", status, body)
	}
	// The next request carries the same history up to "four" (the prefill and its
	// continuation are dropped, as a client retrying without prefill would).
	c.msgs = c.msgs[:len(c.msgs)-2]
	if status, body := c.send(); status != 200 {
		t.Fatalf("the request after the trim was rejected: %d %s", status, body)
	}
	reqs := r.fake.Requests()
	if !strings.Contains(string(reqs[len(reqs)-1].Body), "[smarter-compact: continuing session tail;") {
		t.Fatal("the request after the trim does not carry the cut: the test tests nothing")
	}
}
