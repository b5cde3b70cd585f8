package savings

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

func TestLookupLongestPrefix(t *testing.T) {
	t.Parallel()
	p := DefaultPrices()
	for _, tc := range []struct{ model, family string }{
		{"claude-opus-5-5", "claude-opus-5-5"},
		{"claude-opus-5-20260724", "claude-opus-5"},
		{"claude-opus-4-1-20250805", "claude-opus-4"},
		{"claude-opus-4-6", "claude-opus-4-6"},
		{"claude-mythos-5-1", "claude-mythos-5-1"},
		{"anthropic/claude-sonnet-4-5", "claude-sonnet-4"},
		{"gpt-5.4-mini-2026-03-17", "gpt-5.4-mini"},
		{"gpt-5-codex", "gpt-5"},
		{"CLAUDE-HAIKU-4-5", "claude-haiku-4-5"},
	} {
		if _, fam, ok := p.Lookup(tc.model); !ok || fam != tc.family {
			t.Errorf("Lookup(%q) = %q, %v; want %q", tc.model, fam, ok, tc.family)
		}
	}
	if _, _, ok := p.Lookup("llama-3-70b"); ok {
		t.Error("an unknown model got a price")
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	prices := Prices{"m": {Input: 3, CacheRead: 0.3, CacheWrite: 3.75, Output: 15}}
	g := func(sid, agent, model, date string, sent, un store.SavingsCounts) store.SavingsGroup {
		return store.SavingsGroup{Session: sid, Agent: agent, Model: model, Date: date, Requests: 2, Sent: sent, Untrimmed: un}
	}
	groups := []store.SavingsGroup{
		// today: sent 1M cache reads + 0.1M output; untrimmed 3M reads
		g("s1", "claude-code", "m-1", "2026-12-02", store.SavingsCounts{CacheRead: 1e6, Output: 1e5}, store.SavingsCounts{CacheRead: 3e6, Output: 1e5}),
		// six days ago: in the week, not today
		g("s2", "codex", "m-2", "2026-11-26", store.SavingsCounts{Input: 1e6}, store.SavingsCounts{Input: 2e6}),
		// seven days ago: outside the week
		g("s3", "codex", "m-2", "2026-11-25", store.SavingsCounts{Input: 1e6}, store.SavingsCounts{Input: 9e6}),
		g("s1", "claude-code", "other", "2026-12-02", store.SavingsCounts{Input: 5}, store.SavingsCounts{Input: 9}),
	}
	s := Summarize(groups, prices, now)
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	near("today cost", s.Today.Cost, 0.3+1.5)
	near("today untrimmed", s.Today.Untrimmed, 0.9+1.5)
	near("today saved", s.Today.Saved, 0.6)
	if s.Today.Percent == nil || math.Abs(*s.Today.Percent-25) > 1e-9 {
		t.Errorf("today percent = %v, want 25", s.Today.Percent)
	}
	if s.Today.Requests != 2 || s.Today.Unpriced != 2 {
		t.Errorf("today requests %d unpriced %d, want 2 and 2", s.Today.Requests, s.Today.Unpriced)
	}
	near("week saved", s.Week.Saved, 0.6+3)
	if len(s.BySession) != 2 || s.BySession[0].Key != "s2" || s.BySession[0].Agent != "codex" {
		t.Errorf("by session: %+v (want s2 first: it saved most; s3 is outside the week)", s.BySession)
	}
	if len(s.ByAgent) != 2 || s.ByAgent[0].Key != "codex" {
		t.Errorf("by agent: %+v", s.ByAgent)
	}
	if len(s.NoPrice) != 1 || !strings.HasPrefix(s.NoPrice[0], "no price for model other") {
		t.Errorf("no price: %q", s.NoPrice)
	}
	var other *Row
	for i := range s.ByModel {
		if s.ByModel[i].Key == "other" {
			other = &s.ByModel[i]
		}
	}
	if other == nil || other.Family != "" || other.Unpriced != 2 || other.Percent != nil {
		t.Errorf("the unpriced model's row: %+v", other)
	}
}
