package app

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/config/configtest"
	"github.com/smarter-compact/smarter-compact/store"
)

// TestStatusHealthFromFile: with the service down, status reads the health record the
// service saved in health.json and prints each problem with what to do; --json carries it
// with its source.
func TestStatusHealthFromFile(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	root, err := store.Open(filepath.Join(state, "context"))
	if err != nil {
		t.Fatal(err)
	}
	if err := root.KeepHealth(); err != nil {
		t.Fatal(err)
	}
	root.Health().Report(store.Problem{Kind: store.HealthUpstream, Key: "api.anthropic.com", Class: "connection_refused",
		Text: "POST /v1/messages: dial tcp 127.0.0.1:9: connect: connection refused", Hint: "Check that the upstream URL is right."})
	if err := root.Close(); err != nil {
		t.Fatal(err)
	}
	port := quietPort(t) // nothing answers there
	config := configtest.WriteConfig(t, "")
	sys, stdout, stderr := testSystem(t, env{"SMARTER_COMPACT_STATE_DIR": state, "CONTEXT_PROXY_PORT": strconv.Itoa(port)})
	if err := run(t.Context(), []string{"status", "--config", config}, sys); err != nil {
		t.Fatalf("status: %v (stderr %s)", err, stderr)
	}
	out := stdout.String()
	for _, want := range []string{
		"Health: 1 problem needs attention (from " + filepath.Join(state, "context", store.HealthFileName),
		"  Upstream api.anthropic.com fails: 1 time, last at ",
		"    POST /v1/messages: dial tcp 127.0.0.1:9: connect: connection refused",
		"    what to do: Check that the upstream URL is right.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	sys, stdout, _ = testSystem(t, env{"SMARTER_COMPACT_STATE_DIR": state, "CONTEXT_PROXY_PORT": strconv.Itoa(port)})
	if err := run(t.Context(), []string{"status", "--json", "--config", config}, sys); err != nil {
		t.Fatalf("status --json: %v", err)
	}
	var rep struct {
		Health statusHealth `json:"health"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Health.Source != "file" || rep.Health.Active != 1 || rep.Health.Kind(store.HealthUpstream).Entries[0].Class != "connection_refused" {
		t.Errorf("status --json health: %+v", rep.Health)
	}
}
