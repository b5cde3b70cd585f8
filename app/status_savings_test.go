package app

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy/config/configtest"
	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/storetest"
)

// status leads with the money saved, priced with config.toml's [prices], and --json carries
// the same figures under savings.
func TestStatusShowsSavings(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	root := storetest.OpenRootAt(t, filepath.Join(state, "context"))
	storetest.SeedSession(t, root, storetest.Seed{SID: "sess1", Agent: "claude-code", Cwd: "/w", Rows: []storetest.Row{{Role: "user", Text: "hi"}}})
	at := time.Now().UTC().Format(time.RFC3339)
	for _, r := range []store.SavingsRecord{
		{At: at, Model: "house-model-1", CacheReadTokens: 1_000_000, OutputTokens: 100_000, RemovedTokens: 2_000_000, UntrimmedCacheReadTokens: 3_000_000},
		{At: at, Model: "mystery-model", InputTokens: 10},
	} {
		if err := root.AppendSavings("sess1", r); err != nil {
			t.Fatal(err)
		}
	}
	// house-model: read $1, output $10 per million: cost 1 + 1 = $2, untrimmed 3 + 1 = $4
	config := configtest.WriteConfig(t, "[prices.\"house-model\"]\ninput = 5.0\ncache_read = 1.0\ncache_write = 6.0\noutput = 10.0\n")
	sys, stdout, stderr := testSystem(t, env{"SMARTER_COMPACT_STATE_DIR": state, "CONTEXT_PROXY_PORT": "1"})
	if err := run(t.Context(), []string{"status", "--config", config}, sys); err != nil {
		t.Fatalf("status: %v (stderr %s)", err, stderr)
	}
	first, _, _ := strings.Cut(stdout.String(), "\n")
	if want := "Saved today (estimate): $2.00 (50.0 %) of $4.00 untrimmed, 1 request, 1 without a price;"; !strings.HasPrefix(first, want) {
		t.Errorf("status's first line:\n %s\nwant it to start with\n %s", first, want)
	}
	if !strings.Contains(stdout.String(), "no price for model mystery-model") {
		t.Errorf("status does not name the model without a price:\n%s", stdout)
	}

	sys, stdout, stderr = testSystem(t, env{"SMARTER_COMPACT_STATE_DIR": state, "CONTEXT_PROXY_PORT": "1"})
	if err := run(t.Context(), []string{"status", "--json", "--config", config}, sys); err != nil {
		t.Fatalf("status --json: %v (stderr %s)", err, stderr)
	}
	var rep struct {
		Savings struct {
			Week struct {
				Cost, Saved float64
				Percent     *float64
				Unpriced    int64 `json:"unpricedRequests"`
			}
			ByAgent []struct{ Key string }
		}
	}
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil {
		t.Fatal(err)
	}
	w := rep.Savings.Week
	if math.Abs(w.Cost-2) > 1e-9 || math.Abs(w.Saved-2) > 1e-9 || w.Percent == nil || *w.Percent != 50 || w.Unpriced != 1 {
		t.Errorf("status --json savings.week = %+v", w)
	}
	if len(rep.Savings.ByAgent) != 1 || rep.Savings.ByAgent[0].Key != "claude-code" {
		t.Errorf("savings.byAgent = %+v", rep.Savings.ByAgent)
	}
}
