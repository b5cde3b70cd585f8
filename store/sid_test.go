package store

import "testing"

func TestSanitizeSID(t *testing.T) {
	cases := []struct {
		name, in, want string
		ok             bool
	}{
		{"plain", "abc-DEF_123.x", "abc-DEF_123.x", true},
		{"uuid", "0b0f5a4e-3c1d-4f7e-9a2b-1c2d3e4f5a6b", "0b0f5a4e-3c1d-4f7e-9a2b-1c2d3e4f5a6b", true},
		{"surrounding ASCII whitespace trimmed", " \t\n\v\f\rses-1 \t\n\v\f\r", "ses-1", true},
		{"inner space replaced", "a b", "a_b", true},
		{"path separators", "ses/../x", "ses_.._x", true},
		{"backslash", `a\b`, "a_b", true},
		{"dots kept", "..", "..", true},
		{"emoji is one code point", "😀", "_", true},
		{"emoji inside", "a😀b", "a_b", true},
		{"accented letter", "é", "_", true},
		{"combining mark is its own code point", "e\u0301", "e_", true},
		{"NBSP is not trimmed", "\u00a0x\u00a0", "_x_", true},
		{"NUL", "a\x00b", "a_b", true},
		{"invalid UTF-8 byte", "a\xffb", "a_b", true},
		{"truncated sequence: one _ per byte", "a\xe2\x82", "a__", true},
		{"empty", "", "", false},
		{"only whitespace", " \t\n\v\f\r", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := SanitizeSID(c.in)
			if got != c.want || ok != c.ok {
				t.Errorf("SanitizeSID(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
			}
		})
	}
}

func TestCheckSID(t *testing.T) {
	for _, sid := range []string{"ses_.._x", "..", "a", "fp-0123456789abcdef"} {
		if err := checkSID(sid); err != nil {
			t.Errorf("checkSID(%q) = %v, want nil", sid, err)
		}
	}
	for _, sid := range []string{"", " a", "a/b", "../x", `a\b`, "😀", "a\x00"} {
		if err := checkSID(sid); err == nil {
			t.Errorf("checkSID(%q) = nil, want an error", sid)
		}
	}
}
