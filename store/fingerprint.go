package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Fingerprint returns the row key (contract: Rows; DESIGN.md §6): the first 32 lowercase hex
// digits of the SHA-256 of the canonical JSON of {"prev","role","kind","name","text"}, with name
// null when empty. prev is the previous row's fingerprint, "" for the first row.
func Fingerprint(prev, role, kind, name, text string) string {
	bp := fpBufs.Get().(*[]byte)
	b := slices.Grow((*bp)[:0], len(prev)+len(role)+len(kind)+len(name)+len(text)+64)
	b = append(b, `{"kind":`...)
	b = appendJSString(b, kind)
	b = append(b, `,"name":`...)
	if name == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSString(b, name)
	}
	b = append(b, `,"prev":`...)
	b = appendJSString(b, prev)
	b = append(b, `,"role":`...)
	b = appendJSString(b, role)
	b = append(b, `,"text":`...)
	b = appendJSString(b, text)
	b = append(b, '}')
	sum := sha256.Sum256(b)
	if cap(b) <= maxPooledFP {
		*bp = b
		fpBufs.Put(bp)
	}
	return hex.EncodeToString(sum[:16])
}

// fpBufs holds the canonical-JSON buffers Fingerprint hashes, so a row's text is not
// copied into a fresh buffer per row; buffers above maxPooledFP bytes are left to the GC
// so one huge row does not stay resident.
var fpBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledFP = 1 << 20

// CanonicalJSON encodes v as the fingerprint JSON (DESIGN.md §6): object keys sorted by code
// point, no whitespace, UTF-8 kept raw, and strings escaped exactly as JavaScript's
// JSON.stringify does (\" \\ \b \f \n \r \t, other controls below U+0020 as lowercase \u00xx,
// no HTML escaping, U+2028 and U+2029 raw).
//
// v may be nil, bool, string, json.Number, any Go integer or float, map[string]any,
// map[string]string, []any, []string, or json.RawMessage (re-encoded with sorted keys, number
// literals kept); anything else goes through encoding/json first. Floats are written as
// JavaScript writes numbers (1e+21, 1e-7, -0 as 0); NaN and infinities are an error. Integers are
// written exactly, also beyond 2^53. Strings follow the rules of CompactJSON for invalid UTF-8.
func CanonicalJSON(v any) ([]byte, error) {
	return appendCanonical(nil, v, 0)
}

// CompactJSON re-encodes one raw JSON value the way JavaScript's JSON.stringify(JSON.parse(raw))
// does, keeping object keys in the order received: the row text of a tool_use (contract: Rows,
// "tool inputs as compact JSON"; DESIGN.md §6 "Tool input text").
//
// Deviations and choices, documented because the JSON text can carry what a JavaScript value
// cannot: number literals are kept as written (1.0 stays 1.0); a repeated key keeps its first
// position and its last value (as JSON.parse and Python's json.loads do); integer-like keys keep
// their received position (JavaScript would move them first); an escaped lone surrogate
// (\ud83d) is written back as a lowercase escape, as JSON.stringify does; raw bytes that are not
// valid UTF-8 become U+FFFD, one per byte. Invalid JSON is an error.
func CompactJSON(raw []byte) (string, error) {
	v, err := parseJSON(raw)
	if err != nil {
		return "", err
	}
	return string(v.appendTo(make([]byte, 0, len(raw)), false)), nil
}

const maxJSONDepth = 10000

func appendCanonical(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("canonical json: nesting too deep")
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case string:
		return appendJSString(b, x), nil
	case json.Number:
		if !validNumber([]byte(x)) {
			return nil, fmt.Errorf("canonical json: invalid number %q", string(x))
		}
		return append(b, x...), nil
	case float64:
		return appendJSNumber(b, x)
	case float32:
		return appendJSNumber(b, float64(x))
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int8:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int16:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case uint:
		return strconv.AppendUint(b, uint64(x), 10), nil
	case uint8:
		return strconv.AppendUint(b, uint64(x), 10), nil
	case uint16:
		return strconv.AppendUint(b, uint64(x), 10), nil
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10), nil
	case uint64:
		return strconv.AppendUint(b, x, 10), nil
	case json.RawMessage:
		p, err := parseJSON(x)
		if err != nil {
			return nil, err
		}
		return p.appendTo(b, true), nil
	case []any:
		return appendArray(b, x, func(b []byte, e any) ([]byte, error) { return appendCanonical(b, e, depth+1) })
	case []string:
		return appendArray(b, x, appendJSStringValue)
	case map[string]any:
		return appendObject(b, x, func(b []byte, e any) ([]byte, error) { return appendCanonical(b, e, depth+1) })
	case map[string]string:
		return appendObject(b, x, appendJSStringValue)
	default:
		raw, err := json.Marshal(v) // encoding/json writes floats the JavaScript way too
		if err != nil {
			return nil, fmt.Errorf("canonical json: %w", err)
		}
		p, err := parseJSON(raw)
		if err != nil {
			return nil, err
		}
		return p.appendTo(b, true), nil
	}
}

// appendArray writes xs as a JSON array, each element by elem.
func appendArray[V any](b []byte, xs []V, elem func([]byte, V) ([]byte, error)) ([]byte, error) {
	b = append(b, '[')
	for i, e := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = elem(b, e); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// appendObject writes m as a JSON object with its keys in code point order, each value by elem.
func appendObject[V any](b []byte, m map[string]V, elem func([]byte, V) ([]byte, error)) ([]byte, error) {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) { // byte order of UTF-8 = code point order
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSString(b, k)
		b = append(b, ':')
		var err error
		if b, err = elem(b, m[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendJSStringValue is appendJSString as an element writer of appendArray and appendObject.
func appendJSStringValue(b []byte, s string) ([]byte, error) { return appendJSString(b, s), nil }

// appendJSNumber writes f as JavaScript's Number#toString does (the same rule encoding/json
// follows), except that -0 is written as 0, as JSON.stringify does.
func appendJSNumber(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("canonical json: unsupported number %v", f)
	}
	if f == 0 {
		return append(b, '0'), nil
	}
	format := byte('f')
	if abs := math.Abs(f); abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 → 1e-7
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string the way JavaScript's JSON.stringify writes it:
// only ", \ and control characters are escaped, and every other byte, invalid UTF-8
// included, is copied as it is. The proxy writes the text it splices into a body this way.
func AppendJSONString(b []byte, s string) []byte { return appendJSONText(b, s, false) }

// appendJSString writes s as a JSON string the way JSON.stringify does. A surrogate encoded on
// its own in 3 bytes (ED A0..BF xx, how CompactJSON keeps an escaped lone surrogate) is written
// as a \udxxx escape, or joined with a following low surrogate into one code point; any other
// invalid byte is written as U+FFFD.
func appendJSString(b []byte, s string) []byte { return appendJSONText(b, s, true) }

// appendJSONText is AppendJSONString, and with fixUTF8 appendJSString: the escapes are the
// same, only what becomes of bytes that are not valid UTF-8 differs.
func appendJSONText(b []byte, s string, fixUTF8 bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"':
				b = append(b, '\\', '"')
			case '\\':
				b = append(b, '\\', '\\')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		if !fixUTF8 {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || size != 1 {
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		if u, ok := surrogateAt(s, i); ok {
			i += 3
			if u < 0xdc00 {
				if lo, ok := surrogateAt(s, i); ok && lo >= 0xdc00 {
					b = utf8.AppendRune(b, 0x10000+(u-0xd800)<<10+(lo-0xdc00))
					i += 3
					start = i
					continue
				}
			}
			b = append(b, '\\', 'u', hexDigits[u>>12], hexDigits[u>>8&0xf], hexDigits[u>>4&0xf], hexDigits[u&0xf])
		} else {
			b = append(b, "\uFFFD"...)
			i++
		}
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// surrogateAt decodes a generalized-UTF-8 surrogate (U+D800..U+DFFF) at s[i:].
func surrogateAt(s string, i int) (rune, bool) {
	if i+2 >= len(s) || s[i] != 0xed || s[i+1] < 0xa0 || s[i+1] > 0xbf || s[i+2]&0xc0 != 0x80 {
		return 0, false
	}
	return 0xd000 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f), true
}
