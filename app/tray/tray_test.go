package tray

import (
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/assets"
	"github.com/smarter-compact/smarter-compact/store"
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
