package app

import (
	"strings"
	"sync"
	"testing"
)

func TestToggles(t *testing.T) {
	t.Parallel()
	tg := newToggles(map[string]bool{"claude-code": true, "codex": false, "opencode": true, "unknown": false})
	for agent, want := range map[string]bool{"claude-code": true, "codex": false, "opencode": true, "unknown": false, "cursor": false} {
		if got := tg.Enabled(agent); got != want {
			t.Errorf("Enabled(%q) = %v, want %v", agent, got, want)
		}
	}
	if err := tg.Set("codex", true); err != nil {
		t.Fatal(err)
	}
	if err := tg.Set("claude-code", false); err != nil {
		t.Fatal(err)
	}
	if !tg.Enabled("codex") || tg.Enabled("claude-code") {
		t.Errorf("after Set: codex=%v claude-code=%v, want true false", tg.Enabled("codex"), tg.Enabled("claude-code"))
	}
	if err := tg.Set("unknown", true); err != nil || !tg.Enabled("some-new-agent") {
		t.Errorf("Set(unknown, true) = %v; an unnamed agent follows unknown, Enabled = %v", err, tg.Enabled("some-new-agent"))
	}
	if err := tg.Set("cursor", true); err == nil || !strings.Contains(err.Error(), "claude-code, codex, opencode") {
		t.Errorf("Set(cursor) = %v, want an error listing the agents", err)
	}
	if got, want := tg.String(), "claude-code=off codex=on opencode=on unknown=on"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestTogglesConcurrent is meaningful under -race: the proxy reads while the tray writes.
func TestTogglesConcurrent(t *testing.T) {
	t.Parallel()
	tg := newToggles(map[string]bool{"claude-code": true, "codex": true, "opencode": true, "unknown": true})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 1000 {
				if i%2 == 0 {
					_ = tg.Set("codex", j%2 == 0)
				} else {
					_ = tg.Enabled("codex")
				}
			}
		})
	}
	wg.Wait()
	if err := tg.Set("codex", false); err != nil || tg.Enabled("codex") {
		t.Fatalf("final Set(codex, false) = %v, Enabled = %v", err, tg.Enabled("codex"))
	}
}
