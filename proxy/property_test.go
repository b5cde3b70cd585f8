package proxy

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// TestPropertyGeneratedConversations drives generated Claude Code sessions (tool loops,
// parallel tool calls, thinking, cache_control markers, the mid-conversation system
// message, huge tool results) through the proxy at random thresholds. The strict fake
// rejects what Anthropic rejects (pairing, alternation, markers, thinking signatures and
// prefix binding); on top of that every forwarded request must keep the first turn first.
func TestPropertyGeneratedConversations(t *testing.T) {
	var trims, requests, compressed int
	n := propertyWorkers(t, func(t *testing.T, first, count, stride int) func() {
		tr, rq, cp := generatedConversations(t, first, count, stride)
		return func() { trims, requests, compressed = trims+tr, requests+rq, compressed+cp }
	})
	t.Cleanup(func() {
		t.Logf("%d conversations, %d requests, %d carried a pointer, %d carried a compressed result", n, requests, trims, compressed)
		if trims == 0 || compressed == 0 {
			t.Error("the generator never trimmed or never compressed: it tests nothing")
		}
	})
}

// propertyWorkers runs a property test's generated conversations, 1000 of them (100 under
// -short), in four parallel subtests worker-0 … worker-3: worker w calls run with first w,
// count n/4 and stride 4 (seeds w, w+4, …), and the function run returns, which adds the
// worker's counts to the test's totals, is called under a lock. The subtests run after the
// test function returns, so the totals are read in a t.Cleanup. It returns n.
func propertyWorkers(t *testing.T, run func(t *testing.T, first, count, stride int) (add func())) int {
	n := 1000
	if testing.Short() {
		n = 100
		t.Logf("-short: %d conversations instead of 1000", n)
	}
	const workers = 4
	var mu sync.Mutex
	for w := 0; w < workers; w++ {
		t.Run(fmt.Sprintf("worker-%d", w), func(t *testing.T) {
			t.Parallel()
			add := run(t, w, n/workers, workers)
			mu.Lock()
			add()
			mu.Unlock()
		})
	}
	return n
}

// propTurnText is the user text of a generated conversation's turn (i numbers the
// conversation): firstPrompt for turn 0, then "turn N of conversation i", which asks for
// tools unless rng.Intn(toolsOdds) is 0 (one later turn in toolsOdds goes without). It
// draws from rng only after the first turn.
func propTurnText(rng *rand.Rand, firstPrompt string, turn, i, toolsOdds int) string {
	if turn == 0 {
		return firstPrompt
	}
	text := fmt.Sprintf("turn %d of conversation %d", turn, i)
	if rng.Intn(toolsOdds) > 0 {
		text += ", use tools"
	}
	return text
}

// generatedConversations runs count conversations, seeds first, first+stride, …
func generatedConversations(t *testing.T, first, count, stride int) (trims, requests, compressed int) {
	fake := fakeupstream.Start(t, fakeupstream.Options{Reply: scriptedReply})
	base := newRig(t, testSettings(0), fakeupstream.Options{}) // for its store root
	models := []string{"claude-opus-5-5", "claude-fable-5-1", "claude-mythos-5-1", "claude-sonnet-4-5"}
	for k := 0; k < count; k++ {
		i := first + k*stride
		seed := int64(i)
		rng := rand.New(rand.NewSource(seed))
		s := DefaultSettings()
		s.TrimAtTokens = 1500 + rng.Intn(10000)
		s.CompressOverTokens = []int{0, 300, 4000}[rng.Intn(3)]
		s.TrimToFraction = []float64{0.1, 0.3, 0.6}[rng.Intn(3)]
		s.Upstreams = map[string]string{"anthropic": fake.URL}
		p := New(s, allOn{}, base.root, slog.New(slog.NewTextHandler(base.logs, nil)))
		srv := httptest.NewServer(p)
		model := models[rng.Intn(len(models))]
		sid := fmt.Sprintf("prop-%d", i)
		c := newClient(t, srv.URL+"/claude-code/v1/messages?beta=true", sid, model)
		if strings.Contains(model, "-4-") {
			c.noSystemMessage()
			c.thinking = map[string]any{"type": "enabled", "budget_tokens": 2000}
		} else {
			if rng.Intn(2) == 0 {
				c.thinking = map[string]any{"type": "adaptive", "display": "summarized"}
			}
			c.tokenNotes = rng.Intn(2) == 0
		}
		before := len(fake.Requests())
		turns := 2 + rng.Intn(5)
		firstPrompt := fmt.Sprintf("Task %d: remember VALUE-%d. use tools", i, rng.Intn(1e6))
		for turn := 0; turn < turns; turn++ {
			text := propTurnText(rng, firstPrompt, turn, i, 4)
			if rng.Intn(4) == 0 {
				text += " in parallel"
			}
			steps := rng.Intn(8)
			lines := 1 + rng.Intn(60)
			if rng.Intn(6) == 0 {
				lines = 200 + rng.Intn(400) // huge results
			}
			if rng.Intn(10) == 0 {
				if err := base.root.SetForce(sid); err != nil {
					t.Fatal(err)
				}
			}
			c.userTurn(text, output(lines, steps))
		}
		srv.Close()
		if rej := fake.Rejections(); len(rej) > 0 {
			t.Fatalf("seed %d (%s): rejected: %d %s", seed, model, rej[0].Status, rej[0].Error)
		}
		for j, rec := range fake.Requests()[before:] {
			requests++
			var body struct {
				Messages []struct {
					Role    string          `json:"role"`
					Content json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(rec.Body, &body); err != nil {
				t.Fatalf("seed %d request %d: %v", seed, j, err)
			}
			if len(body.Messages) == 0 || body.Messages[0].Role != "user" || !strings.Contains(string(body.Messages[0].Content), firstPrompt) {
				t.Fatalf("seed %d request %d: the first turn is not kept first", seed, j)
			}
			if strings.Contains(string(rec.Body), "[smarter-compact: continuing session") {
				trims++
			}
			if strings.Contains(string(rec.Body), "[smarter-compact: tool result compressed") {
				compressed++
			}
		}
	}
	if strings.Contains(base.logs.String(), "fail-open") {
		t.Fatalf("fail-open during the property run:\n%s", base.logs.String())
	}
	return trims, requests, compressed
}
