package installer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestTOMLGolden runs the edit scripts of testdata/edit/toml/*.txtar like TestJSONGolden.
// Script lines: "setkey <key> <json>", "setkeyin <table> <key> <json>", "settable <header>
// <text>" (the table's text with \n for its line ends), "removekey <key>", "removetable
// <header>".
func TestTOMLGolden(t *testing.T) {
	runEditGolden(t, "toml", func(in []byte, script []string) ([]byte, []Op, error) {
		doc, err := ParseTOMLDoc(in)
		if err != nil {
			return nil, nil, err
		}
		var ops []Op
		for _, line := range script {
			f := strings.SplitN(line, " ", 3)
			var op Op
			switch {
			case f[0] == "setkey" && len(f) == 3:
				op, err = doc.SetKey(f[1], json.RawMessage(f[2]))
			case f[0] == "settable" && len(f) == 3:
				op, err = doc.SetTable(f[1], strings.ReplaceAll(f[2], `\n`, "\n"))
			case f[0] == "setkeyin" && len(f) == 3:
				key, value, _ := strings.Cut(f[2], " ")
				op, err = doc.SetKeyIn(f[1], key, json.RawMessage(value))
			case f[0] == "removekey":
				op, err = doc.RemoveKey(f[1])
			case f[0] == "removetable":
				op, err = doc.RemoveTable(f[1])
			default:
				err = fmt.Errorf("bad script line")
			}
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", line, err)
			}
			ops = append(ops, op)
		}
		return doc.Bytes(), ops, nil
	})
}

func TestTOMLKey(t *testing.T) {
	t.Parallel()
	doc, err := ParseTOMLDoc([]byte(`model = 'o3' # literal string
n = 5
f = 1.5
on = true
list = ["a",
  "b",
]
inline = { a = 1, b = "<&>" }

[t]
x = 1
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ key, want string }{
		{"model", `"o3"`},
		{"n", `5`},
		{"f", `1.5`},
		{"on", `true`},
		{"list", `["a","b"]`},
		{"inline", `{"a":1,"b":"<&>"}`},
		{"t", `{"x":1}`},
	} {
		got, ok := doc.Key(tc.key)
		if !ok || string(got) != tc.want {
			t.Errorf("Key(%s) = %s, %v; want %s", tc.key, got, ok, tc.want)
		}
	}
	if got, ok := doc.Key("x"); ok {
		t.Errorf("Key(x) = %s: x is in [t], not top-level", got)
	}
}

// TestTOMLSetKeyValues writes each kind of JSON value as TOML and reads it back.
func TestTOMLSetKeyValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ value, line string }{
		{`"smarter-compact"`, `k = "smarter-compact"`},
		{`"C:\\Users\\me\\sc.exe"`, `k = "C:\\Users\\me\\sc.exe"`},
		{`"quote \" tab \t nl \n bell \u0007 del \u007f é"`, `k = "quote \" tab \t nl \n bell \u0007 del \u007F é"`},
		{`"a \u0026 \u003cb\u003e"`, `k = "a & <b>"`},
		{`42`, `k = 42`},
		{`-1.5e3`, `k = -1.5e3`},
		{`false`, `k = false`},
		{`["mcp", 1, true]`, `k = ["mcp", 1, true]`},
		{`{"b": 1, "a b": "x", "c": {"d": []}}`, `k = { b = 1, "a b" = "x", c = { d = [] } }`},
	} {
		doc, err := ParseTOMLDoc([]byte("# c\n"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := doc.SetKey("k", json.RawMessage(tc.value)); err != nil {
			t.Fatalf("SetKey(%s): %v", tc.value, err)
		}
		if got, want := string(doc.Bytes()), "# c\n"+tc.line+"\n"; got != want {
			t.Errorf("SetKey(%s) wrote\n%s\nwant\n%s", tc.value, got, want)
		}
		got, _ := doc.Key("k")
		if !sameValue(got, json.RawMessage(tc.value)) {
			t.Errorf("SetKey(%s) reads back as %s", tc.value, got)
		}
	}
	doc, _ := ParseTOMLDoc(nil)
	if _, err := doc.SetKey("k", json.RawMessage(`null`)); err == nil {
		t.Error("SetKey(null) did not fail")
	}
}

// TestTOMLRefuses: a table defined some other way is never added a second time, and a key
// that is a table is not overwritten; the document stays as it was.
func TestTOMLRefuses(t *testing.T) {
	t.Parallel()
	const ours = "[mcp_servers.smarter-compact]\ncommand = \"sc\"\n"
	for _, tc := range []struct{ name, in, want string }{
		{"inline in parent", "[mcp_servers]\nsmarter-compact = { command = \"x\" }\n", "inline table or dotted keys"},
		{"dotted at top", "mcp_servers.smarter-compact.command = \"x\"\n", "inline table or dotted keys"},
		{"dotted in parent", "[mcp_servers]\nsmarter-compact.command = \"x\"\n", "inline table or dotted keys"},
		{"parent inline", "mcp_servers = { other = { command = \"y\" } }\n", "is a value, not a table"},
		{"parent array of tables", "[[mcp_servers]]\nname = \"x\"\n", "array of tables"},
		{"sub-table without header", "[mcp_servers.smarter-compact.env]\nA = \"1\"\n", "sub-table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := ParseTOMLDoc([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			_, err = doc.SetTable("[mcp_servers.smarter-compact]", ours)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("SetTable: error %v, want one containing %q", err, tc.want)
			}
			if string(doc.Bytes()) != tc.in {
				t.Errorf("a refused SetTable changed the document to\n%s", doc.Bytes())
			}
		})
	}
	for _, in := range []string{"[model_provider]\nx = 1\n", "model_provider.x = 1\n"} {
		doc, err := ParseTOMLDoc([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := doc.SetKey("model_provider", json.RawMessage(`"sc"`)); err == nil || !strings.Contains(err.Error(), "defined as a table or dotted keys") {
			t.Errorf("SetKey over %q: error %v", in, err)
		}
		if _, err := doc.RemoveKey("model_provider"); err == nil {
			t.Errorf("RemoveKey over %q did not refuse", in)
		}
	}
	doc, _ := ParseTOMLDoc(nil)
	for _, h := range []string{"mcp_servers", "[[a]]", "[a] x = 1", "[a.]"} {
		if _, err := doc.SetTable(h, "x = 1\n"); err == nil {
			t.Errorf("SetTable(%q) accepted a bad header", h)
		}
	}
	if _, err := doc.SetTable("[a]", "x = \n"); err == nil || !strings.Contains(err.Error(), "not TOML") {
		t.Errorf("SetTable with bad text: %v", err)
	}
	if len(doc.Bytes()) != 0 {
		t.Errorf("refused edits changed an empty document: %q", doc.Bytes())
	}
}

func TestTOMLParseError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in        string
		line, col int
	}{
		{"a = 1\nb = \n", 2, 5},
		{"a = 1\r\n[t]\r\nx = 1\r\nx = 2\r\n", 4, 1}, // a duplicate key
		{"[t]\nx = [1,\n", 2, 8},                     // where the unclosed array runs out
	} {
		_, err := ParseTOMLDoc([]byte(tc.in))
		var pe *parseError
		if !errors.As(err, &pe) {
			t.Fatalf("ParseTOMLDoc(%q): %v, want a parseError", tc.in, err)
		}
		if pe.Line != tc.line || pe.Column != tc.col {
			t.Errorf("ParseTOMLDoc(%q): line %d column %d (%s); want line %d column %d", tc.in, pe.Line, pe.Column, pe.Msg, tc.line, tc.col)
		}
		if !strings.Contains(err.Error(), "fix the file or move it away, then run install again") {
			t.Errorf("error %q does not say what to do", err)
		}
	}
}

// TestTOMLTableSpan checks what Table hands back around the parser traps of go-spikes.md §6:
// a multi-line array holding "[not.a.table]", a quoted key that looks like a header, a
// multi-line string with header-like lines, sub-tables, and the comments above the next
// table.
func TestTOMLTableSpan(t *testing.T) {
	t.Parallel()
	ours := `[mcp_servers.smarter-compact]
args = [
  "--flag",
[not.a.table]
]
"[mcp_servers.evil]" = 1
doc = """
[still.a.string]
# not a comment
"""

[mcp_servers.smarter-compact.env]
A = "1"
`
	in := "model = \"o3\"\n\n" + ours + "\n# the next table\n[mcp_servers.other]\ncommand = \"x\"\n"
	// "[not.a.table]" on its own line in an array is not valid TOML; make it a string.
	in = strings.Replace(in, "[not.a.table]\n", "\"[not.a.table]\",\n", 1)
	ours = strings.Replace(ours, "[not.a.table]\n", "\"[not.a.table]\",\n", 1)
	doc, err := ParseTOMLDoc([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := doc.Table("[mcp_servers.smarter-compact]")
	if !ok || got != ours {
		t.Errorf("Table = %v\n%s\nwant\n%s", ok, got, ours)
	}
	if got, ok := doc.Table(`[mcp_servers."smarter-compact"]`); !ok || got != ours {
		t.Errorf("Table with a quoted header = %v\n%s", ok, got)
	}
	if got, ok := doc.Table("[mcp_servers.other]"); !ok || got != "[mcp_servers.other]\ncommand = \"x\"\n" {
		t.Errorf("Table(other) = %v %q", ok, got)
	}
	if _, ok := doc.Table("[mcp_servers]"); ok {
		t.Error("Table([mcp_servers]) found a table that has no header of its own")
	}
	if _, err := doc.RemoveTable("[mcp_servers.smarter-compact]"); err != nil {
		t.Fatal(err)
	}
	want := "model = \"o3\"\n\n# the next table\n[mcp_servers.other]\ncommand = \"x\"\n"
	if got := string(doc.Bytes()); got != want {
		t.Errorf("after RemoveTable:\n%s\nwant\n%s", got, want)
	}
}

// TestTOMLNoFinalNewline: a file whose last line has no line end (txtar cannot hold one) gets
// additions without one either, and undo gives back the same bytes.
func TestTOMLNoFinalNewline(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
		edit           func(*TOMLDoc) (Op, error)
	}{
		{"table", "model = \"o3\"\n[tui]\nnotifications = true", "model = \"o3\"\n[tui]\nnotifications = true\n\n[mcp_servers.sc]\ncommand = \"sc\"",
			func(d *TOMLDoc) (Op, error) { return d.SetTable("[mcp_servers.sc]", "command = \"sc\"\n") }},
		{"key", "model = \"o3\"", "model = \"o3\"\nmodel_provider = \"sc\"",
			func(d *TOMLDoc) (Op, error) { return d.SetKey("model_provider", json.RawMessage(`"sc"`)) }},
		{"key, CRLF", "# c\r\nmodel = \"o3\"", "# c\r\nmodel = \"o3\"\r\nmodel_provider = \"sc\"",
			func(d *TOMLDoc) (Op, error) { return d.SetKey("model_provider", json.RawMessage(`"sc"`)) }},
		{"replace the last table", "[mcp_servers.sc]\ncommand = \"old\"", "[mcp_servers.sc]\ncommand = \"sc\"",
			func(d *TOMLDoc) (Op, error) { return d.SetTable("[mcp_servers.sc]", "command = \"sc\"\n") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := ParseTOMLDoc([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			op, err := tc.edit(doc)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(doc.Bytes()); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			back, kept, err := revertOps(doc.Bytes(), []Op{op})
			if err != nil || len(kept) > 0 || string(back) != tc.in {
				t.Errorf("undo: %q, kept %v, %v; want %q", back, kept, err, tc.in)
			}
		})
	}
}

// TestTOMLBOM: a byte order mark stays in front and does not upset the parser.
func TestTOMLBOM(t *testing.T) {
	t.Parallel()
	in := "\ufeff# c\nmodel = \"o3\"\n"
	doc, err := ParseTOMLDoc([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	op, err := doc.SetKey("model_provider", json.RawMessage(`"sc"`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(doc.Bytes()), in+"model_provider = \"sc\"\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if back, _, err := revertOps(doc.Bytes(), []Op{op}); err != nil || string(back) != in {
		t.Errorf("undo: %q, %v", back, err)
	}
}
