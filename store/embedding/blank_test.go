package embedding

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/storetest"
)

// Contract (Search, vectors): skipped counts "rows given up on" (dim = 0 after 3 failures),
// pending counts "non-blank rows still waiting". A blank row is neither. A row of > 64 bytes
// of ASCII whitespace passes nonBlank's octet_length shortcut, so it shows as pending, and the
// embedder then marks it dim = 0, so it shows as skipped forever.
func TestReviewLongBlankRowIsNeitherPendingNorSkipped(t *testing.T) {
	r := storetest.OpenRoot(t)
	storetest.SyncRows(t, r, "s", time.Now(), []storetest.Row{
		{Thread: "a", Role: "user", Text: "one"},
		{Thread: "a", Role: "tool", Text: strings.Repeat(" \n", 40)}, // 80 bytes, blank
	})
	if st := vectorStatus(t, r, "s", "m"); st.Pending != 1 {
		t.Errorf("before the run: pending %d, want 1 (the blank row is not waiting): %+v", st.Pending, st)
	}
	f := newFakeEmbeddings(t)
	e := NewEmbedder(r, Config{Model: "m", URL: f.url(), Timeout: time.Second}, nil)
	e.runSession(context.Background(), "s")
	if st := vectorStatus(t, r, "s", "m"); st != (store.VectorStatus{Model: "m", Filled: 1}) {
		t.Errorf("after the run: %+v, want filled 1, pending 0, skipped 0 (blank is not given up on)", st)
	}
}
