package installer

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJSONGolden runs the edit scripts of testdata/edit/json/*.txtar. Each archive has an
// "in" file, "ops" (one per line: "set <pointer> <json>" or "remove <pointer>") and the
// expected "out". Every case also runs with CRLF line ends (in and out converted), and the
// inverse of the recorded ops (what uninstall does) must give back "in" byte for byte,
// unless the comment says "roundtrip: by value". go test -update rewrites "out".
func TestJSONGolden(t *testing.T) {
	runEditGolden(t, "json", func(in []byte, script []string) ([]byte, []Op, error) {
		doc, err := ParseJSONDoc(in)
		if err != nil {
			return nil, nil, err
		}
		var ops []Op
		for _, line := range script {
			verb, rest, _ := strings.Cut(line, " ")
			ptr, value, _ := strings.Cut(rest, " ")
			var op Op
			switch verb {
			case "set":
				op, err = doc.Set(ptr, json.RawMessage(value))
			case "remove":
				op, err = doc.Remove(ptr)
			default:
				err = fmt.Errorf("unknown verb %q", verb)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", line, err)
			}
			ops = append(ops, op)
		}
		return doc.Bytes(), ops, nil
	})
}

// runEditGolden is the shared harness of the JSON and TOML edit goldens.
func runEditGolden(t *testing.T, dir string, run func(in []byte, script []string) ([]byte, []Op, error)) {
	files, err := filepath.Glob(filepath.Join("testdata", "edit", dir, "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no goldens in testdata/edit/%s: %v", dir, err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			a := parseEditArchive(data)
			in := a.file("in")
			var script []string
			for _, l := range strings.Split(string(a.file("ops")), "\n") {
				if strings.TrimSpace(l) != "" {
					script = append(script, l)
				}
			}
			byValue := bytes.Contains(a.comment, []byte("roundtrip: by value"))
			for _, crlf := range []bool{false, true} {
				if crlf && !bytes.Contains(in, []byte("\n")) {
					continue // no line ends to convert
				}
				in, want := in, a.file("out")
				if crlf {
					in, want = toCRLF(in), toCRLF(want)
				}
				got, ops, err := run(in, script)
				if err != nil {
					t.Fatalf("crlf=%v: %v", crlf, err)
				}
				if !crlf && updating() {
					a.set("out", got)
					want = got
				}
				if !bytes.Equal(got, want) {
					t.Errorf("crlf=%v: got\n%s\nwant\n%s", crlf, got, want)
				}
				if !undoable(script) {
					continue // not recorded for undo
				}
				back, kept, err := revertOps(got, ops)
				if err != nil || len(kept) > 0 {
					t.Fatalf("crlf=%v: revert: %v (kept %v)", crlf, err, kept)
				}
				switch {
				case byValue:
					if !sameDocValue(t, dir, back, in) {
						t.Errorf("crlf=%v: reverted by value to\n%s\nwant the value of\n%s", crlf, back, in)
					}
				case !bytes.Equal(back, in):
					t.Errorf("crlf=%v: reverted to\n%q\nwant\n%q", crlf, back, in)
				}
			}
			if updating() {
				if err := os.WriteFile(file, a.format(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// undoable reports whether revertOps undoes every op of script: removals are not recorded,
// and what SetKeyIn adds is taken out by RemoveKeysIn (from the install's record of the
// table), not by revertOps.
func undoable(script []string) bool {
	for _, l := range script {
		if strings.HasPrefix(l, "remove") || strings.HasPrefix(l, "setkeyin ") {
			return false
		}
	}
	return true
}

// updating reports whether go test ran with -update (the flag agents_test.go defines for
// every golden of the package).
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

func toCRLF(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))
}

// sameDocValue compares two JSON or TOML texts by value.
func sameDocValue(t *testing.T, format string, a, b []byte) bool {
	t.Helper()
	if format == "toml" {
		return sameTOML(string(a), string(b))
	}
	da, err := ParseJSONDoc(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := ParseJSONDoc(b)
	if err != nil {
		t.Fatal(err)
	}
	va, _ := da.Get("")
	vb, _ := db.Get("")
	return sameValue(va, vb)
}

// editArchive is a txtar archive (comment, then "-- name --" sections), parsed here rather
// than adding golang.org/x/tools to the module.
type editArchive struct {
	comment []byte
	names   []string
	data    [][]byte
}

func parseEditArchive(data []byte) *editArchive {
	a := &editArchive{}
	cur := -1
	for len(data) > 0 {
		line, rest, found := bytes.Cut(data, []byte("\n"))
		if found {
			line = append(line, '\n')
		}
		data = rest
		if s := strings.TrimSuffix(string(line), "\n"); strings.HasPrefix(s, "-- ") && strings.HasSuffix(s, " --") && len(s) > 6 {
			a.names = append(a.names, strings.TrimSpace(s[3:len(s)-3]))
			a.data = append(a.data, nil)
			cur++
			continue
		}
		if cur < 0 {
			a.comment = append(a.comment, line...)
		} else {
			a.data[cur] = append(a.data[cur], line...)
		}
	}
	return a
}

func (a *editArchive) file(name string) []byte {
	for i, n := range a.names {
		if n == name {
			return a.data[i]
		}
	}
	return nil
}

func (a *editArchive) set(name string, data []byte) {
	for i, n := range a.names {
		if n == name {
			a.data[i] = data
			return
		}
	}
	a.names, a.data = append(a.names, name), append(a.data, data)
}

func (a *editArchive) format() []byte {
	var b bytes.Buffer
	b.Write(a.comment)
	for i, n := range a.names {
		fmt.Fprintf(&b, "-- %s --\n", n)
		b.Write(a.data[i])
	}
	return b.Bytes()
}

func TestJSONGet(t *testing.T) {
	t.Parallel()
	doc, err := ParseJSONDoc([]byte(`{
  // a comment
  "env": {"A": "1", /* block */ "B": [1, 2,],},
  "a/b": {"c~d": true},
}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ptr, want string
		ok        bool
	}{
		{"", `{"env":{"A":"1","B":[1,2]},"a/b":{"c~d":true}}`, true},
		{"/env", `{"A":"1","B":[1,2]}`, true},
		{"/env/B/1", `2`, true},
		{"/a~1b/c~0d", `true`, true},
		{"/env/C", ``, false},
		{"/env/B/2", ``, false},
	} {
		got, ok := doc.Get(tc.ptr)
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("Get(%q) = %s, %v; want %s, %v", tc.ptr, got, ok, tc.want, tc.ok)
		}
		if ok && !json.Valid(got) {
			t.Errorf("Get(%q) = %s: not standard JSON", tc.ptr, got)
		}
	}
}

func TestJSONSetOps(t *testing.T) {
	t.Parallel()
	doc, err := ParseJSONDoc([]byte("{\n  \"env\": {\n    \"A\": \"1\"\n  },\n  \"list\": [1]\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ptr, value string
		want       Op
	}{
		// A replaced value records what it was.
		{"/env/A", `"2"`, Op{Format: "json", Path: "/env/A", Old: json.RawMessage(`"1"`), New: json.RawMessage(`"2"`)}},
		// Missing parents: the op names the outermost one made, with all of it as New.
		{"/mcp/x/command", `"run"`, Op{Format: "json", Path: "/mcp", New: json.RawMessage(`{"x":{"command":"run"}}`)}},
		// "-" appends, and the op names the index it got.
		{"/list/-", `{"a": 1}`, Op{Format: "json", Path: "/list/1", New: json.RawMessage(`{"a":1}`)}},
		// "-" under a missing parent makes an array.
		{"/hooks/Stop/-", `"x"`, Op{Format: "json", Path: "/hooks", New: json.RawMessage(`{"Stop":["x"]}`)}},
		// A value that is already there changes nothing.
		{"/env/A", `"2"`, Op{Format: "json", Path: "/env/A", Old: json.RawMessage(`"2"`), New: json.RawMessage(`"2"`)}},
	} {
		before := doc.Bytes()
		op, err := doc.Set(tc.ptr, json.RawMessage(tc.value))
		if err != nil {
			t.Fatalf("Set(%s): %v", tc.ptr, err)
		}
		if op.Format != tc.want.Format || op.Path != tc.want.Path || string(op.Old) != string(tc.want.Old) || string(op.New) != string(tc.want.New) {
			t.Errorf("Set(%s, %s) = %+v (old %s new %s), want old %s new %s at %s", tc.ptr, tc.value, op, op.Old, op.New, tc.want.Old, tc.want.New, tc.want.Path)
		}
		if string(op.Old) == string(op.New) && !bytes.Equal(before, doc.Bytes()) {
			t.Errorf("Set(%s) of the value already there changed the bytes", tc.ptr)
		}
	}
	for _, tc := range []struct{ ptr, value, want string }{
		{"/env/A/deeper", `1`, `/env/A is a string`},
		{"/list/5", `1`, `past the end`},
		{"/list/0/x", `1`, `/list/0 is a number`},
		{"/env/B", `{"a":`, `not JSON`},
		{"env", `1`, `does not start with /`},
	} {
		before := doc.Bytes()
		if _, err := doc.Set(tc.ptr, json.RawMessage(tc.value)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Set(%s, %s): error %v, want one containing %q", tc.ptr, tc.value, err, tc.want)
		}
		if !bytes.Equal(before, doc.Bytes()) {
			t.Errorf("a failed Set(%s) changed the document", tc.ptr)
		}
	}
}

// TestJSONNoHTMLEscape: values come in as encoding/json writes them by default (\u003c,
// \u0026); the file gets the characters themselves, and non-ASCII stays as it is.
func TestJSONNoHTMLEscape(t *testing.T) {
	t.Parallel()
	value, err := json.Marshal(map[string]string{"url": "http://h/?a=1&b=<2>", "name": "café ☕"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(value, []byte(`\u0026`)) {
		t.Fatalf("encoding/json no longer escapes &: %s", value)
	}
	doc, err := ParseJSONDoc([]byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := doc.Set("/x", value); err != nil {
		t.Fatal(err)
	}
	if _, err := doc.Set("/literal", json.RawMessage(`"a\\u0026b"`)); err != nil { // an escaped backslash, then "u0026"
		t.Fatal(err)
	}
	want := "{\n  \"x\": {\n    \"name\": \"café ☕\",\n    \"url\": \"http://h/?a=1&b=<2>\"\n  },\n  \"literal\": \"a\\\\u0026b\"\n}"
	if got := string(doc.Bytes()); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestJSONParseError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in         string
		line, col  int
		wantInText string
	}{
		{"{\n  \"a\": 1,\n  \"b\": }\n", 3, 8, "invalid character '}'"},
		{"{\r\n  \"a\": 1\r\n  \"b\": 2\r\n}\r\n", 3, 3, "expecting ',' or '}'"},
		{"{\n  \"a\": 1\n", 3, 1, "unexpected EOF"},
		{"{\"a\": 1} x", 1, 10, "after top-level value"},
	} {
		_, err := ParseJSONDoc([]byte(tc.in))
		var pe *parseError
		if !errors.As(err, &pe) {
			t.Fatalf("ParseJSONDoc(%q): error %v, want a parseError", tc.in, err)
		}
		if pe.Line != tc.line || pe.Column != tc.col || !strings.Contains(pe.Msg, tc.wantInText) {
			t.Errorf("ParseJSONDoc(%q): line %d column %d %q; want line %d column %d, %q", tc.in, pe.Line, pe.Column, pe.Msg, tc.line, tc.col, tc.wantInText)
		}
		msg := err.Error()
		if !strings.Contains(msg, fmt.Sprintf("line %d, column %d", tc.line, tc.col)) || !strings.Contains(msg, "fix the file or move it away, then run install again") {
			t.Errorf("error %q does not say where and what to do", msg)
		}
	}
}

// TestJSONRemove cuts members out of hand-written files: the rest stays byte for byte.
func TestJSONRemove(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, ptr, want string
	}{
		{"middle", "{\n  \"a\": 1,\n  \"b\": 2,\n  \"c\": 3\n}", "/b", "{\n  \"a\": 1,\n  \"c\": 3\n}"},
		{"first", "{\n  \"a\": 1,\n  \"b\": 2\n}", "/a", "{\n  \"b\": 2\n}"},
		{"last", "{\n  \"a\": 1,\n  \"b\": 2\n}", "/b", "{\n  \"a\": 1\n}"},
		{"last with trailing comma", "{\n  \"a\": 1,\n  \"b\": 2,\n}", "/b", "{\n  \"a\": 1,\n}"},
		{"only", "{\n  \"a\": 1\n}", "/a", "{}"},
		{"inline first", `{"a": 1, "b": 2}`, "/a", `{"b": 2}`},
		{"inline last", `{"a": 1, "b": 2}`, "/b", `{"a": 1}`},
		{"comment above stays", "{\n  \"a\": 1,\n  // about b\n  \"b\": 2\n}", "/b", "{\n  \"a\": 1\n  // about b\n}"},
		{"comment after previous member stays", "{\n  \"a\": 1, // about a\n  \"b\": 2\n}", "/b", "{\n  \"a\": 1 // about a\n}"},
		{"line comment before closing on the same line", "{\n  \"a\": 1, // about a\n  \"b\": 2}", "/b", "{\n  \"a\": 1 // about a\n}"},
		{"array element", "[\n  1,\n  2,\n  3\n]", "/1", "[\n  1,\n  3\n]"},
		{"absent", `{"a": 1}`, "/zzz", `{"a": 1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := ParseJSONDoc([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := doc.Remove(tc.ptr); err != nil {
				t.Fatal(err)
			}
			if got := string(doc.Bytes()); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestJSONFileEdges: a byte order mark, and a last line that is a // comment with no line
// end (hujson needs one), survive an edit and its undo.
func TestJSONFileEdges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"bom", "\ufeff{\n  \"a\": 1\n}\n", "\ufeff{\n  \"a\": 1,\n  \"b\": true\n}\n"},
		{"last line comment", "{\n  \"a\": 1\n} // end", "{\n  \"a\": 1,\n  \"b\": true\n} // end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := ParseJSONDoc([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			op, err := doc.Set("/b", json.RawMessage(`true`))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(doc.Bytes()); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			back, _, err := revertOps(doc.Bytes(), []Op{op})
			if err != nil || string(back) != tc.in {
				t.Errorf("undo: %q, %v", back, err)
			}
		})
	}
}
