package store

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDaily(t *testing.T) {
	r := newRoot(t)
	ctx := context.Background()
	utc := func(d, h, m int) time.Time { return time.Date(2026, 3, d, h, m, 0, 0, time.UTC) }
	writeDashSession(t, r, "a", nil,
		Event{At: utc(9, 21, 0), Kind: "trim", Version: "proxy:a", TokensBefore: i64(100000), TokensAfter: i64(40000)},
		// 2026-03-10 01:30 at UTC+5 is 03-09 20:30 UTC
		Event{At: time.Date(2026, 3, 10, 1, 30, 0, 0, time.FixedZone("UTC+5", 5*3600)), Kind: "usage", Version: "proxy:a"},
		Event{At: utc(9, 23, 59), Kind: "trim", Version: "proxy:a", TokensBefore: i64(5000)}, // no after: counts, saves nothing
		Event{At: utc(7, 0, 0), Kind: "fail_open", Version: "proxy:a"},
		Event{At: utc(5, 23, 59), Kind: "trim", Version: "proxy:a", TokensBefore: i64(9), TokensAfter: i64(1)}, // before the window
		Event{At: utc(10, 0, 1), Kind: "usage", Version: "proxy:a"},                                            // after now (UTC 03-09 22:00)
	)
	writeDashSession(t, r, "b", nil,
		Event{At: utc(7, 12, 0), Kind: "usage", Version: "proxy:b"},
		Event{At: utc(9, 1, 0), Kind: "trim", Version: "proxy:b", TokensBefore: i64(300), TokensAfter: i64(100)},
	)
	sessions := filepath.Join(r.Dir(), "sessions")
	buildFixture(t, filepath.Join(sessions, "old1.db"), "schema_v1.sql")
	if err := os.WriteFile(filepath.Join(sessions, "junk.db"), []byte("not a database at all, not even close"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := r.Daily(ctx, dashNow, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []Day{
		{Date: "2026-03-06"},
		{Date: "2026-03-07", Requests: 1, FailOpens: 1},
		{Date: "2026-03-08"},
		{Date: "2026-03-09", Trims: 3, TokensSaved: 60000 + 200, Requests: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("daily\n got %+v\nwant %+v", got, want)
	}
	if got, err := r.Daily(ctx, dashNow, 1); err != nil || !reflect.DeepEqual(got, want[3:]) {
		t.Errorf("one day: %+v, %v", got, err)
	}
	for _, d := range []int{0, -1, DailyMaxDays + 1} {
		if _, err := r.Daily(ctx, dashNow, d); err == nil || !strings.Contains(err.Error(), "days must be") {
			t.Errorf("days %d: %v", d, err)
		}
	}

	t.Run("a new event shows", func(t *testing.T) {
		old := time.Now().Add(-time.Hour)
		for _, sid := range []string{"a", "b"} {
			ageSessionFiles(t, r, sid, old)
		}
		if _, err := r.Daily(ctx, dashNow, 4); err != nil { // cached now
			t.Fatal(err)
		}
		writeDashSession(t, r, "b", nil, Event{At: utc(8, 8, 0), Kind: "trim", Version: "proxy:b", TokensBefore: i64(50), TokensAfter: i64(20)})
		ageSessionFiles(t, r, "b", old)
		got, err := r.Daily(ctx, dashNow, 4)
		if err != nil {
			t.Fatal(err)
		}
		if d := got[2]; d != (Day{Date: "2026-03-08", Trims: 1, TokensSaved: 30}) {
			t.Errorf("after a new trim: %+v", d)
		}
	})
}
