package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/store/storetest"
)

// manyWords is a query of n distinct words, none of which the sessions hold.
func manyWords(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "w%dx ", i)
	}
	return b.String()
}

// TestQuerySearchBudget: a query search stops at its budget and says so (timed_out, each
// session skipped with the reason) instead of running for seconds. Before, a 50,000-word
// query ran 6.9 s and reported timed_out: false. The budget is shortened here so the test
// does not depend on the machine's speed.
func TestQuerySearchBudget(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	rows := make([]row, 0, 200)
	for i := range 200 {
		rows = append(rows, row{role: "user", kind: "text", text: fmt.Sprintf("line %d of a session about w%dx and more", i, i)})
	}
	r.addSession(t, "S", r.repo, 1, rows...)
	srv := New(storetest.OpenRootAt(t, r.dir), Options{Workspace: r.workspace, Now: func() time.Time { return fixedNow }, Version: "test"})
	srv.queryBudget = time.Nanosecond
	c := httpClient(t, srv)
	text, isErr := call(t, c, ToolSearch, map[string]any{"session_id": "S", "query": manyWords(maxQueryWords)})
	if isErr {
		t.Fatalf("budgeted search failed: %s", text)
	}
	var out struct {
		TimedOut bool `json:"timed_out"`
		Skipped  []struct {
			SessionID string `json:"session_id"`
			Reason    string `json:"reason"`
		} `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatal(err)
	}
	if !out.TimedOut || len(out.Skipped) != 1 || out.Skipped[0].SessionID != "S" || !strings.Contains(out.Skipped[0].Reason, "2 s budget") {
		t.Fatalf("response %s; want timed_out and S skipped for the budget", text)
	}

	// under the real budget the most words a query may have are searched; their time is
	// a figure of the note
	c2 := httpClient(t, r.srv)
	start := time.Now()
	text, isErr = call(t, c2, ToolSearch, map[string]any{"session_id": "S", "query": manyWords(maxQueryWords)})
	t.Logf("%d-word query: %s, timed_out %v", maxQueryWords, time.Since(start).Round(time.Millisecond), strings.Contains(text, `"timed_out":true`))
	if isErr || !strings.Contains(text, `"total_matches":100`) {
		t.Fatalf("search: %.300s (error %v), want 100 matches", text, isErr)
	}

	// 50,000 words are refused at once, saying what to do
	start = time.Now()
	msg := callError(t, c2, ToolSearch, map[string]any{"session_id": "S", "query": manyWords(50_000)})
	t.Logf("50,000-word query refused in %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(msg, "more than 100 distinct words (50000 in all)") {
		t.Fatalf("50,000 words: %q", msg)
	}
}
