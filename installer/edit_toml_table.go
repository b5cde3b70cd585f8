package installer

// Key edits inside a [table] of a TOML file (the keys app's on/off, dashboard settings and
// chained upstreams write). Like edit_toml.go they splice whole lines at go-toml parser
// positions; every other byte stays.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/pelletier/go-toml/v2/unstable"
)

// SetKeyIn sets `key = value` in the table [table] ("a.b", quoted parts allowed). value is
// JSON as for SetKey. An existing `key = …` line of the table keeps its indentation and its
// trailing comment and becomes `key = value` (the key bare when it may be, one space each
// side of "="); the same value in that form leaves the bytes unchanged. A missing key goes on a line of
// its own after the table's last key (right after the header when it has none). A missing
// table is appended at the end of the file after a blank line, with the key. An error (the
// table or key defined as an inline table or dotted keys, an edit that would leave the file
// invalid) leaves d unchanged.
func (d *TOMLDoc) SetKeyIn(table, key string, value json.RawMessage) (Op, error) {
	path := table + "." + key
	parts, err := parseTOMLHeader("[" + table + "]")
	if err != nil {
		return Op{}, err
	}
	val, lit, err := tomlValue(path, value)
	if err != nil {
		return Op{}, err
	}
	line := tomlKey(key) + " = " + lit
	op := Op{Format: "toml", Path: path, New: val}
	h := slices.IndexFunc(d.exprs, func(e tomlExpr) bool { return e.kind == unstable.Table && slices.Equal(e.key, parts) })
	if h < 0 {
		// A header after its sub-tables is valid TOML (unlike SetTable, no definedElsewhere);
		// an inline table or dotted keys of the same name make the edit invalid, which apply
		// refuses.
		text := "[" + table + "]" + d.nl + line + d.nl
		switch {
		case len(d.b) == 0:
		case d.b[len(d.b)-1] != '\n':
			text = d.nl + d.nl + text
		case !isBlankLineAt(d.b, lineStart(d.b, len(d.b)-1)):
			text = d.nl + text
		}
		return op, d.apply("set "+path, []textSplice{{len(d.b), len(d.b), text}})
	}
	last := lineEndAfter(d.b, d.exprs[h].end) // after the header's line, then the last key's
	for i := h + 1; i < len(d.exprs) && d.exprs[i].kind == unstable.KeyValue; i++ {
		e := d.exprs[i]
		last = lineEndAfter(d.b, e.end)
		if len(e.key) > 1 && e.key[0] == key {
			return Op{}, fmt.Errorf("set %s: %s is defined as dotted keys in [%s]; change it by hand", path, key, table)
		}
		if len(e.key) != 1 || e.key[0] != key {
			continue
		}
		op.Old = d.valueAt(e) // the line is rewritten even for the same value, as app's editor did
		body := bytes.TrimRight(d.b[e.line:lineEndAfter(d.b, e.end)], "\r\n")
		indent := body[:len(body)-len(bytes.TrimLeft(body, " \t"))]
		comment := ""
		if c := bytes.TrimSpace(d.b[e.end : e.line+len(body)]); len(c) > 0 {
			comment = " " + string(c)
		}
		return op, d.apply("set "+path, []textSplice{{e.line, e.line + len(body), string(indent) + line + comment}})
	}
	text := line + d.nl
	if last == len(d.b) && last > 0 && d.b[last-1] != '\n' {
		text = d.nl + line
	}
	return op, d.apply("set "+path, []textSplice{{last, last, text}})
}

// RemoveKeyIn deletes the line of `key = …` in the table [table]. With dropTable, a table
// left with no keys and nothing but blank lines loses its header and those lines too; with
// dropBlank also one blank line right before its header (the one SetKeyIn adds when it
// appends a table); with dropEOL, when the table ended the file, the line end before it (the
// one SetKeyIn adds to a last line without one). An absent key or table is not an error.
func (d *TOMLDoc) RemoveKeyIn(table, key string, dropTable, dropBlank, dropEOL bool) (Op, error) {
	path := table + "." + key
	parts, err := parseTOMLHeader("[" + table + "]")
	if err != nil {
		return Op{}, err
	}
	op := Op{Format: "toml", Path: path}
	h := slices.IndexFunc(d.exprs, func(e tomlExpr) bool { return e.kind == unstable.Table && slices.Equal(e.key, parts) })
	if h < 0 {
		if d.hasValue(append(slices.Clone(parts), key)) {
			return Op{}, fmt.Errorf("remove %s: it is defined as an inline table or dotted keys; remove it by hand", path)
		}
		return op, nil
	}
	var ss []textSplice
	left := 0
	j := h + 1
	for ; j < len(d.exprs) && d.exprs[j].kind == unstable.KeyValue; j++ {
		e := d.exprs[j]
		if len(e.key) == 1 && e.key[0] == key {
			op.Old = d.valueAt(e)
			ss = append(ss, textSplice{e.line, lineEndAfter(d.b, e.end), ""})
			continue
		}
		if e.key[0] == key {
			return Op{}, fmt.Errorf("remove %s: %s is defined as dotted keys in [%s]; remove it by hand", path, key, table)
		}
		left++
	}
	if len(ss) == 0 {
		return op, nil
	}
	end := len(d.b)
	if j < len(d.exprs) {
		end = d.exprs[j].line
	}
	if dropTable && left == 0 {
		ss = d.dropHeader(h, end, ss, dropBlank, dropEOL)
	}
	return op, d.apply("remove "+path, ss)
}

// dropHeader adds to ss, the removed key lines of the table whose header is expression h
// and whose text ends at end, the header line when nothing but blank lines is left (see
// RemoveKeyIn for dropBlank and dropEOL).
func (d *TOMLDoc) dropHeader(h, end int, ss []textSplice, dropBlank, dropEOL bool) []textSplice {
	s, body := d.exprs[h].line, lineEndAfter(d.b, d.exprs[h].end)
	var rest []byte // the table's lines after its header, less the removed keys
	for p, k := body, 0; p < end; k++ {
		if k < len(ss) {
			rest, p = append(rest, d.b[p:ss[k].from]...), ss[k].to
			continue
		}
		rest, p = append(rest, d.b[p:end]...), end
	}
	if !isBlank(rest) {
		return ss
	}
	head := textSplice{s, body, ""} // the header line; blank lines of the table stay
	if dropBlank && s > 0 {
		if p := lineStart(d.b, s-1); isBlank(d.b[p:s]) {
			head.from = p
		}
	}
	if n := head.from; dropEOL && end == len(d.b) && len(rest) == 0 && n > 0 {
		head.from = n - lineBreakBefore(d.b, n)
	}
	return append([]textSplice{head}, ss...)
}

// valueAt is the value of the key/value expression e as JSON (nil when it has none).
func (d *TOMLDoc) valueAt(e tomlExpr) json.RawMessage {
	v, ok := d.lookup(append(slices.Clone(e.table), e.key...))
	if !ok {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// hasValue reports whether the decoded document holds a value at the key path.
func (d *TOMLDoc) hasValue(path []string) bool {
	_, ok := d.lookup(path)
	return ok
}

func (d *TOMLDoc) lookup(path []string) (any, bool) {
	var v any = d.data
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[p]; !ok {
			return nil, false
		}
	}
	return v, true
}
