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
	"regexp"
	"slices"
	"strconv"

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
