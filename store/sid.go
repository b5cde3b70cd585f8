package store

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// SanitizeSID applies the contract's session id rule (contract: Session id): surrounding ASCII
// whitespace is trimmed, every code point outside [A-Za-z0-9._-] becomes one "_" ("😀" → "_",
// "ses/../x" → "ses_.._x"), and an empty result gives ok = false.
//
// Bytes that are not valid UTF-8 become one "_" each (Go's decoding rule; a JavaScript string
// never holds them, so the hooks cannot disagree on a valid id).
func SanitizeSID(raw string) (sid string, ok bool) {
	s := strings.Trim(raw, asciiSpace)
	if s == "" {
		return "", false
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if !sidByte(s[i]) {
			clean = false
			break
		}
	}
	if clean {
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if sidByte(c) {
				b.WriteByte(c)
			} else {
				b.WriteByte('_')
			}
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:]) // size 1 for an invalid byte
		b.WriteByte('_')
		i += size
	}
	return b.String(), true
}

func sidByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

// checkSID rejects an id that SanitizeSID would change, so every file name built from it stays
// inside sessions/.
func checkSID(sid string) error {
	if s, ok := SanitizeSID(sid); !ok || s != sid {
		return fmt.Errorf("invalid session id %q: pass it through SanitizeSID first", sid)
	}
	return nil
}
