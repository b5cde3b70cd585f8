//go:build e2e

package e2e_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/smarter-compact/smarter-compact/proxy"
	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store/savings"
)

// TestE2ESavings runs the real Claude Code through the real `serve` against the strict fake
// for the trimmed three-turn session of TestE2EClaudeCodeTrims, then reads the overview in
// headless Chromium: the money figure and percentage it shows must match what this test
// computes on its own from the fake's recorded usage, the fake's token count of what Claude
// Code sent (the untrimmed requests), and the price table, by the model docs/savings.md
// describes. The cost must match to the millionth of a dollar; the untrimmed cost is an
// estimate (the proxy counts characters, the fake tokens), so it must match within 15 % and
// the percentage within 5 points. The session page's chart must carry its three lines.
// Screenshots of the overview at 1280 and 420 and of the session page go to
// SMARTER_COMPACT_E2E_ARTIFACTS/savings.
func TestE2ESavings(t *testing.T) {
	claude := claudeCLI.find(t)
	chromium := findChromium(t)
	shots := artifactDir(t, "savings")
	bin := buildBinary(t)

	// The trimmed three-turn session of TestE2EClaudeCodeTrims (which also checks each
	// turn's final text).
	fake, srv, tp, _, _ := runClaudeScript(t, claude, bin)

	// What the test computes itself, request by request.
	recs := acceptedRequests(t, fake, srv)
	sent := tp.requests()
	prices := savings.DefaultPrices()
	instr := int64(fakeupstream.Tokens(len(proxy.StandingInstruction)))
	var cost, untrimmed float64
	var prevWhole int64
	sid, trims, lastDropped := "", 0, 0
	for i, r := range recs {
		var body struct {
			Model string `json:"model"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		price, _, ok := prices.Lookup(body.Model)
		if !ok {
			t.Fatalf("request %d: %s", i+1, savings.NoPriceError(body.Model))
		}
		seq, _ := strconv.Atoi(r.Header.Get(seqHeader))
		if seq < 1 || seq > len(sent) {
			t.Fatalf("request %d: no tapped request %q", i+1, r.Header.Get(seqHeader))
		}
		if sid == "" {
			sid = r.Header.Get("X-Claude-Code-Session-Id")
		}
		u := r.Usage
		in, read, write := int64(u.InputTokens), int64(u.CacheReadInputTokens), int64(u.CacheCreationInputTokens)
		sentT := savings.Tokens{Input: in, CacheRead: read, CacheWrite: write, Output: int64(u.OutputTokens)}
		cost += price.Cost(sentT)

		// The untrimmed request: the fake's count of Claude Code's body, plus the standing
		// instruction the sent prompt carries too (the proxy prices only what it removed).
		orig, err := fakeupstream.Measure(sent[seq-1].body)
		if err != nil {
			t.Fatalf("request %d: measure the body Claude Code sent: %v", i+1, err)
		}
		prompt := in + read + write
		whole := max(int64(orig.Tokens)+instr, prompt)
		b := parseUpstream(t, i+1, r.Body)
		_, dropped := b.pointer(sid)
		newCut := dropped > lastDropped
		if dropped > 0 {
			lastDropped = dropped
		}
		un := savings.Tokens{Output: sentT.Output}
		if newCut && prevWhole > 0 && read > 0 {
			trims++
			un.Input = in
			un.CacheRead = min(prevWhole, whole-in)
			un.CacheWrite = whole - in - un.CacheRead
		} else if dropped > 0 && !newCut {
			// an earlier cut: the removed history would have been read from the cache
			d := whole - prompt
			un.CacheRead, un.CacheWrite = read, write
			switch {
			case read > 0:
				un.CacheRead += d
			case write > 0:
				un.CacheWrite += d
			}
			un.Input = whole - un.CacheRead - un.CacheWrite
		} else {
			if newCut {
				trims++
			}
			d := whole - prompt
			un.CacheRead = read + int64(math.Round(float64(d)*float64(read)/float64(prompt)))
			un.CacheWrite = write + int64(math.Round(float64(d)*float64(write)/float64(prompt)))
			un.Input = whole - un.CacheRead - un.CacheWrite
		}
		untrimmed += price.Cost(un)
		prevWhole = whole
		t.Logf("request %2d: new cut %-5v sent %6d (input %5d, read %6d, write %6d) $%.6f; untrimmed %6d (input %5d, read %6d, write %6d) $%.6f",
			i+1, newCut, prompt, in, read, write, price.Cost(sentT), whole, un.Input, un.CacheRead, un.CacheWrite, price.Cost(un))
	}
	if trims == 0 {
		t.Fatalf("the session was not trimmed (CONTEXT_TRIM_AT_TOKENS=%d)", trimAtTokens)
	}
	wantPct := (untrimmed - cost) / untrimmed * 100
	t.Logf("%d requests, %d new cuts; by the test: cost $%.6f, untrimmed $%.6f, saved $%.6f (%.1f %%)",
		len(recs), trims, cost, untrimmed, untrimmed-cost, wantPct)

	// Every usage event has its savings record before the overview is read.
	recFile := filepath.Join(srv.stateDir, "context", "sessions", sid+".savings.jsonl")
	if !waitFor(10*time.Second, func() bool {
		b, _ := os.ReadFile(recFile)
		return strings.Count(string(b), "\n") >= len(recs)
	}) {
		b, _ := os.ReadFile(recFile)
		t.Fatalf("%s holds %d records after 10 s, want %d", recFile, strings.Count(string(b), "\n"), len(recs))
	}

	b := openBrowser(t, chromium, srv.url(), shots)
	b.do("viewport 1280×800", chromedp.EmulateViewport(1280, 800))
	b.at("overview")
	b.do("load the overview", chromedp.Navigate(srv.url()+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="savings-today-saved"]`)))
	usd := func(id string) float64 {
		v := b.firstAttrHere(`[data-testid="`+id+`"]`, "data-usd")
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			b.fail("overview", fmt.Errorf("%s data-usd %q: %v", id, v, err))
		}
		return f
	}
	gotCost, gotUntrimmed, gotSaved := usd("savings-today-cost"), usd("savings-today-untrimmed"), usd("savings-today-saved")
	savedText, pctText := b.text(`[data-testid="savings-today-saved"]`), b.text(`[data-testid="savings-today-percent"]`)
	t.Logf("the overview shows: saved %s (%s), cost $%.6f, untrimmed $%.6f", savedText, pctText, gotCost, gotUntrimmed)
	if math.Abs(gotCost-cost) > 2e-6 {
		t.Errorf("the overview's cost is $%.6f; the fake's usage at list prices is $%.6f", gotCost, cost)
	}
	if math.Abs(gotUntrimmed-untrimmed) > 0.15*untrimmed {
		t.Errorf("the overview's untrimmed cost is $%.6f; the test's estimate from the fake's token count is $%.6f (more than 15 %% apart)", gotUntrimmed, untrimmed)
	}
	if math.Abs(gotSaved-(gotUntrimmed-gotCost)) > 2e-6 {
		t.Errorf("saved $%.6f is not untrimmed $%.6f − cost $%.6f", gotSaved, gotUntrimmed, gotCost)
	}
	pct, err := strconv.ParseFloat(strings.Replace(strings.TrimSuffix(pctText, "\u00a0%"), "−", "-", 1), 64)
	if err != nil {
		b.fail("overview", fmt.Errorf("savings-today-percent %q is not a percentage", pctText))
	}
	if math.Abs(pct-wantPct) > 5 {
		t.Errorf("the overview says %.1f %% saved; the test computes %.1f %%", pct, wantPct)
	}
	if !strings.HasPrefix(savedText, "$") && !strings.HasPrefix(savedText, "−$") {
		t.Errorf("the saved figure %q is not in dollars", savedText)
	}
	for _, w := range []int64{1280, 420} {
		b.do(fmt.Sprintf("viewport %d×800", w), chromedp.EmulateViewport(w, 800))
		b.do("reload the overview", chromedp.Navigate(srv.url()+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="savings-today-saved"]`)))
		b.checkNoHorizontalScroll(fmt.Sprintf("overview-%d", w))
		b.viewShot(fmt.Sprintf("overview-first-screen-%d", w))
		b.shot(fmt.Sprintf("overview-%d", w))
	}

	// The session chart: sent, would have been sent, threshold; one point per request.
	b.do("viewport 1280×800", chromedp.EmulateViewport(1280, 800))
	b.at("session")
	b.do("load the session", chromedp.Navigate(srv.url()+"/ui/sessions/"+sid), chromedp.WaitVisible(chromedp.CSS(`[data-testid="chart-prompt-tokens"]`)))
	for _, id := range []string{"line-sent", "line-untrimmed", "line-threshold"} {
		pts := strings.Fields(b.firstAttrHere(`[data-testid="`+id+`"]`, "points"))
		if len(pts) != len(recs) {
			t.Errorf("the session chart's %s has %d points, want one per request (%d)", id, len(pts), len(recs))
		}
	}
	b.viewShot("session-1280") // the first screen: facts and the chart
	b.checkConsole()
}

// firstAttrHere returns attribute attr of the first element matching sel on the page
// loaded now, "" when none matches.
func (b *dashBrowser) firstAttrHere(sel, attr string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q)?.getAttribute(%q) ?? ''`, sel, attr)))
	if err != nil {
		b.fail("read "+sel, err)
	}
	return v
}
