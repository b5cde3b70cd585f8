package mcp

import (
	"strings"
	"testing"
)

// countOnce is the description's example: count ERROR lines in tool output, not in the
// agent's own echoes.
const countOnce = "SELECT count(*) FROM lines l JOIN messages m ON m.seq = l.message_seq WHERE m.role = 'tool' AND m.kind = 'tool_result' AND l.text LIKE '%ERROR%'"

type sqlAnswer struct {
	SessionID     string   `json:"session_id"`
	Columns       []string `json:"columns"`
	Rows          [][]any  `json:"rows"`
	Truncated     bool     `json:"truncated"`
	SessionIDNote string   `json:"session_id_note"`
}

func TestSQLArgumentErrors(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	c := httpClient(t, r.srv)
	tests := []argError{
		{"missing sql", map[string]any{}, "sql is required"},
		{"blank sql", map[string]any{"sql": " \n"}, "sql is required"},
		{"sql not a string", map[string]any{"sql": []any{"SELECT 1"}}, "sql must be a string, not an array"},
		{"unknown argument", map[string]any{"sql": "SELECT 1", "query": "x"}, `smart_compact_sql does not take "query": its arguments are sql, session_id`},
	}
	checkArgErrors(t, c, ToolSQL, tests)
}

func TestSQL(t *testing.T) {
	t.Parallel()
	needReader(t)
	r := newRig(t)
	r.addSession(t, "old", r.repo, 1, tinySession...)
	r.addSession(t, "new", r.workspace, 2, standardSession(secret)...)
	c := httpClient(t, r.srv)

	t.Run("count the original once", func(t *testing.T) {
		var a sqlAnswer
		callJSON(t, c, ToolSQL, map[string]any{"sql": countOnce, "session_id": "new"}, &a)
		if a.SessionID != "new" || len(a.Columns) != 1 || len(a.Rows) != 1 || a.Rows[0][0] != 2.0 || a.Truncated || a.SessionIDNote != "" {
			t.Errorf("%+v; want one row [2] from session new, no note", a)
		}
	})
	t.Run("newest of several, noted", func(t *testing.T) {
		var a sqlAnswer
		callJSON(t, c, ToolSQL, map[string]any{"sql": "SELECT count(*) AS n FROM messages"}, &a)
		if a.SessionID != "new" || a.Rows[0][0] != 5.0 || !strings.Contains(a.SessionIDNote, "ran on the newest of 2 matching sessions, new; the others are old") {
			t.Errorf("%+v", a)
		}
	})
	t.Run("alias noted twice", func(t *testing.T) {
		var a sqlAnswer
		callJSON(t, c, ToolSQL, map[string]any{"sql": "SELECT 1", "session_id": "latest"}, &a)
		if !strings.Contains(a.SessionIDNote, `"latest" is not a session id`) || !strings.Contains(a.SessionIDNote, "ran on the newest") {
			t.Errorf("note %q", a.SessionIDNote)
		}
	})
	t.Run("explicit session", func(t *testing.T) {
		var a sqlAnswer
		callJSON(t, c, ToolSQL, map[string]any{"sql": "SELECT text FROM messages", "session_id": "old"}, &a)
		if a.SessionID != "old" || len(a.Rows) != 1 || a.Rows[0][0] != "hello" {
			t.Errorf("%+v", a)
		}
	})
	for _, tt := range []struct{ sql, want string }{
		{"DELETE FROM messages", "sql refused"},
		{"PRAGMA user_version", "sql refused"},
		{"SELECT 1; SELECT 2", "sql refused"},
		{"SELECT * FROM nope", "sql failed on session new"},
	} {
		t.Run(tt.sql, func(t *testing.T) {
			if msg := callError(t, c, ToolSQL, map[string]any{"sql": tt.sql, "session_id": "new"}); !strings.Contains(msg, tt.want) {
				t.Errorf("error %q, want %q", msg, tt.want)
			}
		})
	}
	lines := telemetry(t, r.dir)
	if l := lines[0]; l["tool"] != ToolSQL || l["rows"] != 1.0 || l["error"] != nil {
		t.Errorf("first tool-calls.jsonl line %v", l)
	}
	if strings.Contains(mustRead(t, r.dir+"/"+telemetryFile), "ERROR") {
		t.Error("tool-calls.jsonl records the statement")
	}
}
