package proxy

import (
	"fmt"
	"math"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// Every usage event has a savings record whose sent counts are the fake upstream's usage and
// whose untrimmed prompt is close to the fake's own count of what the client sent: the
// estimate is checked against the upstream's tokenizer, not against our own arithmetic.
func TestSavingsRecordsMatchTheUpstream(t *testing.T) {
	r := newRig(t, testSettings(4000), fakeupstream.Options{})
	c := r.client(t, "save", "claude-opus-5-5")
	for turn := 0; turn < 12; turn++ {
		c.userTurn(fmt.Sprintf("turn %d: use tools", turn), output(25, turn%5))
	}
	reqs := r.accepted(t)
	db := sessionDB(t, r, "save") // settles the queued writes
	trimmed, err := eventInts(db, "trimmed", "usage")
	must(t, err)
	recs, err := r.root.SessionSavings("save")
	must(t, err)
	if len(recs) != len(reqs) || len(trimmed) != len(reqs) {
		t.Fatalf("%d savings records and %d usage events for %d requests", len(recs), len(trimmed), len(reqs))
	}
	cuts, worst := 0, 0.0
	for i, rec := range recs {
		u := reqs[i].Usage
		if rec.InputTokens != int64(u.InputTokens) || rec.CacheReadTokens != int64(u.CacheReadInputTokens) ||
			rec.CacheCreationTokens != int64(u.CacheCreationInputTokens) || rec.OutputTokens != int64(u.OutputTokens) {
			t.Errorf("request %d: record %+v, upstream usage %+v", i+1, rec, u)
		}
		if rec.Trimmed != int64(trimmed[i]) || rec.Model != "claude-opus-5-5" || rec.ThresholdTokens != 4000 {
			t.Errorf("request %d: trimmed %d model %q threshold %d; want %d, claude-opus-5-5, 4000", i+1, rec.Trimmed, rec.Model, rec.ThresholdTokens, trimmed[i])
		}
		if got := rec.UntrimmedPromptTokens(); got != rec.SentPromptTokens()+rec.RemovedTokens {
			t.Errorf("request %d: untrimmed prompt %d, want sent %d + removed %d", i+1, got, rec.SentPromptTokens(), rec.RemovedTokens)
		}
		size, err := fakeupstream.Measure(c.sent[i])
		must(t, err)
		if rec.Trimmed > 0 {
			cuts++
			if rec.RemovedTokens <= 0 {
				t.Errorf("request %d carried a cut but the record says nothing was removed", i+1)
			}
			// the standing instruction is in the sent prompt, not in the client's body
			d := math.Abs(float64(rec.UntrimmedPromptTokens()-int64(size.Tokens))) / float64(size.Tokens)
			worst = max(worst, d)
			if d > 0.25 {
				t.Errorf("request %d: untrimmed estimate %d tokens, the fake counts %d in the client's body (%.0f%% off)",
					i+1, rec.UntrimmedPromptTokens(), size.Tokens, d*100)
			}
		}
		if rec.Trimmed == 2 && i > 0 && rec.CacheReadTokens > 0 {
			// a new cut: the untrimmed request would have read the previous untrimmed prompt
			if want := min(recs[i-1].UntrimmedPromptTokens(), rec.UntrimmedPromptTokens()-rec.InputTokens); rec.UntrimmedCacheReadTokens != want {
				t.Errorf("request %d (new cut): untrimmed cache read %d, want the previous untrimmed prompt %d", i+1, rec.UntrimmedCacheReadTokens, want)
			}
		}
	}
	if cuts == 0 {
		t.Fatal("no request carried a cut: lower the threshold or add turns")
	}
	t.Logf("%d requests, %d with a cut; the untrimmed estimate was at most %.1f%% off the fake's count", len(recs), cuts, worst*100)
}
