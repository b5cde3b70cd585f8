package fakeupstream_test

import (
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

type usage struct{ input, creation, read, output int }

func usageOf(m map[string]any) usage {
	return usage{num(m["input_tokens"]), num(m["cache_creation_input_tokens"]), num(m["cache_read_input_tokens"]), num(m["output_tokens"])}
}

func measure(t *testing.T, body any) fakeupstream.PromptSize {
	t.Helper()
	m, err := fakeupstream.Measure(mustJSON(t, body))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func lastBreakpoint(t *testing.T, m fakeupstream.PromptSize) int {
	t.Helper()
	if len(m.Breakpoints) == 0 {
		t.Fatal("no breakpoints")
	}
	return m.Breakpoints[len(m.Breakpoints)-1].Tokens
}

func TestTokens(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 1, 3: 1, 4: 2, 3000: 1000} {
		if got := fakeupstream.Tokens(n); got != want {
			t.Errorf("Tokens(%d) = %d, want %d", n, got, want)
		}
	}
}

// The second request of a Claude Code session extends the first: it reads the first one's
// prefix through its last breakpoint — although the role "system" message changed from a
// cached one-block list to a string and the marker moved — and writes the rest up to its own
// last breakpoint (api-rules §1.8, checklist §6 item 13).
func TestPromptCacheAcrossTurns(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: scripted})
	const model = "claude-opus-5-5"
	b1 := ccBody(model)
	first := turn(t, srv, b1, ccHeaders())
	m1 := measure(t, b1)
	if got, want := len(m1.Breakpoints), 3; got != want {
		t.Fatalf("%d breakpoints in a Claude Code request, want %d: %+v", got, want, m1.Breakpoints)
	}
	want1 := usage{input: m1.Tokens - lastBreakpoint(t, m1), creation: lastBreakpoint(t, m1), read: 0}
	if got := usageOf(first.start["usage"].(map[string]any)); got.input != want1.input || got.creation != want1.creation || got.read != 0 {
		t.Errorf("first turn usage %+v, want %+v", got, want1)
	}

	b2 := ccBody(model, asAssistant(first), user(toolResult(toolUseID(t, first), "hello")))
	second := turn(t, srv, b2, ccHeaders())
	m2 := measure(t, b2)
	want2 := usage{
		input:    m2.Tokens - lastBreakpoint(t, m2),
		creation: lastBreakpoint(t, m2) - lastBreakpoint(t, m1),
		read:     lastBreakpoint(t, m1),
	}
	got2 := usageOf(second.start["usage"].(map[string]any))
	if got2.input != want2.input || got2.creation != want2.creation || got2.read != want2.read {
		t.Errorf("second turn usage %+v, want %+v", got2, want2)
	}
	if got2.input+got2.creation+got2.read != m2.Tokens {
		t.Errorf("usage %+v does not sum to the prompt size %d", got2, m2.Tokens)
	}
	// message_delta repeats the input side cumulatively and carries the output count.
	final := usageOf(second.usage)
	rec := srv.Requests()[1].Usage
	if final.read != got2.read || final.input != got2.input || final.output < 1 || final.output != rec.OutputTokens || rec.CacheReadInputTokens != got2.read {
		t.Errorf("message_delta usage %+v, recorded %+v", final, rec)
	}

	// The same request again reads everything up to its last breakpoint.
	again := usageOf(turn(t, srv, b2, ccHeaders()).start["usage"].(map[string]any))
	if again.read != lastBreakpoint(t, m2) || again.creation != 0 {
		t.Errorf("repeat usage %+v, want read %d and no creation", again, lastBreakpoint(t, m2))
	}

	// Another model has its own cache (a model switch invalidates everything).
	b3 := ccBody(model, asAssistant(first), user(toolResult(toolUseID(t, first), "hello")))
	b3["model"] = "claude-sonnet-5-5"
	if u := usageOf(turn(t, srv, b3, ccHeaders()).start["usage"].(map[string]any)); u.read != 0 {
		t.Errorf("other model read %d from the cache", u.read)
	}
}

// The cache checks a breakpoint and up to 20 blocks before it (api-rules §1.8).
func TestCacheLookback(t *testing.T) {
	const model = "claude-sonnet-4-5"
	sys := []any{cached(text("You are terse."))}
	base := obj{"model": model, "max_tokens": 1024, "system": sys, "messages": []any{user(cached(text("question")))}}
	extended := func(n int) obj {
		var blocks []any
		for i := range n {
			blocks = append(blocks, text("part "+describe(i)))
		}
		blocks[n-1] = cached(blocks[n-1].(obj))
		return obj{"model": model, "max_tokens": 1024, "system": sys, "messages": []any{
			user(text("question")), assistant(text("ok")), user(blocks...),
		}}
	}
	for _, c := range []struct {
		blocks int
		hit    bool
	}{{19, true}, {20, false}} {
		srv := fakeupstream.Start(t, fakeupstream.Options{})
		post(t, srv.URL+"/v1/messages", base, headers())
		post(t, srv.URL+"/v1/messages", extended(c.blocks), headers())
		got := srv.Requests()[1].Usage
		mb, me := measure(t, base), measure(t, extended(c.blocks))
		want := mb.Breakpoints[0].Tokens // only the system breakpoint
		if c.hit {
			want = lastBreakpoint(t, mb)
		}
		if got.CacheReadInputTokens != want {
			t.Errorf("%d new blocks: read %d, want %d", c.blocks, got.CacheReadInputTokens, want)
		}
		if got.InputTokens+got.CacheCreationInputTokens+got.CacheReadInputTokens != me.Tokens {
			t.Errorf("%d new blocks: usage %+v does not sum to %d", c.blocks, got, me.Tokens)
		}
	}
}

func TestCacheTTLAndMinimum(t *testing.T) {
	body := obj{"model": "claude-sonnet-4-5", "max_tokens": 1024,
		"system":   []any{obj{"type": "text", "text": ccSystemPrompt, "cache_control": obj{"type": "ephemeral", "ttl": "1h"}}},
		"messages": []any{user(cached(text("question")))}}
	m := measure(t, body)

	srv := fakeupstream.Start(t, fakeupstream.Options{})
	post(t, srv.URL+"/v1/messages", body, headers())
	u := srv.Requests()[0].Usage
	if u.CacheCreation1h != m.Breakpoints[0].Tokens || u.CacheCreation5m != m.Breakpoints[1].Tokens-m.Breakpoints[0].Tokens || u.CacheCreationInputTokens != u.CacheCreation1h+u.CacheCreation5m {
		t.Errorf("usage %+v for breakpoints %+v", u, m.Breakpoints)
	}

	rules := fakeupstream.DefaultRules("claude-sonnet-4-5")
	rules.MinCacheableTokens = m.Tokens + 1
	srv = fakeupstream.Start(t, fakeupstream.Options{Models: map[string]fakeupstream.ModelRules{"claude-sonnet-4-5": rules}})
	post(t, srv.URL+"/v1/messages", body, headers())
	post(t, srv.URL+"/v1/messages", body, headers())
	if u := srv.Requests()[1].Usage; u.CacheCreationInputTokens != 0 || u.CacheReadInputTokens != 0 || u.InputTokens != m.Tokens {
		t.Errorf("below the minimum: usage %+v, want all %d uncached", u, m.Tokens)
	}
}
