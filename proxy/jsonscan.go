package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/smarter-compact/smarter-compact/store"
)

// The request path never re-marshals what it forwards (DESIGN.md §4.10), so it works on
// byte spans of the original body. This scanner finds those spans: it validates as it
// skips, so a body it accepts is JSON, and it allocates nothing.

var errJSON = errors.New("malformed JSON")

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value that starts at b[i] (after spaces).
func skipValue(b []byte, i int) (int, error) {
	return skipValueDepth(b, skipSpace(b, i), 0)
}

const maxDepth = 10000

func skipValueDepth(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return 0, fmt.Errorf("%w: unexpected end at %d", errJSON, i)
	}
	if depth > maxDepth {
		return 0, fmt.Errorf("%w: nested too deeply", errJSON)
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{':
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != '"' {
				return 0, fmt.Errorf("%w: want object key at %d", errJSON, i)
			}
			var err error
			if i, err = skipString(b, i); err != nil {
				return 0, err
			}
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return 0, fmt.Errorf("%w: want ':' at %d", errJSON, i)
			}
			if i, err = skipValueDepth(b, skipSpace(b, i+1), depth+1); err != nil {
				return 0, err
			}
			i = skipSpace(b, i)
			if i < len(b) && b[i] == ',' {
				i++
				continue
			}
			if i < len(b) && b[i] == '}' {
				return i + 1, nil
			}
			return 0, fmt.Errorf("%w: want ',' or '}' at %d", errJSON, i)
		}
	case c == '[':
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = skipValueDepth(b, skipSpace(b, i), depth+1); err != nil {
				return 0, err
			}
			i = skipSpace(b, i)
			if i < len(b) && b[i] == ',' {
				i++
				continue
			}
			if i < len(b) && b[i] == ']' {
				return i + 1, nil
			}
			return 0, fmt.Errorf("%w: want ',' or ']' at %d", errJSON, i)
		}
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	default:
		return 0, fmt.Errorf("%w: unexpected %q at %d", errJSON, c, i)
	}
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, fmt.Errorf("%w: bad literal at %d", errJSON, i)
	}
	return i + len(lit), nil
}

func skipNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return 0, fmt.Errorf("%w: bad number at %d", errJSON, start)
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return 0, fmt.Errorf("%w: bad number at %d", errJSON, start)
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, fmt.Errorf("%w: bad number at %d", errJSON, start)
		}
	}
	return i, nil
}

// skipString returns the index past the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, error) {
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return 0, fmt.Errorf("%w: unterminated string", errJSON)
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
					return 0, fmt.Errorf("%w: bad \\u escape at %d", errJSON, i)
				}
				i += 6
			default:
				return 0, fmt.Errorf("%w: bad escape at %d", errJSON, i)
			}
		case c < 0x20:
			return 0, fmt.Errorf("%w: control character in string at %d", errJSON, i)
		default:
			i++
		}
	}
	return 0, fmt.Errorf("%w: unterminated string", errJSON)
}

func isHex4(h []byte) bool {
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// member is one key/value pair of an object: key is the decoded key (no escapes expected
// in the keys we look for), val the raw value span.
type member struct {
	key string
	val []byte
	// vs is the offset of val inside the object.
	vs int
	// start, end delimit the whole "key": value text inside the object.
	start, end int
}

// objectMembers returns the members of the object raw (which must be one object value).
func objectMembers(raw []byte) ([]member, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, fmt.Errorf("%w: want object", errJSON)
	}
	var out []member
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return out, nil
	}
	for {
		i = skipSpace(raw, i)
		if i >= len(raw) || raw[i] != '"' {
			return nil, fmt.Errorf("%w: want key", errJSON)
		}
		ks := i
		ke, err := skipString(raw, i)
		if err != nil {
			return nil, err
		}
		i = skipSpace(raw, ke)
		if i >= len(raw) || raw[i] != ':' {
			return nil, fmt.Errorf("%w: want ':'", errJSON)
		}
		vs := skipSpace(raw, i+1)
		ve, err := skipValueDepth(raw, vs, 1)
		if err != nil {
			return nil, err
		}
		out = append(out, member{key: decodeKey(raw[ks:ke]), val: raw[vs:ve], vs: vs, start: ks, end: ve})
		i = skipSpace(raw, ve)
		if i < len(raw) && raw[i] == ',' {
			i++
			continue
		}
		if i < len(raw) && raw[i] == '}' {
			return out, nil
		}
		return nil, fmt.Errorf("%w: want ',' or '}'", errJSON)
	}
}

func decodeKey(raw []byte) string {
	s, err := decodeString(raw)
	if err != nil {
		return ""
	}
	return s
}

// arrayElems returns the raw spans of the elements of the array raw.
func arrayElems(raw []byte) ([][]byte, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, fmt.Errorf("%w: want array", errJSON)
	}
	elems, _, err := scanArray(raw, i)
	return elems, err
}

// decodeString decodes a raw JSON string token. The common case (no escapes, valid UTF-8)
// is one copy.
func decodeString(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", fmt.Errorf("%w: want string", errJSON)
	}
	inner := raw[1 : len(raw)-1]
	plain := true
	for _, c := range inner {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%w: %v", errJSON, err)
	}
	return s, nil
}

// decodeName is decodeString for the short names a request repeats in every message (roles,
// block and item types): the common ones come back as constants, not a copy each.
func decodeName(raw []byte) (string, error) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		switch string(raw[1 : len(raw)-1]) {
		case "user":
			return "user", nil
		case "assistant":
			return "assistant", nil
		case "system":
			return "system", nil
		case "developer":
			return "developer", nil
		case "tool":
			return "tool", nil
		case "text":
			return "text", nil
		case "tool_use":
			return "tool_use", nil
		case "tool_result":
			return "tool_result", nil
		case "thinking":
			return "thinking", nil
		case "redacted_thinking":
			return "redacted_thinking", nil
		case "image":
			return "image", nil
		case "message":
			return "message", nil
		case "reasoning":
			return "reasoning", nil
		case "function_call":
			return "function_call", nil
		case "function_call_output":
			return "function_call_output", nil
		case "input_text":
			return "input_text", nil
		case "output_text":
			return "output_text", nil
		case "Bash":
			return "Bash", nil
		case "Read":
			return "Read", nil
		case "Edit":
			return "Edit", nil
		case "Grep":
			return "Grep", nil
		}
	}
	return decodeString(raw)
}

// decodeText decodes a raw JSON string token that becomes row text, as the agent sent it:
// raw bytes that are not valid UTF-8 and escaped lone surrogates are kept (store.ExactJSONString);
// rows fingerprint, compress and forward store.ValidText of it and store it as it is (issue 16,
// docs/decisions.md "Invalid UTF-8 in row texts"). Where the exact form cannot be kept it is
// decodeString's.
func decodeText(raw []byte) (string, error) {
	s, err := decodeString(raw)
	if err != nil || !strings.ContainsRune(s, utf8.RuneError) {
		return s, err
	}
	if exact, ok := store.ExactJSONString(raw); ok {
		return exact, nil
	}
	return s, nil
}

func kindOf(raw []byte) byte {
	i := skipSpace(raw, 0)
	if i >= len(raw) {
		return 0
	}
	return raw[i]
}

// spliceObject appends to dst obj with the values of the members named in repl replaced
// (by member index into mem, obj's members); every other byte is copied as it came.
func spliceObject(dst, obj []byte, mem []member, repl map[int][]byte) []byte {
	last := 0
	for i, m := range mem {
		v, ok := repl[i]
		if !ok {
			continue
		}
		dst = append(dst, obj[last:m.vs]...)
		dst = append(dst, v...)
		last = m.end
	}
	return append(dst, obj[last:]...)
}

// jsonList appends the elements of a JSON array to b, a comma before each but the first;
// n counts them. The caller writes the brackets.
type jsonList struct {
	b []byte
	n int
}

func (l *jsonList) add(v []byte) {
	if l.n > 0 {
		l.b = append(l.b, ',')
	}
	l.b = append(l.b, v...)
	l.n++
}
