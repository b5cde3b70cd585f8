package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSavingsRecords(t *testing.T) {
	t.Parallel()
	r := newRoot(t)
	if _, err := r.Session("s1"); err != nil { // Savings lists the sessions with a database
		t.Fatal(err)
	}
	recs := []SavingsRecord{
		{At: "2026-12-01T23:59:59Z", Model: "m", Trimmed: 0, InputTokens: 10, CacheReadTokens: 100, OutputTokens: 5,
			UntrimmedInputTokens: 10, UntrimmedCacheReadTokens: 100},
		{At: "2026-12-02T08:00:00Z", Model: "m", Trimmed: 2, CacheReadTokens: 50, CacheCreationTokens: 20, OutputTokens: 7, RemovedTokens: 80,
			UntrimmedCacheReadTokens: 140, UntrimmedCacheCreationTokens: 10},
		{At: "2026-12-02T08:00:01Z", Model: "n", Trimmed: 1, InputTokens: 1, OutputTokens: 1, UntrimmedInputTokens: 3, RemovedTokens: 2},
	}
	for _, rec := range recs {
		if err := r.AppendSavings("s1", rec); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(r.Dir(), "sessions", "s1.savings.jsonl")
	if p := perm(t, path); wrongMode(t, p, 0o600) {
		t.Errorf("%s: mode %o, want 600", path, p)
	}
	// a torn last line is skipped, not an error
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"at":"2026-12-02T09:00:00Z","mod`)
	f.Close()
	got, err := r.SessionSavings("s1")
	if err != nil || len(got) != 3 || got[1] != recs[1] {
		t.Fatalf("SessionSavings = %+v, %v", got, err)
	}
	if got[1].SentPromptTokens() != 70 || got[1].UntrimmedPromptTokens() != 150 {
		t.Errorf("prompt tokens %d and %d, want 70 and 150", got[1].SentPromptTokens(), got[1].UntrimmedPromptTokens())
	}

	groups, err := r.Savings(context.Background(), time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 {
		t.Fatalf("Savings since 2026-12-02: %d groups, want 2 (the 12-01 record is before the day): %+v", len(groups), groups)
	}
	m := groups[0]
	if m.Model != "m" || m.Date != "2026-12-02" || m.Requests != 1 || m.Sent != (SavingsCounts{0, 50, 20, 7}) ||
		m.Untrimmed != (SavingsCounts{0, 140, 10, 7}) || m.RemovedTokens != 80 {
		t.Errorf("group m: %+v", m)
	}
	all, err := r.Savings(context.Background(), time.Time{})
	if err != nil || len(all) != 3 {
		t.Errorf("Savings since the zero time: %d groups, %v; want 3", len(all), err)
	}
}
