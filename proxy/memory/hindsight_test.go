package memory_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy/memory"
	"github.com/smarter-compact/smarter-compact/proxy/memory/fakehindsight"
)

func TestHindsightRecallAndIngesting(t *testing.T) {
	hs := fakehindsight.Start(t, fakehindsight.Options{APIKey: "k1",
		Recall: func(bank, query string) []string { return []string{"first fact", "  ", "second fact"} }})
	c := memory.NewHindsight(hs.URL+"/", "k1")
	ctx := t.Context()
	text, err := c.Recall(ctx, "coding-agent::shop", "what did we decide?")
	if err != nil || text != "first fact\nsecond fact" {
		t.Fatalf("Recall = %q, %v", text, err)
	}
	calls := hs.Calls()
	if len(calls) != 1 || calls[0].Bank != "coding-agent::shop" || calls[0].Query != "what did we decide?" ||
		calls[0].Budget != "low" || calls[0].MaxTokens != 4096 || calls[0].Auth != "Bearer k1" {
		t.Fatalf("calls %+v", calls)
	}
	for _, tc := range []struct {
		pending, processing int
		want                bool
	}{{0, 0, false}, {2, 0, true}, {0, 1, true}} {
		hs.Set(func(o *fakehindsight.Options) { o.Pending, o.Processing = tc.pending, tc.processing })
		if got, err := c.Ingesting(ctx, "b"); err != nil || got != tc.want {
			t.Errorf("pending %d processing %d: Ingesting = %v, %v", tc.pending, tc.processing, got, err)
		}
	}
}

func TestHindsightErrorsNameNoSecret(t *testing.T) {
	hs := fakehindsight.Start(t, fakehindsight.Options{APIKey: "right"})
	c := memory.NewHindsight(hs.URL, "wrong-secret")
	_, err := c.Recall(t.Context(), "b", "the query text")
	if err == nil || !strings.Contains(err.Error(), "unexpected status 401") ||
		strings.Contains(err.Error(), "wrong-secret") || strings.Contains(err.Error(), "the query text") {
		t.Fatalf("err %v: want the status, not the key or the query", err)
	}
	hs.Set(func(o *fakehindsight.Options) { o.APIKey, o.Delay = "", time.Hour })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Ingesting(ctx, "b"); err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("slow server: %v, want the deadline", err)
	}
	if s := c.String(); strings.Contains(s, "wrong-secret") {
		t.Fatalf("String shows the key: %s", s)
	}
}
