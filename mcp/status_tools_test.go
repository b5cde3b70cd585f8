package mcp

import (
	"os"
	"path/filepath"
	"testing"
)

// context_status counts the recall tools' calls of its window by tool name (issue 17), and
// tool-calls.jsonl lines name the sessions a call read, so stats can tell calls after a trim.
func TestStatusCountsToolCalls(t *testing.T) {
	r := newRig(t)
	r.addSession(t, "s1", r.repo, 1, standardSession("KEY-7 = 0x3f2a")...)
	c := httpClient(t, r.srv)
	call(t, c, ToolSearch, map[string]any{"session_id": "s1", "pattern": "KEY-7"})
	call(t, c, ToolSearch, map[string]any{"query": "nothing-matches-this"})
	call(t, c, ToolSQL, map[string]any{"sql": "SELECT count(*) FROM messages"})
	// a line from before the window does not count
	old := `{"at":"2026-09-01T00:00:00Z","tool":"smart_compact_search","hits":3}` + "\n"
	f, err := os.OpenFile(filepath.Join(r.dir, telemetryFile), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(old); err != nil {
		t.Fatal(err)
	}
	f.Close()

	var st struct {
		Trims int `json:"trims"`
		Tools map[string]struct {
			Calls, Hits, Empty, Errors int
		} `json:"tools"`
	}
	callJSON(t, c, ToolStatus, nil, &st)
	s, q := st.Tools[ToolSearch], st.Tools[ToolSQL]
	if s.Calls != 2 || s.Hits != 2 || s.Empty != 1 || s.Errors != 0 || q.Calls != 1 || q.Hits != 1 || len(st.Tools) != 2 {
		t.Fatalf("tools %+v: want 2 searches (2 hits, 1 empty) and 1 sql call of 1 row", st.Tools)
	}
	for i, l := range telemetry(t, r.dir)[:3] {
		ids, _ := l["session_ids"].([]any)
		if len(ids) != 1 || ids[0] != "s1" {
			t.Errorf("line %d: session_ids %v, want [s1]", i, l["session_ids"])
		}
	}
}
