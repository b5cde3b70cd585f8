package mcp

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// countLog is app.log as the agent's `cat app.log` printed it: 30 lines, countErrors of
// them with ERROR (one of those twice, byte for byte, as a log with second resolution
// repeats itself), none with "error" in another case.
func countLog() (log string, errors []string) {
	var b strings.Builder
	for i := range 30 {
		line := fmt.Sprintf("2026-10-29T16:58:%02dZ INFO worker: job %d done in %d ms", i, 4100+i, 20+i*7%90)
		switch i {
		case 3, 9, 14, 15, 22, 27:
			line = fmt.Sprintf("2026-10-29T16:58:%02dZ ERROR db: connection reset by peer (job %d)", i, 4100+i)
		case 16:
			line = errors[len(errors)-1] // the same line again
		}
		if strings.Contains(line, "ERROR") {
			errors = append(errors, line)
		}
		b.WriteString(line + "\n")
	}
	return b.String(), errors
}

// countErrors is the number of ERROR lines in countLog: what `grep -c ERROR app.log` says.
const countErrors = 7

// countSession is a session where the agent reads app.log, says some of its ERROR lines
// back, greps the file (the grep's output repeats every ERROR line), and says them again.
func countSession(t *testing.T) []row {
	t.Helper()
	log, errs := countLog()
	if len(errs) != countErrors {
		t.Fatalf("countLog has %d ERROR lines, want %d", len(errs), countErrors)
	}
	return []row{
		{role: "user", kind: "text", text: "Look at app.log: how many errors are in it?"},
		{role: "assistant", kind: "tool_use", name: "Bash", text: `{"command":"cat app.log","description":"Read the log"}`},
		{role: "tool", kind: "tool_result", name: "Bash", text: log, trimmed: true},
		{role: "assistant", kind: "text", text: "The log has several errors, for example:\n" + errs[0] + "\n" + errs[1] + "\nLet me count them exactly.", trimmed: true},
		{role: "assistant", kind: "tool_use", name: "Bash", text: `{"command":"grep ERROR app.log","description":"List the ERROR lines"}`},
		{role: "tool", kind: "tool_result", name: "Bash", text: strings.Join(errs, "\n") + "\n"},
		{role: "assistant", kind: "text", text: fmt.Sprintf("There are %d ERROR lines; the last one is\n%s", len(errs), errs[len(errs)-1])},
		{role: "user", kind: "text", text: "Count the ERROR lines of app.log again, from what is stored."},
	}
}

// countDocumented returns the SELECT statements the smart_compact_sql and
// smart_compact_search descriptions give as examples, as the server lists them.
func countDocumented(t *testing.T, tools []mcpgo.Tool) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	sel := regexp.MustCompile(`(?im)^\s*(?:SELECT|WITH)\s.*$`)
	for _, tool := range tools {
		if tool.Name != ToolSQL && tool.Name != ToolSearch {
			continue
		}
		for _, q := range sel.FindAllString(tool.Description, -1) {
			out[tool.Name] = append(out[tool.Name], strings.TrimSpace(q))
		}
	}
	return out
}

// TestCountOriginalDataOnce checks the counting method the tool descriptions document on a
// session where the data was echoed: the agent repeated ERROR lines in its replies and
// grepped the file, so the same lines are stored up to three times. The documented method
// must count app.log's ERROR lines once (countErrors); the naive count over all lines counts
// more, which is why the method is documented.
func TestCountOriginalDataOnce(t *testing.T) {
	t.Parallel()
	needReader(t)
	r := newRig(t)
	rows := countSession(t)
	r.addSession(t, "count", r.workspace, 1, rows...)
	c := httpClient(t, r.srv)

	count := func(t *testing.T, stmt string) int {
		t.Helper()
		var a sqlAnswer
		callJSON(t, c, ToolSQL, map[string]any{"session_id": "count", "sql": stmt}, &a)
		if len(a.Rows) != 1 || len(a.Rows[0]) != 1 {
			t.Fatalf("%s: %+v; want one value", stmt, a)
		}
		n, ok := a.Rows[0][0].(float64)
		if !ok {
			t.Fatalf("%s: %v is not a number", stmt, a.Rows[0][0])
		}
		return int(n)
	}

	// The naive count: every stored line that LIKE matches, which is case-insensitive.
	naiveWant := 0
	for _, x := range rows {
		for line := range strings.SplitSeq(x.text, "\n") {
			if strings.Contains(strings.ToUpper(line), "ERROR") {
				naiveWant++
			}
		}
	}
	naive := count(t, `SELECT count(*) FROM lines WHERE text LIKE '%ERROR%'`)
	if naive != naiveWant || naive <= countErrors {
		t.Errorf("naive count %d, want %d (more than the %d ERROR lines of app.log)", naive, naiveWant, countErrors)
	}

	res, err := c.ListTools(t.Context(), mcpgo.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	documented := countDocumented(t, res.Tools)
	if len(documented) == 0 {
		t.Fatalf("neither %s nor %s documents a counting query (a line starting with SELECT or WITH)", ToolSQL, ToolSearch)
	}
	for tool, stmts := range documented {
		for _, stmt := range stmts {
			if !strings.Contains(stmt, "ERROR") {
				t.Errorf("%s documents %q, which does not count ERROR lines: adapt this test to the example", tool, stmt)
				continue
			}
			if got := count(t, stmt); got != countErrors {
				t.Errorf("%s's documented count gives %d, want %d (naive: %d): a grep's output is a tool_result too, so "+
					"restricting to tool_result rows counts app.log's lines once per read or grep; document a query "+
					"that counts each line once, such as countFirstAppearance\n%s", tool, got, countErrors, naive, stmt)
			}
		}
	}

	// A method that does count once: ERROR lines of tool output (GLOB, like grep, is
	// case-sensitive) at their first appearance in tool output, so a grep or a re-read of the
	// same data adds nothing while a line the log itself repeats still counts.
	if got := count(t, countFirstAppearance); got != countErrors {
		t.Errorf("first-appearance count %d, want %d", got, countErrors)
	}
	// Distinct lines undercount: the log repeats one ERROR line.
	if got := count(t, `SELECT count(DISTINCT l.text) FROM lines l JOIN messages m ON m.seq = l.message_seq WHERE m.role = 'tool' AND l.text GLOB '*ERROR*'`); got != countErrors-1 {
		t.Errorf("distinct count %d, want %d", got, countErrors-1)
	}

	// smart_compact_search's line_matches counts lines in user and tool rows: the grep's
	// output is tool output, so it counts app.log's lines twice.
	var s searchAnswer
	callJSON(t, c, ToolSearch, map[string]any{"session_id": "count", "pattern": "ERROR", "limit": 100}, &s)
	t.Logf("app.log has %d ERROR lines; naive LIKE count %d; smart_compact_search pattern ERROR: total_matches %d, line_matches %d",
		countErrors, naive, s.TotalMatches, s.LineMatches)
}

// countFirstAppearance counts each ERROR line of tool output once, in the first tool result
// that holds it.
const countFirstAppearance = `SELECT count(*) FROM (SELECT l.message_seq AS seq, min(l.message_seq) OVER (PARTITION BY l.text) AS first FROM lines l JOIN messages m ON m.seq = l.message_seq WHERE m.role = 'tool' AND m.kind = 'tool_result' AND l.text GLOB '*ERROR*') WHERE seq = first`

// TestCountLikeIgnoresCase shows the second trap of the documented example: LIKE is
// case-insensitive for ASCII in SQLite, so an INFO line mentioning "errors" counts as an
// ERROR line, which `grep ERROR` would not print.
func TestCountLikeIgnoresCase(t *testing.T) {
	t.Parallel()
	needReader(t)
	r := newRig(t)
	log := "2026-10-29T16:58:01Z ERROR db: connection reset by peer\n" +
		"2026-10-29T16:58:02Z INFO retry: recovered after 1 error\n" +
		"2026-10-29T16:58:03Z ERROR db: connection reset by peer (again)\n"
	r.writeSession(t, "case", []row{
		{role: "user", kind: "text", text: "Read app.log."},
		{role: "assistant", kind: "tool_use", name: "Bash", text: `{"command":"cat app.log"}`},
		{role: "tool", kind: "tool_result", name: "Bash", text: log},
	}...)
	c := httpClient(t, r.srv)
	for _, tt := range []struct {
		match string
		want  int
	}{
		{"l.text LIKE '%ERROR%'", 3},  // counts the INFO line
		{"l.text GLOB '*ERROR*'", 2},  // grep ERROR
		{"instr(l.text, 'ERROR')", 2}, // the same, without wildcards
	} {
		stmt := "SELECT count(*) FROM lines l JOIN messages m ON m.seq = l.message_seq WHERE m.role = 'tool' AND m.kind = 'tool_result' AND " + tt.match
		var a sqlAnswer
		callJSON(t, c, ToolSQL, map[string]any{"session_id": "case", "sql": stmt}, &a)
		if len(a.Rows) != 1 || a.Rows[0][0] != float64(tt.want) {
			t.Errorf("%s: %v, want %d", tt.match, a.Rows, tt.want)
		}
	}
}
