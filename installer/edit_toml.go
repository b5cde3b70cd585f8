package installer

// Surgical line edits of TOML files (DESIGN.md §8; go-spikes.md §6). go-toml's unstable parser
// gives the byte offsets of every top-level expression; an edit splices whole lines (a key's
// value, a table's lines) and every other byte stays. Decoding and encoding the whole
// document would lose comments, quoting and order, so it is only used to check a file.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// TOMLDoc is one TOML file being edited.
type TOMLDoc struct {
	bom   []byte
	b     []byte
	nl    string // the file's line end
	exprs []tomlExpr
	data  map[string]any // the decoded document, for reading values
}

// tomlExpr is one top-level expression: a [table] or [[array table]] header, or a key/value
// line.
type tomlExpr struct {
	kind  unstable.Kind // unstable.Table, unstable.ArrayTable or unstable.KeyValue
	table []string      // KeyValue: the table it sits in (nil at the top level)
	key   []string      // the header's key, or the key/value's (dotted) key
	line  int           // offset of the start of its first line
	end   int           // offset after its last byte (the value, or the header's bracket)
	value int           // KeyValue: offset of the value
}

// ParseTOMLDoc parses a TOML document. A syntax or semantic error (a duplicate key, say) is
// a *parseError naming the line and column.
func ParseTOMLDoc(b []byte) (*TOMLDoc, error) {
	d := &TOMLDoc{}
	if bytes.HasPrefix(b, utf8BOM) {
		d.bom, b = utf8BOM, b[len(utf8BOM):]
	}
	if err := d.load(slices.Clone(b)); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, &parseError{Line: row, Column: col, Msg: strings.TrimPrefix(de.Error(), "toml: ")}
		}
		return nil, &parseError{Line: 1, Column: 1, Msg: err.Error()}
	}
	return d, nil
}

// load checks b and indexes its expressions.
func (d *TOMLDoc) load(b []byte) error {
	var data map[string]any
	if err := toml.Unmarshal(b, &data); err != nil {
		return err
	}
	var exprs []tomlExpr
	var table []string
	p := unstable.Parser{}
	p.Reset(b)
	for p.NextExpression() {
		n := p.Expression()
		e := tomlExpr{kind: n.Kind}
		var last unstable.Range
		switch n.Kind {
		case unstable.Table, unstable.ArrayTable:
			e.key, e.line, last = readKey(b, n)
			e.end = int(last.Offset + last.Length)
			for brackets := 0; e.end < len(b) && brackets < 1+btoi(n.Kind == unstable.ArrayTable); e.end++ {
				if b[e.end] == ']' {
					brackets++
				}
			}
			table = e.key
		case unstable.KeyValue:
			e.key, e.line, last = readKey(b, n)
			e.table, e.end = table, int(n.Raw.Offset+n.Raw.Length)
			e.value = int(last.Offset+last.Length) + bytes.IndexByte(b[last.Offset+last.Length:], '=') + 1
			for e.value < e.end && (b[e.value] == ' ' || b[e.value] == '\t') {
				e.value++
			}
		default:
			continue
		}
		exprs = append(exprs, e)
	}
	if err := p.Error(); err != nil {
		return err // toml.Unmarshal above catches these first
	}
	d.b, d.nl, d.exprs, d.data = b, lineEnd(b), exprs, data
	return nil
}

// readKey reads the key of the table header or key/value n in b: its parts, the start of
// its line, and the range of its last part.
func readKey(b []byte, n *unstable.Node) (key []string, line int, last unstable.Range) {
	it := n.Key()
	for it.Next() {
		k := it.Node()
		if key == nil {
			line = lineStart(b, int(k.Raw.Offset))
		}
		key, last = append(key, string(k.Data)), k.Raw
	}
	return key, line, last
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

// Bytes returns the document as it stands.
func (d *TOMLDoc) Bytes() []byte {
	return append(slices.Clone(d.bom), d.b...)
}

// Key returns the value of the top-level key as JSON (strings, numbers, booleans, arrays,
// tables as objects; dates as RFC 3339 strings); false when it is absent.
func (d *TOMLDoc) Key(key string) (json.RawMessage, bool) {
	v, ok := d.data[key]
	if !ok {
		return nil, false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil, false // a NaN or infinite float has no JSON form
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), true
}

// SetKey sets a top-level key to value (JSON: a string, number, boolean, or an array or
// object of those, written as a TOML basic string, number, boolean, array or inline
// table). An existing `key = …` keeps its line, spacing and trailing comment; only the value
// text changes. A new key goes on a line of its own after the last top-level key; with no
// top-level keys, right before the first table header and the comment lines directly above
// it (after them when they open the file); in a file with no tables, at the end.
func (d *TOMLDoc) SetKey(key string, value json.RawMessage) (Op, error) {
	val, lit, err := tomlValue(key, value)
	if err != nil {
		return Op{}, err
	}
	old, had := d.Key(key)
	op := Op{Format: "toml", Path: key, Old: old, New: val}
	if i := d.topKey(key); i >= 0 {
		if sameValue(old, val) {
			return op, nil
		}
		e := d.exprs[i]
		return op, d.apply(fmt.Sprintf("set %s", key), []textSplice{{e.value, e.end, lit}})
	}
	if had {
		return Op{}, fmt.Errorf("set %s: %s is defined as a table or dotted keys, not as `%s = …`; change it by hand", key, key, key)
	}
	op.Old = nil
	line := tomlKey(key) + " = " + lit
	p, text := len(d.b), line+d.nl
	lastKV, firstHeader := -1, -1
	for i, e := range d.exprs {
		if e.kind == unstable.KeyValue && e.table == nil {
			lastKV = i
		}
		if e.kind != unstable.KeyValue && firstHeader < 0 {
			firstHeader = i
		}
	}
	switch {
	case lastKV >= 0:
		p = lineEndAfter(d.b, d.exprs[lastKV].end)
	case firstHeader >= 0:
		h := d.exprs[firstHeader].line
		p = h
		for p > 0 {
			s := lineStart(d.b, p-1)
			if !isTOMLComment(d.b[s:p]) {
				break
			}
			p = s
		}
		if p == 0 {
			p = h // the comments open the file: keep them first
		}
	}
	if p == len(d.b) && p > 0 && d.b[p-1] != '\n' {
		text = d.nl + line // the last line had no line end; neither does ours
	}
	return op, d.apply(fmt.Sprintf("set %s", key), []textSplice{{p, p, text}})
}

// RemoveKey deletes the line of a top-level `key = …`, so that removing a key SetKey added
// gives back the bytes from before. An absent key is not an error (the Op has no Old).
func (d *TOMLDoc) RemoveKey(key string) (Op, error) {
	op := Op{Format: "toml", Path: key}
	i := d.topKey(key)
	if i < 0 {
		if _, had := d.Key(key); had {
			return Op{}, fmt.Errorf("remove %s: %s is defined as a table or dotted keys; remove it by hand", key, key)
		}
		return op, nil
	}
	op.Old, _ = d.Key(key)
	e := d.exprs[i]
	s, t := e.line, lineEndAfter(d.b, e.end)
	if t == len(d.b) && d.b[t-1] != '\n' && s > 0 {
		s -= lineBreakBefore(d.b, s) // the last line: drop the line end before it instead
	}
	return op, d.apply(fmt.Sprintf("remove %s", key), []textSplice{{s, t, ""}})
}

// Table returns the text of the table with the given header ("[a.b]"): from its header line
// to the next header that is not one of its sub-tables, less the blank and comment lines
// directly above that next header (they belong to it) or at the end of the file.
func (d *TOMLDoc) Table(header string) (string, bool) {
	parts, err := parseTOMLHeader(header)
	if err != nil {
		return "", false
	}
	s, e, ok := d.span(parts)
	if !ok {
		return "", false
	}
	return string(d.b[s:e]), true
}

// SetTable replaces the table's text (see Table) with text, or appends it at the end of the
// file after a blank line. text is the whole table, header line included (the header is
// added when text does not start with it); its line ends become the file's. SetTable
// refuses a table that is also defined some other way (`[a]` with `b = {…}`, dotted keys
// `a.b.c = …`, an array of tables, sub-tables without the header), because adding ours would
// define it twice; and an edit that would leave the file invalid.
func (d *TOMLDoc) SetTable(header, text string) (Op, error) {
	parts, err := parseTOMLHeader(header)
	if err != nil {
		return Op{}, err
	}
	if err := d.definedElsewhere(header, parts); err != nil {
		return Op{}, err
	}
	text, err = d.tableText(header, parts, text)
	if err != nil {
		return Op{}, err
	}
	op := Op{Format: "toml", Path: header}
	s, e, ok := d.span(parts)
	if ok {
		old := string(d.b[s:e])
		op.Old = quoteJSON(old)
		if e == len(d.b) && !strings.HasSuffix(old, "\n") {
			text = strings.TrimSuffix(text, d.nl)
		}
		op.New = quoteJSON(text)
		if old == text {
			return op, nil
		}
		return op, d.apply("set "+header, []textSplice{{s, e, text}})
	}
	switch {
	case len(d.b) == 0:
	case d.b[len(d.b)-1] == '\n':
		text = d.nl + text
	default:
		text = d.nl + d.nl + strings.TrimSuffix(text, d.nl)
	}
	op.New = quoteJSON(strings.TrimLeft(text, "\r\n"))
	return op, d.apply("set "+header, []textSplice{{len(d.b), len(d.b), text}})
}

// RemoveTable cuts the table's text (see Table) and one blank line it leaves doubled (or
// the blank line and line end SetTable added before it at the end of the file), so that
// removing a table SetTable added gives back the bytes from before. An absent table is not
// an error.
func (d *TOMLDoc) RemoveTable(header string) (Op, error) {
	parts, err := parseTOMLHeader(header)
	if err != nil {
		return Op{}, err
	}
	op := Op{Format: "toml", Path: header}
	s, e, ok := d.span(parts)
	if !ok {
		return op, nil
	}
	op.Old = quoteJSON(string(d.b[s:e]))
	if n := blankLineBefore(d.b, s); n > 0 && (e == len(d.b) || isBlankLineAt(d.b, e)) {
		s -= n
		if e == len(d.b) && d.b[e-1] != '\n' && s > 0 {
			s -= lineBreakBefore(d.b, s) // the file had no line end at its end
		}
	}
	return op, d.apply("remove "+header, []textSplice{{s, e, ""}})
}

// span finds the table with key parts: its header line's start and where its text ends.
func (d *TOMLDoc) span(parts []string) (start, end int, ok bool) {
	i := slices.IndexFunc(d.exprs, func(e tomlExpr) bool { return e.kind == unstable.Table && slices.Equal(e.key, parts) })
	if i < 0 {
		return 0, 0, false
	}
	j := i + 1
	for j < len(d.exprs) && (d.exprs[j].kind == unstable.KeyValue || isSubKey(d.exprs[j].key, parts)) {
		j++
	}
	end = len(d.b)
	if j < len(d.exprs) {
		end = d.exprs[j].line
	}
	lastEnd := lineEndAfter(d.b, d.exprs[j-1].end)
	for end > lastEnd {
		s := lineStart(d.b, end-1)
		if s < lastEnd || !(isTOMLComment(d.b[s:end]) || isBlank(d.b[s:end])) {
			break
		}
		end = s
	}
	return d.exprs[i].line, end, true
}

// definedElsewhere reports a definition of the table other than its own header: adding the
// header then would define it twice.
func (d *TOMLDoc) definedElsewhere(header string, parts []string) error {
	hasHeader := false
	for _, e := range d.exprs {
		line := bytes.Count(d.b[:e.line], []byte("\n")) + 1
		switch e.kind {
		case unstable.KeyValue:
			full := slices.Concat(e.table, e.key)
			if isPrefix(parts, full) && !isPrefix(parts, e.table) {
				return fmt.Errorf("%s is already defined by %s on line %d (an inline table or dotted keys): change it by hand", header, strings.Join(full, "."), line)
			}
			if len(full) < len(parts) && isPrefix(full, parts) {
				return fmt.Errorf("%s cannot be added: %s on line %d is a value, not a table; change it by hand", header, strings.Join(full, "."), line)
			}
		case unstable.ArrayTable:
			if isPrefix(e.key, parts) {
				return fmt.Errorf("%s cannot be added: [[%s]] on line %d is an array of tables; change it by hand", header, strings.Join(e.key, "."), line)
			}
		case unstable.Table:
			hasHeader = hasHeader || slices.Equal(e.key, parts)
		}
	}
	if !hasHeader {
		for _, e := range d.exprs {
			if e.kind != unstable.KeyValue && isSubKey(e.key, parts) {
				return fmt.Errorf("%s cannot be added: its sub-table [%s] exists without it; change it by hand", header, strings.Join(e.key, "."))
			}
		}
	}
	return nil
}

// tableText is text with the header line first, the file's line ends, one line end at the
// end and no blank lines after it.
func (d *TOMLDoc) tableText(header string, parts []string, text string) (string, error) {
	text = strings.TrimRight(strings.ReplaceAll(text, "\r\n", "\n"), " \t\n") + "\n"
	var p unstable.Parser
	p.Reset([]byte(text))
	if !p.NextExpression() || p.Expression().Kind != unstable.Table || !sameKey(p.Expression(), parts) {
		text = header + "\n" + text
	}
	var check map[string]any
	if err := toml.Unmarshal([]byte(text), &check); err != nil {
		return "", fmt.Errorf("set %s: the table's text is not TOML: %w", header, err)
	}
	return strings.ReplaceAll(text, "\n", d.nl), nil
}

func sameKey(n *unstable.Node, parts []string) bool {
	var key []string
	it := n.Key()
	for it.Next() {
		key = append(key, string(it.Node().Data))
	}
	return slices.Equal(key, parts)
}

// apply makes the splices, checks the result and indexes it again; on error d is unchanged.
func (d *TOMLDoc) apply(what string, ss []textSplice) error {
	nb := spliceBytes(d.b, ss)
	if err := d.load(nb); err != nil {
		return fmt.Errorf("%s: the edit would leave the file invalid (%v); change it by hand", what, err)
	}
	return nil
}

// topKey is the index of the top-level `key = …` expression, or -1.
func (d *TOMLDoc) topKey(key string) int {
	return slices.IndexFunc(d.exprs, func(e tomlExpr) bool {
		return e.kind == unstable.KeyValue && e.table == nil && len(e.key) == 1 && e.key[0] == key
	})
}

// parseTOMLHeader reads "[a.\"b c\"]" into its key parts.
func parseTOMLHeader(header string) ([]string, error) {
	var p unstable.Parser
	p.Reset([]byte(header + "\n"))
	if !p.NextExpression() || p.Expression().Kind != unstable.Table {
		return nil, fmt.Errorf("%q is not a TOML table header like [a.b]", header)
	}
	var parts []string
	it := p.Expression().Key()
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	if p.NextExpression() {
		return nil, fmt.Errorf("%q is not a TOML table header like [a.b]", header)
	}
	return parts, nil
}

// isPrefix reports whether p is a prefix of key (or equal to it).
func isPrefix(p, key []string) bool {
	return len(key) >= len(p) && slices.Equal(key[:len(p)], p)
}

// isSubKey reports whether key is strictly under p.
func isSubKey(key, p []string) bool { return len(key) > len(p) && isPrefix(p, key) }

func isTOMLComment(line []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(line, " \t"), []byte("#"))
}

// lineStart is the offset of the start of the line holding offset p.
func lineStart(b []byte, p int) int { return bytes.LastIndexByte(b[:p], '\n') + 1 }

// lineEndAfter is the offset after the line end that follows p (len(b) on the last line).
func lineEndAfter(b []byte, p int) int {
	if i := bytes.IndexByte(b[p:], '\n'); i >= 0 {
		return p + i + 1
	}
	return len(b)
}

// lineBreakBefore is the length of the line end that ends right at s (2 for "\r\n").
func lineBreakBefore(b []byte, s int) int {
	switch {
	case s >= 2 && b[s-2] == '\r' && b[s-1] == '\n':
		return 2
	case s >= 1 && b[s-1] == '\n':
		return 1
	}
	return 0
}

// blankLineBefore is the length of the blank line (its spaces and line end) that ends right
// at s, or 0 when the line before s is not blank.
func blankLineBefore(b []byte, s int) int {
	n := lineBreakBefore(b, s)
	if n == 0 {
		return 0
	}
	ls := lineStart(b, s-n)
	if !isBlankInline(b[ls : s-n]) {
		return 0
	}
	return s - ls
}

// isBlankLineAt reports whether the line starting at s is blank.
func isBlankLineAt(b []byte, s int) bool {
	e := lineEndAfter(b, s)
	return e > s && isBlank(b[s:e])
}

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// tomlKey writes a key bare when it can be, else as a basic string.
func tomlKey(k string) string {
	if bareKey.MatchString(k) {
		return k
	}
	return TOMLString(k)
}

// TOMLString writes s as a TOML basic string (TOML 1.0 §String): `"` and `\` escaped,
// \n, \r and \t as such, other control characters as \uXXXX. The result is also a valid
// JSON string, so it may be given to SetKey and SetKeyIn as their value.
func TOMLString(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			sb.WriteString(`\"`)
		case r == '\\':
			sb.WriteString(`\\`)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&sb, `\u%04X`, r)
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

// tomlValue returns value compacted (the Op's New) and written as a TOML value, for setting
// path; an error says which path it was for.
func tomlValue(path string, value json.RawMessage) ([]byte, string, error) {
	val, err := normalizeJSON(value)
	if err != nil {
		return nil, "", fmt.Errorf("set %s: %w", path, err)
	}
	lit, err := tomlLiteral(val)
	if err != nil {
		return nil, "", fmt.Errorf("set %s: %w", path, err)
	}
	return val, lit, nil
}

// tomlLiteral writes a JSON value as a TOML value, keeping an object's key order.
func tomlLiteral(val []byte) (string, error) {
	val = bytes.TrimSpace(val)
	if len(val) == 0 {
		return "", errors.New("empty value")
	}
	switch val[0] {
	case '"':
		var s string
		if err := json.Unmarshal(val, &s); err != nil {
			return "", err
		}
		return TOMLString(s), nil
	case 't', 'f':
		return string(val), nil
	case 'n':
		return "", errors.New("null has no TOML form")
	case '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(val, &elems); err != nil {
			return "", err
		}
		out := make([]string, len(elems))
		for i, e := range elems {
			s, err := tomlLiteral(e)
			if err != nil {
				return "", err
			}
			out[i] = s
		}
		return "[" + strings.Join(out, ", ") + "]", nil
	case '{':
		dec := json.NewDecoder(bytes.NewReader(val))
		if _, err := dec.Token(); err != nil {
			return "", err
		}
		var out []string
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return "", err
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return "", err
			}
			s, err := tomlLiteral(v)
			if err != nil {
				return "", err
			}
			out = append(out, tomlKey(k.(string))+" = "+s)
		}
		if len(out) == 0 {
			return "{}", nil
		}
		return "{ " + strings.Join(out, ", ") + " }", nil
	default:
		return string(val), nil // a JSON number is a TOML number
	}
}
