package mcp

import (
	"database/sql"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3" // to give a test database a newer schema

	"github.com/smarter-compact/smarter-compact/store"
)

func TestSearchArgumentErrors(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	c := httpClient(t, r.srv)
	tests := []argError{
		{"neither", map[string]any{}, "give query (words to look for) or pattern"},
		{"both", map[string]any{"query": "a", "pattern": "a"}, "give query or pattern, not both"},
		{"blank query", map[string]any{"query": "  "}, "query is empty"},
		{"query not a string", map[string]any{"query": 5}, "query must be a string, not a number"},
		{"empty pattern", map[string]any{"pattern": ""}, "pattern is empty"},
		{"long pattern", map[string]any{"pattern": strings.Repeat("é", 201)}, "pattern has 201 characters; at most 200"},
		{"backreference", map[string]any{"pattern": `(\w+) \1`}, `pattern uses a backreference (\1), a JavaScript regular expression construct`},
		{"named backreference", map[string]any{"pattern": `(?<w>a)\k<w>`}, `a named backreference (\k<name>)`},
		{"lookahead", map[string]any{"pattern": `foo(?=bar)`}, "a lookahead (?=…)"},
		{"negative lookahead", map[string]any{"pattern": `foo(?!bar)`}, "a negative lookahead (?!…)"},
		{"lookbehind", map[string]any{"pattern": `(?<=\$)\d+`}, "a lookbehind (?<=…)"},
		{"negative lookbehind", map[string]any{"pattern": `(?<!x)y`}, "a negative lookbehind (?<!…)"},
		{"invalid regexp", map[string]any{"pattern": `(unclosed`}, "pattern is not a valid Go (RE2) regular expression: error parsing regexp: missing closing )"},
		{"unknown role", map[string]any{"query": "a", "role": "system"}, `role "system" is not a role`},
		{"empty role list", map[string]any{"query": "a", "role": []any{}}, "role is an empty list"},
		{"role list of numbers", map[string]any{"query": "a", "role": []any{1}}, "role list items must be strings"},
		{"role number", map[string]any{"query": "a", "role": 3}, `role must be "user", "assistant", "tool", a list of them, or "all", not a number`},
		{"in_context string", map[string]any{"query": "a", "in_context": "yes"}, `in_context must be true or false (or omitted), not the string "yes"`},
		{"mode", map[string]any{"query": "a", "mode": "vector"}, `mode must be "hybrid" or "lexical", not "vector"`},
		{"context too big", map[string]any{"query": "a", "context": 6}, "context must be an integer from 0 to 5"},
		{"context negative", map[string]any{"query": "a", "context": -1}, "context must be an integer from 0 to 5"},
		{"limit zero", map[string]any{"query": "a", "limit": 0}, "limit must be an integer from 1 to 100"},
		{"limit too big", map[string]any{"query": "a", "limit": 101}, "limit must be an integer from 1 to 100"},
		{"limit string", map[string]any{"query": "a", "limit": "8"}, "limit must be an integer from 1 to 100, not the string"},
		{"misspelt argument", map[string]any{"query": "a", "sessionId": "x"}, `smart_compact_search does not take "sessionId": its arguments are query, pattern, session_id, role, in_context, mode, context, limit`},
	}
	checkArgErrors(t, c, ToolSearch, tests)
	// Valid arguments get past validation to resolution (this workspace has no sessions).
	for _, args := range []map[string]any{
		{"query": "SECRETWORD", "role": "all", "in_context": false, "mode": "lexical", "context": 5, "limit": 100},
		{"pattern": `[(?=]\(?!(?<name>x)`, "role": []any{"assistant", "tool"}, "limit": 1.0},
		{"query": "a", "role": "user,tool", "session_id": nil, "in_context": nil},
	} {
		if msg := callError(t, c, ToolSearch, args); !strings.Contains(msg, "no session is registered") {
			t.Errorf("%v: %q; want the arguments accepted", args, msg)
		}
	}
	lines := telemetry(t, r.dir)
	if len(lines) != len(tests)+3 {
		t.Errorf("tool-calls.jsonl has %d lines, want %d", len(lines), len(tests)+3)
	}
	if strings.Contains(mustRead(t, filepath.Join(r.dir, telemetryFile)), "SECRETWORD") {
		t.Error("tool-calls.jsonl records the query text")
	}
}

func TestParseRoles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   any
		want []string
	}{
		{nil, []string{"user", "tool"}},
		{"all", nil},
		{"Assistant", []string{"assistant"}},
		{[]any{"tool", "user", "tool"}, []string{"tool", "user"}},
		{[]any{"user", "all"}, nil},
		{"user, assistant", []string{"user", "assistant"}},
	}
	for _, tt := range tests {
		got, err := parseRoles(tt.in)
		if err != nil || !slices.Equal(got, tt.want) || (tt.want == nil) != (got == nil) {
			t.Errorf("parseRoles(%v) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

// searchAnswer is the smart_compact_search response as a client decodes it.
type searchAnswer struct {
	Results []struct {
		SessionID    string   `json:"session_id"`
		Seq          int64    `json:"seq"`
		Role         string   `json:"role"`
		Kind         string   `json:"kind"`
		Name         string   `json:"name"`
		InContext    bool     `json:"in_context"`
		Excerpt      string   `json:"excerpt"`
		MatchedTerms *int     `json:"matched_terms"`
		BlobIDs      []string `json:"blob_ids"`
		Before       []struct {
			Seq int64 `json:"seq"`
		} `json:"before"`
		After []struct {
			Seq int64 `json:"seq"`
		} `json:"after"`
	} `json:"results"`
	TotalMatches     int               `json:"total_matches"`
	LineMatches      int               `json:"line_matches"`
	TimedOut         bool              `json:"timed_out"`
	Mode             string            `json:"mode"`
	ModeNote         string            `json:"mode_note"`
	Databases        map[string]string `json:"databases"`
	SessionsSearched []string          `json:"sessions_searched"`
	SessionIDNote    string            `json:"session_id_note"`
	Skipped          []skippedSession  `json:"skipped"`
}

const secret = "KEY-7 = 0x3f2a"

func TestSearch(t *testing.T) {
	t.Parallel()
	needReader(t)
	r := newRig(t)
	rows := standardSession(secret)
	r.addSession(t, "S", r.workspace, 1, rows...)
	c := httpClient(t, r.srv)
	blobID := store.BlobID(rows[3].text)

	t.Run("query, default roles", func(t *testing.T) {
		var a searchAnswer
		callJSON(t, c, ToolSearch, map[string]any{"query": "0x3f2a", "mode": "hybrid"}, &a)
		if a.TotalMatches != 2 || len(a.Results) != 2 {
			t.Fatalf("total_matches %d, %d results; want the user and tool rows: %+v", a.TotalMatches, len(a.Results), a)
		}
		for _, h := range a.Results {
			if h.SessionID != "S" || h.Role == "assistant" || h.MatchedTerms == nil || *h.MatchedTerms != 1 || !strings.Contains(h.Excerpt, "0x3f2a") {
				t.Errorf("hit %+v", h)
			}
			if h.Seq == 4 && (!slices.Equal(h.BlobIDs, []string{blobID}) || h.InContext || h.Kind != "tool_result" || h.Name != "Bash") {
				t.Errorf("tool hit %+v: want blob_ids [%s], trimmed, tool_result Bash", h, blobID)
			}
		}
		if a.Mode != "lexical" || !strings.Contains(a.ModeNote, "lexical ranking ran") {
			t.Errorf("mode %q note %q: hybrid must fall back to lexical and say so", a.Mode, a.ModeNote)
		}
		if !slices.Equal(a.SessionsSearched, []string{"S"}) || a.Databases["S"] != filepath.Join(r.dir, "sessions", "S.db") || a.SessionIDNote != "" {
			t.Errorf("sessions_searched %v databases %v note %q", a.SessionsSearched, a.Databases, a.SessionIDNote)
		}
	})
	t.Run("pattern, all roles", func(t *testing.T) {
		var a searchAnswer
		callJSON(t, c, ToolSearch, map[string]any{"pattern": `KEY-7 = 0x[0-9a-f]+`, "role": "all"}, &a)
		if a.TotalMatches != 3 || a.LineMatches != 3 || a.Results[0].MatchedTerms != nil {
			t.Errorf("total %d lines %d first %+v; want 3 rows, 3 lines, no matched_terms", a.TotalMatches, a.LineMatches, a.Results[0])
		}
	})
	t.Run("trimmed rows only, with context and limit", func(t *testing.T) {
		var a searchAnswer
		callJSON(t, c, ToolSearch, map[string]any{"query": "0x3f2a", "in_context": false, "context": 1, "limit": 1}, &a)
		if a.TotalMatches != 1 || len(a.Results) != 1 || a.Results[0].Seq != 4 {
			t.Fatalf("%+v: want the trimmed tool row alone", a)
		}
		h := a.Results[0]
		if len(h.Before) != 1 || h.Before[0].Seq != 3 || len(h.After) != 1 || h.After[0].Seq != 5 {
			t.Errorf("before %+v after %+v; want seq 3 and 5", h.Before, h.After)
		}
	})
	t.Run("alias", func(t *testing.T) {
		var a searchAnswer
		callJSON(t, c, ToolSearch, map[string]any{"query": "0x3f2a", "session_id": "current"}, &a)
		if !strings.Contains(a.SessionIDNote, `"current"`) || !slices.Equal(a.SessionsSearched, []string{"S"}) {
			t.Errorf("note %q sessions %v", a.SessionIDNote, a.SessionsSearched)
		}
	})
	lines := telemetry(t, r.dir)
	if l := lines[0]; l["tool"] != ToolSearch || l["hits"] != 2.0 || l["total_matches"] != 2.0 || l["sessions"] != 1.0 {
		t.Errorf("first tool-calls.jsonl line %v", l)
	}
	if strings.Contains(mustRead(t, filepath.Join(r.dir, telemetryFile)), "0x3f2a") {
		t.Error("tool-calls.jsonl records the query")
	}
}

// Several sessions are searched newest first and their counts add up; a database with a
// newer schema is skipped with a note; when nothing could be read the call fails.
func TestSearchSeveralSessions(t *testing.T) {
	t.Parallel()
	needReader(t)
	r := newRig(t)
	r.addSession(t, "old", r.repo, 1, standardSession(secret)...)
	r.addSession(t, "new", r.repo, 2, standardSession(secret)...)
	r.addSession(t, "future", r.repo, 3, tinySession...)
	if err := r.writer.Close(); err != nil { // release the writer before changing the file
		t.Fatal(err)
	}
	setUserVersion(t, filepath.Join(r.dir, "sessions", "future.db"), store.SchemaVersion+1)
	c := httpClient(t, r.srv)

	var a searchAnswer
	callJSON(t, c, ToolSearch, map[string]any{"query": "0x3f2a"}, &a)
	if !slices.Equal(a.SessionsSearched, []string{"new", "old"}) || a.TotalMatches != 4 || len(a.Results) != 4 {
		t.Errorf("sessions %v total %d results %d; want new, old and 4 rows", a.SessionsSearched, a.TotalMatches, len(a.Results))
	}
	if len(a.Skipped) != 1 || a.Skipped[0].SessionID != "future" || !strings.Contains(a.Skipped[0].Reason, "newer") {
		t.Errorf("skipped %+v; want future with a newer-schema reason", a.Skipped)
	}
	if msg := callError(t, c, ToolSearch, map[string]any{"query": "x", "session_id": "future"}); !strings.Contains(msg, "could not read session future") {
		t.Errorf("error %q", msg)
	}
	if msg := callError(t, c, ToolSQL, map[string]any{"sql": "SELECT 1", "session_id": "future"}); !strings.Contains(msg, "could not read session future") {
		t.Errorf("sql error %q", msg)
	}
}

func setUserVersion(t *testing.T, path string, v int) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("PRAGMA user_version = " + strconv.Itoa(v)); err != nil {
		t.Fatal(err)
	}
}
