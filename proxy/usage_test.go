package proxy

import (
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

func TestUsageEventsCountBreakpoints(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "bp", "claude-opus-5-5")
	c.userTurn("hi", output(1, 0))
	c.userTurn("again", output(1, 0))
	r.accepted(t)
	rows, err := sessionDB(t, r, "bp").Query(`SELECT breakpoints, breakpoint_at, trimmed, cache_read_tokens IS NOT NULL, model FROM events WHERE kind='usage' ORDER BY id`)
	must(t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var n, trimmed, hasRead int
		var at, model string
		must(t, rows.Scan(&n, &at, &trimmed, &hasRead, &model))
		got = append(got, strings.Join([]string{at, model}, " "))
		if n != 3 || trimmed != 0 || hasRead != 1 {
			t.Errorf("usage event: %d breakpoints at %q, trimmed %d, cache read reported %d", n, at, trimmed, hasRead)
		}
	}
	want := []string{"system,system,m-1 claude-opus-5-5", "system,system,m-1 claude-opus-5-5"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q want %q", got, want)
	}
}
