package proxy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// normalized is a forwarded request with the client's moving cache_control marker taken
// out: every cache_control key removed, and a content of one text block as a plain string
// (Claude Code sends the mid-conversation system message and a new user text as a one-block
// list while it is the last message, to carry the marker; the API reads both forms alike).
type normalized struct {
	system, tools any
	msgs          []any
}

func normalize(t *testing.T, body []byte) normalized {
	t.Helper()
	m := decodeJSON(t, body)
	var strip func(v any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			delete(x, "cache_control")
			for k, e := range x {
				x[k] = strip(e)
			}
		case []any:
			for i, e := range x {
				x[i] = strip(e)
			}
		}
		return v
	}
	msgs := strip(m["messages"]).([]any)
	for _, e := range msgs {
		msg := e.(map[string]any)
		if blocks, ok := msg["content"].([]any); ok && len(blocks) == 1 && blocks[0].(map[string]any)["type"] == "text" {
			msg["content"] = blocks[0].(map[string]any)["text"]
		}
	}
	return normalized{system: strip(m["system"]), tools: strip(m["tools"]), msgs: msgs}
}

// Between two trims every forwarded request extends the previous one, so the provider's
// prompt cache keeps hitting (contract: Trim, "the cut and gap are stored with
// fingerprints"). The trim requests are found from the usage events, not from the bodies.
func TestForwardedRequestsExtendEachOtherBetweenTrims(t *testing.T) {
	for _, model := range []string{"claude-opus-5-5", "claude-mythos-5-1"} {
		t.Run(model, func(t *testing.T) {
			r := newRig(t, testSettings(4000), fakeupstream.Options{})
			c := r.client(t, "long", model)
			for turn := 0; turn < 14; turn++ {
				c.userTurn(fmt.Sprintf("turn %d: use tools", turn), output(25, turn%5))
			}
			reqs := r.accepted(t)
			db := sessionDB(t, r, "long")
			trimmed, err := eventInts(db, "trimmed", "usage")
			must(t, err)
			if len(trimmed) != len(reqs) {
				t.Fatalf("%d usage events for %d requests", len(trimmed), len(reqs))
			}
			newCuts, extended := 0, 0
			for i := 1; i < len(reqs); i++ {
				if trimmed[i] == 2 {
					newCuts++
					continue
				}
				prev, cur := normalize(t, reqs[i-1].Body), normalize(t, reqs[i].Body)
				if !reflect.DeepEqual(prev.system, cur.system) || !reflect.DeepEqual(prev.tools, cur.tools) {
					t.Fatalf("request %d changed system or tools", i)
				}
				if len(cur.msgs) < len(prev.msgs) || !reflect.DeepEqual(prev.msgs, cur.msgs[:len(prev.msgs)]) {
					a, _ := json.Marshal(prev.msgs)
					b, _ := json.Marshal(cur.msgs)
					t.Fatalf("request %d does not extend request %d:\nprev %.600s\ncur  %.600s", i, i-1, a, b)
				}
				if reqs[i].Usage.CacheReadInputTokens == 0 {
					t.Errorf("request %d extended the previous one but read nothing from the fake's cache", i)
				}
				extended++
			}
			if newCuts < 2 {
				t.Fatalf("only %d new cuts in a long session: the test needs several", newCuts)
			}
			t.Logf("%d requests, %d new cuts, %d extended the previous request", len(reqs), newCuts, extended)
		})
	}
}
