package tray

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/assets"
	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/savings"
	"github.com/smarter-compact/smarter-compact/web"
)

// TestViewHealthProblem: a problem active in the store's health record turns the icon to
// error, shows the problem line and puts what fails and what to do in the tooltip; resolved,
// the tray is back to active.
func TestViewHealthProblem(t *testing.T) {
	st := web.State{Master: true, Agents: []web.AgentSwitch{{Agent: "claude-code", Trimming: true}}}
	h := store.NewHealth(nil)
	v := makeView(st, storeStats{Health: h.Snapshot()}, time.Now())
	if v.Icon != assets.TrayActive || v.Problem != "" {
		t.Fatalf("nothing failing: icon %v, problem %q", v.Icon, v.Problem)
	}
	h.Report(store.Problem{Kind: store.HealthUpstream, Key: "api.anthropic.com", Class: "connection_refused", Text: "refused", Hint: "Check the upstream URL."})
	h.Report(store.Problem{Kind: store.HealthStoreWrite, Key: "s1", Class: "disk_full", Text: "full", Hint: "Free space."})
	v = makeView(st, storeStats{Health: h.Snapshot()}, time.Now())
	if v.Icon != assets.TrayError {
		t.Errorf("icon %v with two problems, want the error icon", v.Icon)
	}
	if v.Problem != "Problem: The store cannot write session s1 (and 1 more): see the dashboard" {
		t.Errorf("problem line %q", v.Problem)
	}
	if !strings.Contains(v.Tooltip, "The store cannot write session s1 (1 time at ") || !strings.Contains(v.Tooltip, "Free space.") {
		t.Errorf("tooltip %q: want what fails and what to do", v.Tooltip)
	}
	h.Resolve(store.HealthUpstream, "api.anthropic.com")
	h.Resolve(store.HealthStoreWrite, "s1")
	if v := makeView(st, storeStats{Health: h.Snapshot()}, time.Now()); v.Icon != assets.TrayActive || v.Problem != "" {
		t.Errorf("resolved: icon %v, problem %q", v.Icon, v.Problem)
	}
}

// TestStatusLine: the totals, and the money saved once a priced request was recorded today,
// in the dashboard's dollar format (two decimals from $0.10 on, four below).
func TestStatusLine(t *testing.T) {
	pct := func(p float64) *float64 { return &p }
	for _, c := range []struct {
		stats storeStats
		want  string
	}{
		{storeStats{Today: store.Day{Requests: 1, Trims: 1}}, "Today: 1 request, 1 trim"},
		{storeStats{Today: store.Day{Requests: 12, Trims: 3}, Saved: &savings.Figure{Requests: 12, Saved: 0.42, Percent: pct(58)}},
			"Today: 12 requests, 3 trims, $0.42 saved (58.0 %)"},
		{storeStats{Today: store.Day{Requests: 2}, Saved: &savings.Figure{Requests: 2, Saved: 0.0123, Percent: pct(1.25)}},
			"Today: 2 requests, 0 trims, $0.0123 saved (1.2 %)"},
		{storeStats{Today: store.Day{Requests: 2}, Saved: &savings.Figure{Requests: 2, Saved: -0.02, Percent: pct(-3.25)}},
			"Today: 2 requests, 0 trims, -$0.0200 saved (-3.2 %)"},
		{storeStats{Today: store.Day{Requests: 2}, Saved: &savings.Figure{Unpriced: 2}}, "Today: 2 requests, 0 trims"},
		{storeStats{TodayErr: errors.New("locked")}, "Today: totals unavailable (see the log)"},
	} {
		if got := statusLine(c.stats); got != c.want {
			t.Errorf("statusLine(%+v) = %q, want %q", c.stats, got, c.want)
		}
	}
}
