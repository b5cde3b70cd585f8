package store

import (
	"fmt"
	"sort"
	"unicode/utf8"
)

// The JSON parser CompactJSON uses (DESIGN.md §6): it keeps literals as their input bytes
// and object members in input order.

// jsonValue is a parsed JSON value: kind is one of '{' '[' '"' or 'l' (a literal: number, true,
// false, null, kept as its input bytes).
type jsonValue struct {
	kind    byte
	lit     []byte
	str     string
	members []jsonMember // objects
	elems   []jsonValue  // arrays
}

type jsonMember struct {
	key string
	val jsonValue
}

func (v *jsonValue) appendTo(b []byte, sortKeys bool) []byte {
	switch v.kind {
	case 'l':
		return append(b, v.lit...)
	case '"':
		return appendJSString(b, v.str)
	case '[':
		b = append(b, '[')
		for i := range v.elems {
			if i > 0 {
				b = append(b, ',')
			}
			b = v.elems[i].appendTo(b, sortKeys)
		}
		return append(b, ']')
	default:
		if sortKeys {
			sort.Slice(v.members, func(i, j int) bool { return v.members[i].key < v.members[j].key })
		}
		b = append(b, '{')
		for i := range v.members {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSString(b, v.members[i].key)
			b = append(b, ':')
			b = v.members[i].val.appendTo(b, sortKeys)
		}
		return append(b, '}')
	}
}

type jsonParser struct {
	data  []byte
	i     int
	depth int
	// exact keeps raw bytes that are not valid UTF-8 as they came instead of writing
	// U+FFFD (ExactJSONString, row texts stored as received); CompactJSON leaves it false.
	exact bool
}

func parseJSON(data []byte) (jsonValue, error) {
	p := jsonParser{data: data}
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return jsonValue{}, err
	}
	p.skipSpace()
	if p.i != len(p.data) {
		return jsonValue{}, p.errorf("unexpected %q after the value", p.data[p.i])
	}
	return v, nil
}

func (p *jsonParser) errorf(format string, a ...any) error {
	return fmt.Errorf("invalid json at offset %d: %s", p.i, fmt.Sprintf(format, a...))
}

func (p *jsonParser) skipSpace() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (jsonValue, error) {
	if p.i >= len(p.data) {
		return jsonValue{}, p.errorf("unexpected end of input")
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str()
		return jsonValue{kind: '"', str: s}, err
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	default:
		return jsonValue{}, p.errorf("unexpected %q", c)
	}
}

func (p *jsonParser) literal(word string) (jsonValue, error) {
	end := p.i + len(word)
	if end > len(p.data) || string(p.data[p.i:end]) != word {
		return jsonValue{}, p.errorf("invalid literal")
	}
	v := jsonValue{kind: 'l', lit: p.data[p.i:end]}
	p.i = end
	return v, nil
}

func (p *jsonParser) number() (jsonValue, error) {
	start := p.i
	d := p.data
	i := p.i
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i, _ = skipDigits(d, i)
	default:
		p.i = i
		return jsonValue{}, p.errorf("invalid number")
	}
	ok := true
	if i < len(d) && d[i] == '.' {
		i, ok = skipDigits(d, i+1)
	}
	if ok && i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		i, ok = skipDigits(d, i)
	}
	p.i = i
	if !ok { // a fraction or an exponent without digits
		return jsonValue{}, p.errorf("invalid number")
	}
	return jsonValue{kind: 'l', lit: d[start:i]}, nil
}

// skipDigits returns the index past the ASCII digits of d from i; ok is false when there
// are none (the index is then i).
func skipDigits(d []byte, i int) (next int, ok bool) {
	j := i
	for j < len(d) && d[j] >= '0' && d[j] <= '9' {
		j++
	}
	return j, j > i
}

func validNumber(b []byte) bool {
	p := jsonParser{data: b}
	_, err := p.number()
	return err == nil && p.i == len(b)
}

func (p *jsonParser) enter() error {
	p.depth++
	if p.depth > maxJSONDepth {
		return p.errorf("nesting deeper than %d", maxJSONDepth)
	}
	return nil
}

func (p *jsonParser) array() (jsonValue, error) {
	v := jsonValue{kind: '['}
	if empty, err := p.open(']'); err != nil || empty {
		return v, err
	}
	for {
		p.skipSpace()
		e, err := p.value()
		if err != nil {
			return jsonValue{}, err
		}
		v.elems = append(v.elems, e)
		if more, err := p.next(']', "array"); err != nil || !more {
			return v, err
		}
	}
}

func (p *jsonParser) object() (jsonValue, error) {
	v := jsonValue{kind: '{'}
	if empty, err := p.open('}'); err != nil || empty {
		return v, err
	}
	var index map[string]int // built once an object is large enough to need it
	for {
		p.skipSpace()
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return jsonValue{}, p.errorf("expected a string key")
		}
		key, err := p.str()
		if err != nil {
			return jsonValue{}, err
		}
		p.skipSpace()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return jsonValue{}, p.errorf("expected ':' after an object key")
		}
		p.i++
		p.skipSpace()
		val, err := p.value()
		if err != nil {
			return jsonValue{}, err
		}
		// A repeated key keeps its first position and takes the last value (JSON.parse).
		dup := -1
		if index != nil {
			if j, ok := index[key]; ok {
				dup = j
			}
		} else {
			for j := range v.members {
				if v.members[j].key == key {
					dup = j
					break
				}
			}
		}
		if dup >= 0 {
			v.members[dup].val = val
		} else {
			v.members = append(v.members, jsonMember{key: key, val: val})
			if index != nil {
				index[key] = len(v.members) - 1
			} else if len(v.members) == 16 {
				index = make(map[string]int, 32)
				for j, m := range v.members {
					index[m.key] = j
				}
			}
		}
		if more, err := p.next('}', "object"); err != nil || !more {
			return v, err
		}
	}
}

// open consumes the opening bracket of an array or object at p.i and enters one level; with
// empty it has also consumed the closing byte (and left the level).
func (p *jsonParser) open(closing byte) (empty bool, err error) {
	if err := p.enter(); err != nil {
		return false, err
	}
	p.i++
	p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == closing {
		p.i++
		p.depth--
		return true, nil
	}
	return false, nil
}

// next consumes what follows an element or member of the array or object named what: more
// after a comma, !more after the closing byte (the level is left).
func (p *jsonParser) next(closing byte, what string) (more bool, err error) {
	p.skipSpace()
	if p.i >= len(p.data) {
		return false, p.errorf("unexpected end of input in %s", what)
	}
	switch p.data[p.i] {
	case ',':
		p.i++
		return true, nil
	case closing:
		p.i++
		p.depth--
		return false, nil
	default:
		return false, p.errorf("unexpected %q in %s", p.data[p.i], what)
	}
}

// str decodes a JSON string at p.i (which holds the opening quote). Escaped lone surrogates are
// kept as 3-byte generalized UTF-8 so appendJSString can write them back as escapes; raw invalid
// bytes become U+FFFD, or with p.exact stay as they came (a raw 3-byte surrogate is then
// errRawSurrogate, since it would read back as an escaped one).
func (p *jsonParser) str() (string, error) {
	d := p.data
	p.i++ // opening quote
	start := p.i
	// Fast path: no escapes, valid UTF-8.
	for i := p.i; i < len(d); {
		c := d[i]
		if c == '"' {
			p.i = i + 1
			return string(d[start:i]), nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(d[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	var out []byte
	for p.i < len(d) {
		c := d[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), nil
		case c < 0x20:
			return "", p.errorf("control character in string")
		case c == '\\':
			if p.i+1 >= len(d) {
				return "", p.errorf("unexpected end of input in string")
			}
			e := d[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				u, ok := hex4(d, p.i)
				if !ok {
					return "", p.errorf("invalid \\u escape")
				}
				p.i += 4
				if u >= 0xd800 && u < 0xdc00 && p.i+1 < len(d) && d[p.i] == '\\' && d[p.i+1] == 'u' {
					if lo, ok := hex4(d, p.i+2); ok && lo >= 0xdc00 && lo < 0xe000 {
						p.i += 6
						out = utf8.AppendRune(out, 0x10000+(u-0xd800)<<10+(lo-0xdc00))
						continue
					}
				}
				if u >= 0xd800 && u < 0xe000 {
					out = append(out, 0xed, byte(0x80|u>>6&0x3f), byte(0x80|u&0x3f))
				} else {
					out = utf8.AppendRune(out, u)
				}
			default:
				p.i--
				return "", p.errorf("invalid escape \\%c", e)
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(d[p.i:])
			switch {
			case r == utf8.RuneError && size == 1 && p.exact:
				if _, ok := surrogateAt(string(d[p.i:min(p.i+3, len(d))]), 0); ok {
					return "", errRawSurrogate
				}
				out = append(out, d[p.i])
			case r == utf8.RuneError && size == 1:
				out = append(out, "\uFFFD"...)
			default:
				out = append(out, d[p.i:p.i+size]...)
			}
			p.i += size
		}
	}
	return "", p.errorf("unterminated string")
}

func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
