package app

import (
	"encoding/json"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/smarter-compact/smarter-compact/mcp"
	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/storetest"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata")

// checkGolden compares got with testdata/name, or writes it there with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		must(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestStatsGolden: a session trimmed once, whose agent then searched twice through the real
// MCP server, next to an untrimmed session with no calls. `stats` and `stats --json` show
// exactly those two calls, after the trim, and the store's inventory.
func TestStatsGolden(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	root := storetest.OpenRootAt(t, filepath.Join(state, "context"))
	work := filepath.Join(t.TempDir(), "shop")
	must(t, os.MkdirAll(filepath.Join(work, ".git"), 0o700))
	trimAt := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	i64 := func(n int64) *int64 { return &n }
	storetest.SeedSession(t, root, storetest.Seed{SID: "sess-trimmed", Agent: "claude-code", Cwd: work, Now: trimAt.Add(-time.Hour),
		Rows: []storetest.Row{
			{Thread: "main", Role: "user", Text: "Remember KEY-7 = 0x3f2a.", Trimmed: true, CutBy: 4},
			{Thread: "main", Role: "assistant", Kind: "tool_use", Name: "Bash", Text: `{"command":"cat big.log"}`, Trimmed: true, CutBy: 4},
			{Thread: "main", Role: "tool", Kind: "tool_result", Name: "Bash", Text: "line 1\nline 2\nKEY-7 again", Trimmed: true, CutBy: 4, Blob: true},
			{Thread: "main", Role: "user", Text: "What was KEY-7?"},
		},
		Events: []store.Event{{At: trimAt, Kind: "trim", Version: "proxy:0123456789ab", TokensBefore: i64(9000), TokensAfter: i64(2000), Dropped: i64(3)}},
	})
	storetest.SeedSession(t, root, storetest.Seed{SID: "sess-plain", Agent: "codex", Cwd: filepath.Join(t.TempDir(), "other"), Now: trimAt,
		Rows: []storetest.Row{{Thread: "t", Role: "user", Text: "hello"}}})

	// the scripted agent: two searches a minute after the trim, through the MCP server
	srv := mcp.New(root, mcp.Options{Workspace: work, Now: func() time.Time { return trimAt.Add(time.Minute) }})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	c, err := client.NewStreamableHttpClient(ts.URL + "/mcp")
	must(t, err)
	t.Cleanup(func() { _ = c.Close() })
	must(t, c.Start(t.Context()))
	init := mcpgo.InitializeRequest{}
	init.Params.ClientInfo = mcpgo.Implementation{Name: "stats-test", Version: "1"}
	_, err = c.Initialize(t.Context(), init)
	must(t, err)
	for _, args := range []map[string]any{
		{"session_id": "sess-trimmed", "pattern": "KEY-7", "role": "all"},
		{"query": "KEY-7"},
	} {
		req := mcpgo.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "smart_compact_search", args
		res, err := c.CallTool(t.Context(), req)
		if err != nil || res.IsError {
			t.Fatalf("search %v: %v %+v", args, err, res)
		}
	}

	// the session list is newest first by file time: fix it for the golden text
	root.SettleAll()
	for sid, at := range map[string]time.Time{"sess-trimmed": trimAt.Add(2 * time.Minute), "sess-plain": trimAt.Add(-time.Hour)} {
		for _, suffix := range []string{".db", ".db-wal"} {
			if err := os.Chtimes(filepath.Join(state, "context", "sessions", sid+suffix), at, at); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
	}

	sys, stdout, stderr := testSystem(t, env{"SMARTER_COMPACT_STATE_DIR": state})
	if err := run(t.Context(), []string{"stats"}, sys); err != nil {
		t.Fatalf("stats: %v (%s)", err, stderr)
	}
	checkGolden(t, "stats.golden", stdout.String())

	sys, stdout, _ = testSystem(t, env{"SMARTER_COMPACT_STATE_DIR": state})
	must(t, run(t.Context(), []string{"stats", "--json"}, sys))
	checkGolden(t, "stats.json.golden", stdout.String())
	var st store.Stats
	must(t, json.Unmarshal([]byte(stdout.String()), &st))
	if st.Tools["smart_compact_search"] != 2 || st.AfterTrim != 2 || st.SearchedShare == nil || *st.SearchedShare != 1 {
		t.Fatalf("stats %+v: want two searches, both after the trim, and the one trimmed session searched", st)
	}
}
