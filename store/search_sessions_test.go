package store_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/storetest"
)

// TestSearchSessions: one query over sessions of which some cannot be read gives the same
// ranked hits one at a time (the MCP tool's way) and in parallel with details read after
// ranking (the dashboard's), and lists the others with their reason.
func TestSearchSessions(t *testing.T) {
	if store.UnderWine() {
		t.Skip("cannot run under wine: its file I/O is too slow for the search's time budget, which runs out before every session is read")
	}
	r := storetest.OpenRoot(t)
	now := time.Now()
	storetest.SyncRows(t, r, "newer", now, []storetest.Row{
		{Role: "user", Text: "deploy the token"},
		{Role: "assistant", Text: "which token"},
		{Role: "tool", Name: "Bash", Kind: "tool_result", Text: "deploy done", Trimmed: true},
	})
	storetest.SyncRows(t, r, "older", now, []storetest.Row{
		{Role: "user", Text: "the deploy token is KEY-7"},
		{Role: "user", Text: "nothing to see"},
	})
	sessions := filepath.Join(r.Dir(), "sessions")
	for name, data := range map[string]string{"empty.db": "", "junk.db": "this is not a database, just text that is long enough"} {
		if err := os.WriteFile(filepath.Join(sessions, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	spec := store.SessionSearch{
		Sessions:      []string{"newer", "junk", "known", "empty", "older"},
		Options:       store.SearchOptions{Query: "deploy token", Limit: 10},
		Limit:         3,
		PatternBudget: time.Second,
		Unreadable:    map[string]string{"known": "the caller's reason"},
	}
	type hit struct {
		sid     string
		seq     int64
		excerpt string
	}
	run := func(workers int) (store.SessionSearchResult, []hit) {
		t.Helper()
		s := spec
		s.Workers = workers
		res, err := r.SearchSessions(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		var hits []hit
		for _, h := range res.Hits {
			hits = append(hits, hit{h.Session, h.Seq, h.Excerpt})
		}
		return res, hits
	}
	seq, seqHits := run(0)
	par, parHits := run(8)
	want := []hit{{"newer", 1, "deploy the token"}, {"older", 1, "the deploy token is KEY-7"}, {"newer", 3, "deploy done"}}
	if !reflect.DeepEqual(seqHits, want) || !reflect.DeepEqual(parHits, want) {
		t.Errorf("hits one at a time %v, in parallel %v, want %v", seqHits, parHits, want)
	}
	for name, res := range map[string]store.SessionSearchResult{"one at a time": seq, "parallel": par} {
		if !reflect.DeepEqual(res.Searched, []string{"newer", "older"}) || res.TotalMatches != 4 || !res.Truncated || res.TimedOut {
			t.Errorf("%s: searched %v total %d truncated %v timed out %v", name, res.Searched, res.TotalMatches, res.Truncated, res.TimedOut)
		}
		if res.Paths["older"] != filepath.Join(sessions, "older.db") {
			t.Errorf("%s: paths %v", name, res.Paths)
		}
		var got []string
		for _, k := range res.Skipped {
			switch re := store.AsReadError(k.Err); {
			case k.Why == store.SkipKnown:
				got = append(got, k.Session+": "+k.Reason)
			case re != nil:
				got = append(got, k.Session+": "+re.Kind.String())
			default:
				t.Errorf("%s: %s skipped for %v (%v)", name, k.Session, k.Why, k.Err)
			}
		}
		if want := []string{"junk: not a database", "known: the caller's reason", "empty: no schema"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: skipped %q, want %q", name, got, want)
		}
	}

	// A pattern budget that has run out skips every session and times the search out.
	spec.Options = store.SearchOptions{Pattern: regexp.MustCompile("KEY-[0-9]"), Limit: 10}
	spec.PatternBudget = time.Nanosecond
	for _, workers := range []int{0, 8} {
		res, _ := run(workers)
		if len(res.Searched) != 0 || !res.TimedOut || res.Skipped[len(res.Skipped)-1].Why != store.SkipPatternBudget {
			t.Errorf("workers %d, spent budget: searched %v timed out %v skipped %+v", workers, res.Searched, res.TimedOut, res.Skipped)
		}
	}
}
