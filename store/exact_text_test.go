package store

import (
	"encoding/json"
	"testing"
)

// TestExactJSONStringRepairsToWhatEncodingJSONDecodes: the exact form keeps raw invalid bytes
// and escaped lone surrogates, and ValidText of it is the string encoding/json decodes, which
// is what row fingerprints were always computed over (issue 16).
func TestExactJSONStringRepairsToWhatEncodingJSONDecodes(t *testing.T) {
	cases := []struct{ raw, exact string }{
		{`"plain"`, "plain"},
		{"\"a\xffb\"", "a\xffb"},
		{"\"\xff\xfe\xe2\x82\"", "\xff\xfe\xe2\x82"},
		{`"x\ud800y"`, "x\xed\xa0\x80y"},
		{`"\udfff"`, "\xed\xbf\xbf"},
		{`"\ud800\ud800\udc00"`, "\xed\xa0\x80\U00010000"},
		{`"\ud83d\ude00 ok"`, "\U0001F600 ok"},
		{"\"\xed\\u00a0\"", "\xed\u00a0"},
		{"\"real \uFFFD kept\"", "real \uFFFD kept"},
		{"\"\xf0\\n\"", "\xf0\n"},
	}
	for _, c := range cases {
		got, ok := ExactJSONString([]byte(c.raw))
		if !ok || got != c.exact {
			t.Errorf("ExactJSONString(%q) = %q, %v; want %q", c.raw, got, ok, c.exact)
			continue
		}
		var want string
		if err := json.Unmarshal([]byte(c.raw), &want); err != nil {
			t.Fatal(err)
		}
		if v := ValidText(got); v != want {
			t.Errorf("ValidText(%q) = %q; encoding/json decodes %q", got, v, want)
		}
		if Fingerprint("", "user", "text", "", ValidText(got)) != Fingerprint("", "user", "text", "", want) {
			t.Errorf("%q: fingerprint differs", c.raw)
		}
	}
	// A raw 3-byte surrogate would read back as an escaped one: no exact form.
	for _, raw := range []string{"\"a\xed\xa0\x80\"", `"no end`, `x`} {
		if s, ok := ExactJSONString([]byte(raw)); ok {
			t.Errorf("ExactJSONString(%q) = %q, true; want false", raw, s)
		}
	}
}
