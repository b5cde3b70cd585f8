package store

import (
	"errors"
	"unicode/utf8"
)

// Row texts as received (issue 16, docs/decisions.md "Invalid UTF-8 in row texts").
//
// A JSON string in a request may hold raw bytes that are not valid UTF-8 (0xff) or an escaped
// lone surrogate (\ud800), which no UTF-8 text can hold. messages.text keeps the text as the
// agent sent it: raw invalid bytes byte for byte, an escaped lone surrogate as its 3-byte
// generalized UTF-8 (ED A0..BF 80..BF, the form CompactJSON uses inside). The fingerprint, the
// view, compression and blobs use ValidText of it, the text decoded as before (each invalid byte
// and each lone surrogate one U+FFFD), so fingerprints and forwarded bytes do not change.

// errRawSurrogate: a string holds a surrogate as raw 3-byte UTF-8, which the exact form cannot
// tell from an escaped one.
var errRawSurrogate = errors.New("raw surrogate bytes in a JSON string")

// ExactJSONString decodes one raw JSON string token (quotes included) keeping what UTF-8
// cannot say: raw invalid bytes as they came and escaped lone surrogates as 3-byte generalized
// UTF-8. ok is false when raw is not a JSON string, or holds raw surrogate bytes (ED A0..BF xx),
// whose exact form would read back as an escape; callers then store the repaired text.
func ExactJSONString(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	p := jsonParser{data: raw, exact: true}
	s, err := p.str()
	if err != nil || p.i != len(raw) {
		return "", false
	}
	return s, true
}

// ValidText returns s as valid UTF-8 the way encoding/json decodes the JSON string s came from
// (ExactJSONString): a 3-byte generalized-UTF-8 surrogate becomes one U+FFFD, any other byte
// that is not valid UTF-8 one U+FFFD each. A valid s is returned as it is, without copying.
func ValidText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r != utf8.RuneError || size != 1:
			out = append(out, s[i:i+size]...)
		default:
			if _, ok := surrogateAt(s, i); ok {
				size = 3
			}
			out = append(out, "\uFFFD"...)
		}
		i += size
	}
	return string(out)
}
