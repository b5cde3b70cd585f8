package installer

// Text-level edits of JSON and JSONC files (DESIGN.md §8; go-spikes.md §6). The syntax tree
// from hujson gives byte offsets; every edit splices the file's bytes at those offsets and
// parses again, so whatever an edit does not touch (comments, spacing, key order, trailing
// commas, CRLF) stays byte for byte. hujson's Format is never called.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tailscale/hujson"
)

// JSONDoc is one JSON or JSONC file being edited.
type JSONDoc struct {
	bom  []byte // a UTF-8 byte order mark kept aside, so offsets start at the first value
	eol  bool   // a line end was added for parsing (the file ends in a // comment) and is dropped again
	b    []byte
	root hujson.Value
	nl   string // the file's line end: "\r\n" when its first line ends so, else "\n"
	unit string // one level of indentation, guessed from the file
}

// parseError is a file that does not parse: where, and what went wrong.
type parseError struct {
	Line, Column int
	Msg          string
}

func (e *parseError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s; fix the file or move it away, then run install again",
		e.Line, e.Column, e.Msg)
}

var hujsonPos = regexp.MustCompile(`^hujson: line (\d+), column (\d+): `)

var utf8BOM = []byte("\ufeff")

// ParseJSONDoc parses JSON or JSONC (comments, trailing commas). Empty input reads as an
// empty object. A syntax error is a *parseError naming the line and column (1-based,
// columns in bytes).
func ParseJSONDoc(b []byte) (*JSONDoc, error) {
	d := &JSONDoc{}
	if bytes.HasPrefix(b, utf8BOM) {
		d.bom, b = utf8BOM, b[len(utf8BOM):]
	}
	d.nl = lineEnd(b)
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}" + d.nl)
	}
	root, err := hujson.Parse(slices.Clone(b))
	if err != nil && !bytes.HasSuffix(b, []byte("\n")) {
		// hujson wants a line end after a // comment, even the file's last line.
		if r, err2 := hujson.Parse(append(slices.Clone(b), '\n')); err2 == nil {
			root, err, d.eol = r, nil, true
		}
	}
	if err != nil {
		pe := &parseError{Line: 1, Column: 1, Msg: err.Error()}
		if m := hujsonPos.FindStringSubmatch(err.Error()); m != nil {
			pe.Line, _ = strconv.Atoi(m[1])
			pe.Column, _ = strconv.Atoi(m[2])
			pe.Msg = err.Error()[len(m[0]):]
		}
		return nil, pe
	}
	d.b, d.root = root.Pack(), root // Pack gives back b: nothing was changed yet
	d.unit = d.guessUnit()
	return d, nil
}

// Bytes returns the document as it stands.
func (d *JSONDoc) Bytes() []byte {
	b := d.b
	if d.eol {
		b = bytes.TrimSuffix(b, []byte("\n"))
	}
	return append(slices.Clone(d.bom), b...)
}

// Get returns the value at the RFC 6901 pointer ptr as compact standard JSON (comments and
// trailing commas dropped); false when it is absent.
func (d *JSONDoc) Get(ptr string) (json.RawMessage, bool) {
	v := d.root.Find(ptr)
	if v == nil {
		return nil, false
	}
	return standard(v), true
}

func standard(v *hujson.Value) json.RawMessage {
	c := v.Clone()
	c.BeforeExtra, c.AfterExtra = nil, nil
	c.Minimize()
	return c.Pack()
}

// Set puts value at ptr and returns the Op it made. An existing value is replaced where it
// stands; a missing member is added after its last sibling, on its own line with the
// siblings' indentation when they are one per line (inline otherwise); missing parent
// objects are made, and the Op then names the outermost one made (Old nil, New the whole
// new member). In an array, "-" or the length as the last token appends; a "-" under a
// missing parent makes that parent an array of the one value. Set leaves the
// bytes alone when the value is already there (Op.Old equals Op.New).
func (d *JSONDoc) Set(ptr string, value json.RawMessage) (Op, error) {
	parts, err := splitPointer(ptr)
	if err != nil {
		return Op{}, err
	}
	val, err := normalizeJSON(value)
	if err != nil {
		return Op{}, fmt.Errorf("set %s: %w", ptr, err)
	}
	if v := d.root.Find(ptr); v != nil {
		old := standard(v)
		op := Op{Format: "json", Path: ptr, Old: old, New: val}
		if sameValue(old, val) {
			return op, nil
		}
		return op, d.replace(parts, v, val)
	}
	// The deepest ancestor that exists; the root always does.
	k := len(parts) - 1
	for ; k > 0; k-- {
		if d.root.Find(joinPointer(parts[:k])) != nil {
			break
		}
	}
	anc := d.root.Find(joinPointer(parts[:k]))
	for j := len(parts) - 1; j > k; j-- {
		if parts[j] == "-" { // a missing array to append to: made with the one element
			val = slices.Concat([]byte("["), val, []byte("]"))
			continue
		}
		val = slices.Concat([]byte("{"), quoteJSON(parts[j]), []byte(":"), val, []byte("}"))
	}
	switch c := anc.Value.(type) {
	case *hujson.Object:
		if err := d.insert(anc, d.ownLine(parts[:k]), quoteJSON(parts[k]), val); err != nil {
			return Op{}, fmt.Errorf("set %s: %w", ptr, err)
		}
		return Op{Format: "json", Path: joinPointer(parts[:k+1]), New: val}, nil
	case *hujson.Array:
		n := len(c.Elements)
		if parts[k] != "-" && parts[k] != strconv.Itoa(n) {
			return Op{}, fmt.Errorf("set %s: index %s is past the end of %s (length %d)", ptr, parts[k], joinPointer(parts[:k]), n)
		}
		if err := d.insert(anc, d.ownLine(parts[:k]), nil, val); err != nil {
			return Op{}, fmt.Errorf("set %s: %w", ptr, err)
		}
		return Op{Format: "json", Path: joinPointer(append(slices.Clone(parts[:k]), strconv.Itoa(n))), New: val}, nil
	default:
		return Op{}, fmt.Errorf("set %s: %s is %s, not an object", ptr, orRoot(joinPointer(parts[:k])), kindName(anc.Value.Kind()))
	}
}

// Remove deletes the member or element at ptr together with its comma and the line break and
// indentation before it, so that removing what Set just added gives back the bytes from
// before. Removing the only member of an object whose insides are blank leaves "{}". An
// absent ptr is not an error: the Op then has neither Old nor New.
func (d *JSONDoc) Remove(ptr string) (Op, error) {
	parts, err := splitPointer(ptr)
	if err != nil {
		return Op{}, err
	}
	if len(parts) == 0 {
		return Op{}, errors.New("remove: cannot remove the whole document")
	}
	op := Op{Format: "json", Path: ptr}
	v := d.root.Find(ptr)
	if v == nil {
		return op, nil
	}
	op.Old = standard(v)
	parent := d.root.Find(joinPointer(parts[:len(parts)-1]))
	items := itemsOf(parent)
	i := slices.IndexFunc(items, func(it jsonItem) bool { return it.tail == v })
	if i < 0 {
		return Op{}, fmt.Errorf("remove %s: not found in its parent", ptr)
	}
	return op, d.apply(d.removeItem(parent, items, i))
}

// jsonItem is one member of an object (head is the name, tail the value) or one element of an
// array (both the element).
type jsonItem struct{ head, tail *hujson.Value }

func itemsOf(v *hujson.Value) []jsonItem {
	switch c := v.Value.(type) {
	case *hujson.Object:
		items := make([]jsonItem, len(c.Members))
		for i := range c.Members {
			items[i] = jsonItem{&c.Members[i].Name, &c.Members[i].Value}
		}
		return items
	case *hujson.Array:
		items := make([]jsonItem, len(c.Elements))
		for i := range c.Elements {
			items[i] = jsonItem{&c.Elements[i], &c.Elements[i]}
		}
		return items
	}
	return nil
}

// textSplice replaces b[from:to] with text.
type textSplice struct {
	from, to int
	text     string
}

// apply makes the splices (which must not overlap; two insertions at one offset land in list
// order) and parses the result again.
func (d *JSONDoc) apply(ss []textSplice) error {
	nb := spliceBytes(d.b, ss)
	root, err := hujson.Parse(slices.Clone(nb))
	if err != nil {
		return fmt.Errorf("edit made the file unparsable (a bug): %w", err)
	}
	d.b, d.root = nb, root
	return nil
}

func spliceBytes(b []byte, ss []textSplice) []byte {
	order := make([]int, len(ss))
	for i := range order {
		order[i] = i
	}
	// From the end backwards; at one offset the later textSplice goes in first, so it ends up
	// after the earlier one.
	slices.SortFunc(order, func(i, j int) int {
		if ss[i].from != ss[j].from {
			return ss[j].from - ss[i].from
		}
		return j - i
	})
	nb := slices.Clone(b)
	for _, i := range order {
		s := ss[i]
		nb = slices.Concat(nb[:s.from], []byte(s.text), nb[s.to:])
	}
	return nb
}

// commaAfter is the offset of the comma after an item.
func commaAfter(it jsonItem) int { return it.tail.EndOffset + len(it.tail.AfterExtra) }

// insert adds one item (name nil for an array) after the last one of composite c. ownLine
// says whether c sits on a line of its own (then an empty c opens up, one item a line).
func (d *JSONDoc) insert(c *hujson.Value, ownLine bool, name []byte, val []byte) error {
	open, closing := c.StartOffset, c.EndOffset-1
	items := itemsOf(c)
	_, isObject := c.Value.(*hujson.Object)
	memberText := func(sep string, multi bool, ind string) string {
		v := d.format(val, multi, ind)
		if name == nil {
			return v
		}
		return string(name) + sep + v
	}
	if len(items) == 0 {
		inner := d.b[open+1 : closing]
		li := lineIndent(d.b, open)
		if isBlankInline(inner) && (!ownLine || !isObject && !isComposite(val)) {
			return d.apply([]textSplice{{open + 1, closing, memberText(": ", false, "")}})
		}
		ind := li + d.unit
		m := memberText(": ", true, ind)
		if isBlankInline(inner) {
			return d.apply([]textSplice{{open + 1, closing, d.nl + ind + m + d.nl + li}})
		}
		p := lastNewline(d.b, open+1, closing)
		if p < 0 {
			p = closing
		}
		return d.apply([]textSplice{{p, p, d.nl + ind + m}})
	}
	last := items[len(items)-1]
	trailing := last.tail.AfterExtra != nil
	sep := ": "
	if isObject {
		sep = kvSep(last)
	}
	if before := last.head.BeforeExtra; bytes.ContainsRune(before, '\n') {
		ind := indentAfterNewline(before)
		m := memberText(sep, true, ind)
		if trailing {
			comma := commaAfter(last)
			p := lastNewline(d.b, comma+1, closing)
			if p < 0 {
				p = closing
			}
			return d.apply([]textSplice{{p, p, d.nl + ind + m + ","}})
		}
		p := lastNewline(d.b, last.tail.EndOffset, closing)
		if p < 0 {
			p = closing
		}
		end := last.tail.EndOffset
		return d.apply([]textSplice{{end, end, ","}, {p, p, d.nl + ind + m}})
	}
	gap := " "
	if b := last.head.BeforeExtra; len(items) > 1 && isBlankInline(b) && len(b) > 0 {
		gap = string(b)
	}
	m := memberText(sep, false, "")
	if trailing {
		comma := commaAfter(last)
		return d.apply([]textSplice{{comma + 1, comma + 1, gap + m + ","}})
	}
	end := last.tail.EndOffset
	return d.apply([]textSplice{{end, end, "," + gap + m}})
}

// removeItem returns the splices that cut item i out of composite c.
func (d *JSONDoc) removeItem(c *hujson.Value, items []jsonItem, i int) []textSplice {
	open, closing := c.StartOffset, c.EndOffset-1
	n, it := len(items), items[i]
	trailing := items[n-1].tail.AfterExtra != nil
	if n == 1 && isBlank(it.head.BeforeExtra) && isBlank(it.tail.AfterExtra) && isBlank(d.b[commaOrEnd(it, trailing):closing]) {
		return []textSplice{{open + 1, closing, ""}}
	}
	before := it.head.BeforeExtra
	ws := wsTail(before)
	start := it.head.StartOffset - len(ws)
	var end int
	var ss []textSplice
	if i < n-1 || trailing {
		end = commaAfter(it) + 1
		if len(ws) == 0 {
			for end < closing && (d.b[end] == ' ' || d.b[end] == '\t') {
				end++
			}
		}
	} else {
		end = it.tail.EndOffset
		if i > 0 {
			c := commaAfter(items[i-1])
			ss = append(ss, textSplice{c, c + 1, ""})
		}
	}
	// Cutting the line break that ends a // comment would comment out what follows.
	if endsInLineComment(before[:len(before)-len(ws)]) && !startsWithNewline(d.b[end:]) {
		start += bytes.IndexByte(ws, '\n') + 1
	}
	return append(ss, textSplice{start, end, ""})
}

func commaOrEnd(it jsonItem, trailing bool) int {
	if trailing {
		return commaAfter(it) + 1
	}
	return it.tail.EndOffset
}

// replace puts val where v stands.
func (d *JSONDoc) replace(parts []string, v *hujson.Value, val []byte) error {
	multi := bytes.ContainsRune(d.b[v.StartOffset:v.EndOffset], '\n')
	if !multi && !isComposite(standard(v)) {
		multi = d.ownLine(parts) // a scalar becoming an object: pretty where it has room
	}
	text := d.format(val, multi, lineIndent(d.b, v.StartOffset))
	return d.apply([]textSplice{{v.StartOffset, v.EndOffset, text}})
}

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
