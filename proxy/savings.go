package proxy

import (
	"math"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

// The savings estimate of one request (issue 15, Deliver 1; docs/savings.md): how many
// prompt tokens trimming and compression removed, and how the untrimmed request would have
// been billed.

// wholeChars is viewChars of the request as the agent sent it: every message as it came,
// nothing cut, compressed or stripped, without the standing instruction (like view.chars).
func wholeChars(req *request, msgs []*message) int {
	n := len(req.system) + len(req.tools)
	f := req.factsFor(msgs)
	for i := range f {
		n += f.chars(msgs, i, int(f[i].raw))
	}
	return n
}

// savingsRecord estimates the untrimmed counterpart of a call the provider reported u for
// (docs/savings.md, "The estimate"). prevUntrimmed is the thread's previous untrimmed prompt
// estimate (0 when unknown).
//
// Removed tokens: the characters the rewrite took out, at this call's own ratio of sent
// characters to reported prompt tokens (clamped to 1–8 like the token estimate, seed 001).
// Billing of the untrimmed prompt: a request that made a new cut (trimmed = 2) rewrote the
// prompt cache from the cut on, which the untrimmed request would not have: it would have read
// the previous untrimmed prompt from the cache (when this call read any cache at all, so the
// cache was warm) and written only what is new. A request that carried an earlier cut
// (trimmed = 1) removed old history, which the untrimmed request would have read from the
// cache when this one read any (written it when this one only wrote, sent it as input
// without a cache). A request without a cut (trimmed = 0) removed only compressed tool
// results, billed in the same mix as its sent prompt.
func savingsRecord(res *rewritten, u usage, prevUntrimmed int, now time.Time) *store.SavingsRecord {
	val := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	in, read, write := val(u.input), val(u.cacheRead), val(u.cacheCreation)
	rec := &store.SavingsRecord{
		At: now.UTC().Format(time.RFC3339), Model: res.model, ThreadRoot: res.thread, Trimmed: res.trimmed,
		InputTokens: in, CacheReadTokens: read, CacheCreationTokens: write, OutputTokens: val(u.output),
		ThresholdTokens: int64(res.threshold),
	}
	sent := in + read + write
	if removed := res.wholeChars - res.chars; removed > 0 && sent > 0 && res.chars > 0 {
		r := ratio(&usageSample{Chars: res.chars, Tokens: int(sent)})
		rec.RemovedTokens = int64(math.Ceil(float64(removed) / r))
	}
	whole := sent + rec.RemovedTokens
	if res.trimmed == 2 && prevUntrimmed > 0 && read > 0 {
		rec.UntrimmedInputTokens = in
		rec.UntrimmedCacheReadTokens = min(int64(prevUntrimmed), whole-in)
		rec.UntrimmedCacheCreationTokens = whole - in - rec.UntrimmedCacheReadTokens
		return rec
	}
	d := rec.RemovedTokens
	if res.trimmed == 1 {
		// an earlier cut: what it removed is old history, which the untrimmed conversation
		// would have had in its cached prefix whenever this call read the cache at all
		rec.UntrimmedCacheReadTokens, rec.UntrimmedCacheCreationTokens = read, write
		switch {
		case read > 0:
			rec.UntrimmedCacheReadTokens += d
		case write > 0:
			rec.UntrimmedCacheCreationTokens += d
		}
		rec.UntrimmedInputTokens = whole - rec.UntrimmedCacheReadTokens - rec.UntrimmedCacheCreationTokens
		return rec
	}
	if sent > 0 {
		rec.UntrimmedCacheReadTokens = read + int64(math.Round(float64(d)*float64(read)/float64(sent)))
		rec.UntrimmedCacheCreationTokens = write + int64(math.Round(float64(d)*float64(write)/float64(sent)))
	}
	rec.UntrimmedInputTokens = max(whole-rec.UntrimmedCacheReadTokens-rec.UntrimmedCacheCreationTokens, 0)
	return rec
}
