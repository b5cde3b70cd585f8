package installer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/tailscale/hujson"
)

// ownLine reports whether the value at parts starts a line of its own: the document, or a
// member or element whose line holds nothing before it.
func (d *JSONDoc) ownLine(parts []string) bool {
	if len(parts) == 0 {
		return true
	}
	v := d.root.Find(joinPointer(parts))
	for _, it := range itemsOf(d.root.Find(joinPointer(parts[:len(parts)-1]))) {
		if it.tail == v {
			return bytes.ContainsRune(it.head.BeforeExtra, '\n')
		}
	}
	return false
}

// format writes val (compact JSON) for a place indented by ind: one item a line, indented
// by the file's unit, when multi; on one line with a space after each colon and comma
// otherwise.
func (d *JSONDoc) format(val []byte, multi bool, ind string) string {
	if !isComposite(val) {
		return string(val)
	}
	if !multi {
		return inlineJSON(val)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, val, ind, d.unit); err != nil {
		return string(val) // val came through normalizeJSON, so this does not happen
	}
	return strings.ReplaceAll(buf.String(), "\n", d.nl)
}

// guessUnit finds one level of indentation: the first multi-line object or array whose items
// are indented deeper than the line that opens it. Two spaces when the file has none.
func (d *JSONDoc) guessUnit() string {
	for v := range d.root.All() {
		items := itemsOf(v)
		if len(items) == 0 || !bytes.ContainsRune(items[0].head.BeforeExtra, '\n') {
			continue
		}
		outer, inner := lineIndent(d.b, v.StartOffset), indentAfterNewline(items[0].head.BeforeExtra)
		if len(inner) > len(outer) && strings.HasPrefix(inner, outer) {
			return inner[len(outer):]
		}
	}
	return "  "
}

// kvSep copies a sibling's style around the colon, none or one space on either side
// (spaces that align values in columns are not copied).
func kvSep(it jsonItem) string {
	a, b := it.head.AfterExtra, it.tail.BeforeExtra
	if !isBlankInline(a) || !isBlankInline(b) {
		return ": "
	}
	sep := ":"
	if len(a) > 0 {
		sep = " :"
	}
	if len(b) > 0 {
		sep += " "
	}
	return sep
}

// lineEnd is the line end of the first line: "\r\n" or "\n" (also for a file of one line).
func lineEnd(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i > 0 && b[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// lineIndent is the spaces and tabs that start the line holding offset p.
func lineIndent(b []byte, p int) string {
	s := bytes.LastIndexByte(b[:p], '\n') + 1
	e := s
	for e < len(b) && (b[e] == ' ' || b[e] == '\t') {
		e++
	}
	return string(b[s:e])
}

// indentAfterNewline is the spaces and tabs after the last line break of extra.
func indentAfterNewline(extra []byte) string {
	s := bytes.LastIndexByte(extra, '\n') + 1
	e := s
	for e < len(extra) && (extra[e] == ' ' || extra[e] == '\t') {
		e++
	}
	return string(extra[s:e])
}

// lastNewline is the offset of the last line end in b[from:to] (the '\r' of a "\r\n") that is
// not inside a block comment; -1 if there is none. b[from:to] holds only whitespace and
// comments.
func lastNewline(b []byte, from, to int) int {
	last := -1
	for i := from; i < to; i++ {
		switch {
		case b[i] == '/' && i+1 < to && b[i+1] == '*':
			e := bytes.Index(b[i+2:to], []byte("*/"))
			if e < 0 {
				return last
			}
			i += 2 + e + 1
		case b[i] == '/' && i+1 < to && b[i+1] == '/':
			for i+1 < to && b[i+1] != '\n' {
				i++
			}
		case b[i] == '\n':
			last = i
			if i > from && b[i-1] == '\r' {
				last = i - 1
			}
		}
	}
	return last
}

// wsTail is the run of whitespace that ends extra.
func wsTail(extra []byte) []byte {
	i := len(extra)
	for i > 0 && isSpace(extra[i-1]) {
		i--
	}
	return extra[i:]
}

// endsInLineComment reports whether extra (whitespace and comments) ends with a // comment.
func endsInLineComment(extra []byte) bool {
	line := extra[bytes.LastIndexByte(extra, '\n')+1:]
	in := false // inside a block comment on this line
	for i := 0; i+1 < len(line); i++ {
		switch {
		case !in && line[i] == '/' && line[i+1] == '/':
			return true
		case !in && line[i] == '/' && line[i+1] == '*':
			in, i = true, i+1
		case in && line[i] == '*' && line[i+1] == '/':
			in, i = false, i+1
		}
	}
	return false
}

func startsWithNewline(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r':
		case '\n':
			return true
		default:
			return false
		}
	}
	return true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func isBlank(b []byte) bool {
	for _, c := range b {
		if !isSpace(c) {
			return false
		}
	}
	return true
}

// isBlankInline is spaces and tabs only.
func isBlankInline(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' {
			return false
		}
	}
	return true
}

func isComposite(val []byte) bool {
	return len(val) > 0 && (val[0] == '{' || val[0] == '[')
}

func kindName(k hujson.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 'n':
		return "null"
	default:
		return "a boolean"
	}
}

func orRoot(ptr string) string {
	if ptr == "" {
		return "the document"
	}
	return ptr
}

// normalizeJSON checks value and returns it compact, with the \u003c, \u003e and \u0026
// that encoding/json writes by default turned back into <, > and &.
func normalizeJSON(value []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, value); err != nil {
		return nil, fmt.Errorf("value is not JSON: %w", err)
	}
	return unescapeHTML(buf.Bytes()), nil
}

func unescapeHTML(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u00`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch strings.ToLower(string(b[i+2 : i+6])) {
			case "003c":
				out, i = append(out, '<'), i+5
				continue
			case "003e":
				out, i = append(out, '>'), i+5
				continue
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			}
		}
		out, i = append(out, b[i], b[i+1]), i+1 // any other escape, kept whole
	}
	return out
}

// inlineJSON writes compact JSON with a space after each colon and comma.
func inlineJSON(val []byte) string {
	var sb strings.Builder
	inString := false
	for i := 0; i < len(val); i++ {
		c := val[i]
		sb.WriteByte(c)
		switch {
		case inString && c == '\\':
			i++
			sb.WriteByte(val[i])
		case c == '"':
			inString = !inString
		case !inString && (c == ',' || c == ':'):
			sb.WriteByte(' ')
		}
	}
	return sb.String()
}

// quoteJSON encodes s without HTML escaping.
func quoteJSON(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// sameValue compares two JSON texts by value (numbers as float64); invalid JSON equals
// nothing.
func sameValue(a, b []byte) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// splitPointer splits an RFC 6901 pointer into unescaped tokens ("" is the whole document).
func splitPointer(ptr string) ([]string, error) {
	if ptr == "" {
		return nil, nil
	}
	if ptr[0] != '/' {
		return nil, fmt.Errorf("json pointer %q does not start with /", ptr)
	}
	parts := strings.Split(ptr[1:], "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

func joinPointer(parts []string) string {
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteByte('/')
		sb.WriteString(strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1"))
	}
	return sb.String()
}
