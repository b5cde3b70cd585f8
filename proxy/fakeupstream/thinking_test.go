package fakeupstream_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// ccSession runs two Claude Code turns against srv: the first asks, the model answers with
// thinking, text and a Bash tool_use; the second carries the tool result. It returns both
// streamed messages.
func ccSession(t *testing.T, srv *fakeupstream.Server, model string) (first, second streamed) {
	t.Helper()
	first = turn(t, srv, ccBody(model), ccHeaders())
	id := toolUseID(t, first)
	second = turn(t, srv, ccBody(model, asAssistant(first), user(toolResult(id, "hello"))), ccHeaders())
	return first, second
}

// history3 is the third request of the session: both answers and a new user prompt.
func history3(t *testing.T, model string, first, second streamed) obj {
	return ccBody(model, asAssistant(first), user(toolResult(toolUseID(t, first), "hello")), asAssistant(second), user(text("thanks, now list files")))
}

func TestClaudeCodeSessionAccepted(t *testing.T) {
	for _, model := range []string{"claude-opus-5-5", "claude-sonnet-5-5"} {
		t.Run(model, func(t *testing.T) {
			srv := fakeupstream.Start(t, fakeupstream.Options{Reply: scripted})
			first, second := ccSession(t, srv, model)
			th := first.content[0].(map[string]any)
			if th["type"] != "thinking" || th["thinking"] != "" || th["signature"] == "" {
				t.Fatalf("display omitted: first block %v", th)
			}
			if first.stopReason != "tool_use" || second.stopReason != "end_turn" {
				t.Errorf("stop reasons %q, %q", first.stopReason, second.stopReason)
			}
			turn(t, srv, history3(t, model, first, second), ccHeaders())
			if first.start["id"] == second.start["id"] {
				t.Errorf("message ids repeat: %v", first.start["id"])
			}
			if rej := srv.Rejections(); len(rej) != 0 {
				t.Errorf("rejections: %+v", rej)
			}
		})
	}
}

func TestSignatureTamper(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: scripted})
	model := "claude-sonnet-5-5" // no prefix binding: only the signature itself is checked
	first, second := ccSession(t, srv, model)
	for _, c := range []struct {
		name   string
		tamper func(b map[string]any)
	}{
		{"thinking text changed", func(b map[string]any) { b["thinking"] = "I was told to." }},
		{"signature changed", func(b map[string]any) { b["signature"] = strings.ToUpper(b["signature"].(string)) }},
		{"signature emptied", func(b map[string]any) { b["signature"] = "" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := history3(t, model, first, second)
			var copied obj
			json.Unmarshal(mustJSON(t, body), &copied) // deep copy
			a := copied["messages"].([]any)[2].(map[string]any)["content"].([]any)[0].(map[string]any)
			c.tamper(a)
			want := "messages.2.content.0: Invalid `signature` in `thinking` block"
			if got := reject(t, srv, copied, ccHeaders()); got != want {
				t.Errorf("got %s\nwant %s", got, want)
			}
		})
	}
	// The untouched history still passes.
	turn(t, srv, history3(t, model, first, second), ccHeaders())
}

func TestLatestAssistantCannotBeModified(t *testing.T) {
	// Interleaved thinking: one response carries two thinking blocks.
	reply := func(req *fakeupstream.Request) fakeupstream.Reply {
		if req.EndsWithToolResults() {
			return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("done")}}
		}
		return fakeupstream.Reply{Content: []fakeupstream.Block{
			fakeupstream.Thinking("first"), fakeupstream.Text("looking"),
			fakeupstream.Thinking("second"), fakeupstream.ToolUse("Bash", map[string]any{"command": "ls"}),
		}}
	}
	model := "claude-opus-5-5" // binds to the prefix and has no thinking-first rule
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: reply})
	first := turn(t, srv, ccBody(model), ccHeaders())
	id := toolUseID(t, first)
	c := first.content
	withContent := func(blocks ...any) obj {
		return ccBody(model, assistant(blocks...), user(toolResult(id, "a.txt")))
	}
	const want = "`thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified. These blocks must remain as they were in the original response."
	for _, tc := range []struct {
		name   string
		blocks []any
		at     string
	}{
		{"second thinking dropped", []any{c[0], c[1], c[3]}, "messages.2.content.0: "},
		{"thinking blocks swapped", []any{c[2], c[1], c[0], c[3]}, "messages.2.content.0: "},
		{"thinking block doubled", []any{c[0], c[1], c[2], c[0], c[3]}, "messages.2.content.3: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reject(t, srv, withContent(tc.blocks...), ccHeaders()); got != tc.at+want {
				t.Errorf("got %s\nwant %s", got, tc.at+want)
			}
		})
	}
	// All thinking removed is valid on a model without the thinking-first rule …
	turn(t, srv, withContent(c[1], c[3]), ccHeaders())
	// … and the unmodified message is accepted.
	turn(t, srv, withContent(c...), ccHeaders())
}

// A model with the thinking-first rule rejects the open loop once its thinking is stripped;
// the Claude Code models degrade gracefully (DefaultRules).
func TestOpenLoopThinkingPerModel(t *testing.T) {
	strict := fakeupstream.DefaultRules("claude-opus-5-5")
	strict.RequireThinkingFirstInOpenLoop = true
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: scripted, Models: map[string]fakeupstream.ModelRules{"strict-opus": strict}})
	for _, model := range []string{"claude-opus-5-5", "strict-opus"} {
		first := turn(t, srv, ccBody(model), ccHeaders())
		stripped := assistant(first.content[1:]...)
		body := ccBody(model, stripped, user(toolResult(toolUseID(t, first), "hello")))
		if model == "claude-opus-5-5" {
			turn(t, srv, body, ccHeaders())
			continue
		}
		got := reject(t, srv, body, ccHeaders())
		if !strings.HasPrefix(got, "messages.2.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`.") {
			t.Errorf("strict model: %s", got)
		}
	}
}

func TestPrefixBinding(t *testing.T) {
	srv := fakeupstream.Start(t, fakeupstream.Options{Reply: scripted})
	const model = "claude-opus-5-5"
	first, second := ccSession(t, srv, model)
	base := history3(t, model, first, second)

	edit := func(f func(b obj)) obj {
		var c obj
		if err := json.Unmarshal(mustJSON(t, base), &c); err != nil {
			t.Fatal(err)
		}
		f(c)
		return c
	}
	msgs := func(b obj) []any { return b["messages"].([]any) }
	const bound = "messages.2.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to \"drop_block\". That setting requires the `thinking-binding-controls-2026-08-01` value in the `anthropic-beta` header. "

	t.Run("edits are rejected", func(t *testing.T) {
		for _, c := range []struct {
			name string
			f    func(b obj)
			want string
		}{
			{"system prompt note", func(b obj) {
				sys := b["system"].([]any)
				b["system"] = append(sys, map[string]any{"type": "text", "text": "[smarter-compact: note]"})
			}, bound + "The `system` prompt differs from the one this block was created with."},
			{"tool added", func(b obj) {
				b["tools"] = append(b["tools"].([]any), map[string]any{"name": "smart_compact_search", "input_schema": map[string]any{"type": "object"}})
			}, bound + "The `tools` differ from the ones this block was created with."},
			{"earlier user text changed", func(b obj) {
				msgs(b)[0].(map[string]any)["content"].([]any)[1].(map[string]any)["text"] = "run echo HELLO"
			}, bound + "An earlier message differs from the one this block was created with."},
			{"pointer block inserted in an earlier user turn", func(b obj) {
				m := msgs(b)[0].(map[string]any)
				m["content"] = append([]any{map[string]any{"type": "text", "text": "[smarter-compact: 12 earlier turns are stored]"}}, m["content"].([]any)...)
			}, bound + "An earlier message differs from the one this block was created with."},
			{"role system message dropped", func(b obj) {
				b["messages"] = append([]any{msgs(b)[0]}, msgs(b)[2:]...)
			}, strings.Replace(bound, "messages.2.", "messages.1.", 1) + "An earlier message differs from the one this block was created with."},
		} {
			t.Run(c.name, func(t *testing.T) {
				if got := reject(t, srv, edit(c.f), ccHeaders()); got != c.want {
					t.Errorf("got  %s\nwant %s", got, c.want)
				}
			})
		}
	})

	t.Run("re-serialization is not an edit", func(t *testing.T) {
		// Keys reordered, whitespace added, string vs one-text-block content, cache_control
		// moved and the is_error default dropped: the API sees the same prompt.
		b := edit(func(b obj) {
			m := msgs(b)
			m[1].(map[string]any)["content"] = []any{map[string]any{"type": "text", "text": m[1].(map[string]any)["content"], "cache_control": map[string]any{"type": "ephemeral"}}}
			m[3].(map[string]any)["content"] = []any{map[string]any{"type": "tool_result", "tool_use_id": toolUseID(t, first), "content": []any{map[string]any{"type": "text", "text": "hello"}}}}
			last := m[5].(map[string]any)["content"].([]any)[0].(map[string]any)
			delete(last, "cache_control")
		})
		raw, _ := json.MarshalIndent(b, "", "   ")
		// encoding/json sorts keys; put "role" after "content" in every message to differ
		// from the order the fake emitted and the first requests used.
		s := strings.ReplaceAll(string(raw), `"content":`, `"zz_content":`)
		var m obj
		json.Unmarshal([]byte(s), &m)
		out := reorderedJSON(t, m)
		turn(t, srv, out, ccHeaders())
	})

	t.Run("stripping thinking oldest first is valid, from the middle is not", func(t *testing.T) {
		third := turn(t, srv, base, ccHeaders())
		h4 := func(a1, a2, a3 any) obj {
			return ccBody(model, a1.(obj), user(toolResult(toolUseID(t, first), "hello")), a2.(obj), user(text("thanks, now list files")), a3.(obj), user(toolResult(toolUseID(t, third), "a.txt")))
		}
		full := []obj{asAssistant(first), asAssistant(second), asAssistant(third)}
		noThinking := func(s streamed) obj { return assistant(s.content[1:]...) }
		turn(t, srv, h4(noThinking(first), full[1], full[2]), ccHeaders())
		turn(t, srv, h4(noThinking(first), noThinking(second), full[2]), ccHeaders())
		got := reject(t, srv, h4(full[0], noThinking(second), full[2]), ccHeaders())
		want := strings.Replace(bound, "messages.2.", "messages.6.", 1) + "A thinking block before this one was removed, moved or put back."
		if got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})

	t.Run("drop_block", func(t *testing.T) {
		b := edit(func(b obj) {
			b["system"] = append(b["system"].([]any), map[string]any{"type": "text", "text": "[smarter-compact: note]"})
			b["thinking"] = map[string]any{"type": "adaptive", "display": "omitted", "block_binding": map[string]any{"prefix_mismatch_behavior": "drop_block"}}
		})
		want := strings.Replace(bound, " That setting requires the `thinking-binding-controls-2026-08-01` value in the `anthropic-beta` header.", "", 1)
		// The beta header turns drop_block on; without the setting the error names no beta.
		noDrop := edit(func(b obj) {
			b["system"] = append(b["system"].([]any), map[string]any{"type": "text", "text": "[smarter-compact: note]"})
		})
		if got := reject(t, srv, noDrop, ccHeaders("Anthropic-Beta: "+fakeupstream.ClaudeCodeBetas+","+fakeupstream.BetaBlockBinding)); got != want+"The `system` prompt differs from the one this block was created with." {
			t.Errorf("with beta, without drop_block: %s", got)
		}
		if got := reject(t, srv, b, ccHeaders()); got != "block_binding: Extra inputs are not permitted" {
			t.Errorf("drop_block without beta: %s", got)
		}
		s := turn(t, srv, b, ccHeaders("Anthropic-Beta: "+fakeupstream.ClaudeCodeBetas+","+fakeupstream.BetaBlockBinding))
		tr, _ := s.start["input_transformations"].([]any)
		if len(tr) != 2 {
			t.Fatalf("input_transformations %v, want both thinking blocks dropped", s.start["input_transformations"])
		}
		for i, at := range []int{2, 4} {
			x := tr[i].(map[string]any)
			if x["reason"] != "prefix_binding_mismatch" || num(x["message_index"]) != at || num(x["content_index"]) != 0 {
				t.Errorf("transformation %d: %v", i, x)
			}
		}
		recs := srv.Requests()
		if got := recs[len(recs)-1].InputTransformations; len(got) != 2 {
			t.Errorf("recorded transformations %v", got)
		}
	})

	t.Run("count_tokens runs the same check", func(t *testing.T) {
		b := edit(func(b obj) {
			b["system"] = append(b["system"].([]any), map[string]any{"type": "text", "text": "[smarter-compact: note]"})
			for _, k := range []string{"max_tokens", "stream", "metadata"} {
				delete(b, k)
			}
		})
		resp, out := post(t, srv.URL+"/v1/messages/count_tokens?beta=true", b, ccHeaders())
		if _, msg := apiError(t, out); resp.StatusCode != 400 || !strings.HasPrefix(msg, "messages.2.content.0: Invalid `signature`") {
			t.Errorf("count_tokens: %d %s", resp.StatusCode, out)
		}
	})

	t.Run("a model without binding accepts the edit", func(t *testing.T) {
		srv := fakeupstream.Start(t, fakeupstream.Options{Reply: scripted})
		first, second := ccSession(t, srv, "claude-sonnet-5-5")
		b := history3(t, "claude-sonnet-5-5", first, second)
		b["system"] = append(b["system"].([]any), text("[smarter-compact: note]"))
		turn(t, srv, b, ccHeaders())
	})
}

// reorderedJSON marshals m with "zz_content" renamed back to "content" after "role", so
// messages carry their keys in a different order than encoding/json's sorted one.
func reorderedJSON(t *testing.T, m obj) []byte {
	t.Helper()
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.ReplaceAll(string(raw), `"zz_content":`, `"content":`))
}
