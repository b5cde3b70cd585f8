package store

import (
	"context"
	"testing"
	"time"
)

// TestSavedTokensClamped: a trim event written before the estimate had its floor can carry a
// negative tokens_after (measured: -185008); tokens saved counts at most the request's own
// tokens_before, in the status summary and in the daily figures alike, and never less than 0.
func TestSavedTokensClamped(t *testing.T) {
	r := newRoot(t)
	ctx := context.Background()
	at := statusNow.Add(-time.Hour)
	writeDashSession(t, r, "neg", nil,
		Event{At: at, Kind: "trim", Version: "proxy:a", TokensBefore: i64(120000), TokensAfter: i64(-185008)},
		Event{At: at, Kind: "trim", Version: "proxy:a", TokensBefore: i64(1000), TokensAfter: i64(1500)}, // grew: saved 0
		Event{At: at, Kind: "trim", Version: "proxy:a", TokensBefore: i64(100000), TokensAfter: i64(30000)},
	)
	const want = 120000 + 0 + 70000
	st, err := r.Status(ctx, statusNow, 24)
	if err != nil {
		t.Fatal(err)
	}
	if st.TokensSaved != want {
		t.Errorf("Status TokensSaved = %d, want %d", st.TokensSaved, want)
	}
	days, err := r.Daily(ctx, statusNow, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(days) != 1 || days[0].TokensSaved != want {
		t.Errorf("Daily = %+v, want TokensSaved %d", days, want)
	}
}
