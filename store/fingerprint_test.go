package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

// The golden vectors of DESIGN.md §6 (computed by the seed's Python fingerprint function).
var fingerprintVectors = []struct {
	name                         string
	prev, role, kind, tool, text string
	want                         string
}{
	{"user text, name null", "", "user", "text", "", "Remember KEY-7 = 0x3f2a.", "ef4ec80451390e48c7d9345e3d025634"},
	{"tool_use with JSON text", "x", "assistant", "tool_use", "Bash", `{"command":"ls -la","description":"List"}`, "72ca960941e2ba409b203b8a3d4604ee"},
	{"escapes and raw UTF-8", "", "tool", "tool_result", "Bash", "h\u00e9llo\b\f\u2028<&> \u001f \U0001F600", "0782abfd7a0609b394fbaf1fd6116d30"},
}

func TestFingerprintGoldenVectors(t *testing.T) {
	for _, v := range fingerprintVectors {
		t.Run(v.name, func(t *testing.T) {
			if got := Fingerprint(v.prev, v.role, v.kind, v.tool, v.text); got != v.want {
				t.Errorf("Fingerprint = %s, want %s", got, v.want)
			}
			// The same object through the general encoder must hash the same.
			obj := map[string]any{"prev": v.prev, "role": v.role, "kind": v.kind, "name": nil, "text": v.text}
			if v.tool != "" {
				obj["name"] = v.tool
			}
			b, err := CanonicalJSON(obj)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			if got := hex.EncodeToString(sum[:])[:32]; got != v.want {
				t.Errorf("sha256(CanonicalJSON) = %s, want %s (json %s)", got, v.want, b)
			}
		})
	}
}

func TestCanonicalJSONBytes(t *testing.T) {
	// Expected bytes written by hand from the JSON.stringify rules, not produced by our encoder.
	want := "{\"kind\":\"tool_result\",\"name\":\"Bash\",\"prev\":\"\",\"role\":\"tool\",\"text\":\"h\u00e9llo\\b\\f\u2028<&> \\u001f \U0001F600\"}"
	got, err := CanonicalJSON(map[string]any{"prev": "", "role": "tool", "kind": "tool_result", "name": "Bash",
		"text": "h\u00e9llo\b\f\u2028<&> \u001f \U0001F600"})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("CanonicalJSON =\n%q\nwant\n%q", got, want)
	}
}

// TestStringEscapes compares against JSON.stringify output recorded from node 20, for
// appendJSString and AppendJSONString, which differ only on bytes that are not valid UTF-8.
func TestStringEscapes(t *testing.T) {
	cases := []struct{ in, want string }{
		{"\x00", `"\u0000"`}, {"\x01", `"\u0001"`}, {"\x07", `"\u0007"`}, {"\b", `"\b"`}, {"\t", `"\t"`},
		{"\n", `"\n"`}, {"\v", `"\u000b"`}, {"\f", `"\f"`}, {"\r", `"\r"`}, {"\x0e", `"\u000e"`},
		{"\x1a", `"\u001a"`}, {"\x1f", `"\u001f"`}, {`"`, `"\""`}, {`\`, `"\\"`}, {"/", `"/"`},
		{"\x7f", "\"\x7f\""}, {"\u2028", "\"\u2028\""}, {"\u2029", "\"\u2029\""}, {"<>&", `"<>&"`},
		{"\U0001F600x", "\"\U0001F600x\""},
		// Lone surrogates as CompactJSON keeps them (generalized UTF-8): written as escapes.
		{"\xed\xa0\xbd", `"\ud83d"`}, {"\xed\xb8\x80", `"\ude00"`},
		// A CESU-8 pair joins into one code point, as a JavaScript string would.
		{"\xed\xa0\xbd\xed\xb8\x80", "\"\U0001F600\""},
		// Other invalid bytes: U+FFFD each (documented rule).
		{"a\xffb", "\"a\uFFFDb\""}, {"\xe2\x82", "\"\uFFFD\uFFFD\""},
	}
	// What AppendJSONString writes where it differs: every byte as it is.
	kept := map[string]string{
		"\xed\xa0\xbd": "\"\xed\xa0\xbd\"", "\xed\xb8\x80": "\"\xed\xb8\x80\"", "\xed\xa0\xbd\xed\xb8\x80": "\"\xed\xa0\xbd\xed\xb8\x80\"",
		"a\xffb": "\"a\xffb\"", "\xe2\x82": "\"\xe2\x82\"",
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%q", c.in), func(t *testing.T) {
			if got := string(appendJSString(nil, c.in)); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
			want, ok := kept[c.in]
			if !ok {
				want = c.want
			}
			if got := string(AppendJSONString(nil, c.in)); got != want {
				t.Errorf("AppendJSONString: got %q, want %q", got, want)
			}
		})
	}
}

func TestCanonicalJSONValues(t *testing.T) {
	tenth := 0.1 // a variable, so the sum is computed in float64, not as an exact constant
	cases := []struct {
		name string
		in   any
		want string
	}{
		{"nil", nil, "null"},
		{"bools", []any{true, false}, "[true,false]"},
		// Float expectations recorded from node's JSON.stringify.
		{"1e21", 1e21, "1e+21"},
		{"1e-7", 1e-7, "1e-7"},
		{"0.000001", 0.000001, "0.000001"},
		{"negative zero", math.Copysign(0, -1), "0"},
		{"large integer float", 123456789012345680000.0, "123456789012345680000"},
		{"1e20", 1e20, "100000000000000000000"},
		{"0.1+0.2", tenth + 2*tenth, "0.30000000000000004"},
		{"1.5e300", 1.5e300, "1.5e+300"},
		{"-2.5e-8", -2.5e-8, "-2.5e-8"},
		{"smallest denormal", 5e-324, "5e-324"},
		{"max float", math.MaxFloat64, "1.7976931348623157e+308"},
		{"integer 100", 100, "100"},
		{"int64 beyond 2^53 kept exact", int64(9007199254740993), "9007199254740993"},
		{"json.Number kept", json.Number("1.50"), "1.50"},
		{"nested maps sorted", map[string]any{"b": map[string]any{"z": 1, "a": []any{"x", nil}}, "a": "s"}, `{"a":"s","b":{"a":["x",null],"z":1}}`},
		{"keys sorted by code point", map[string]string{"é": "1", "z": "2", "Z": "3", "\U0001F600": "4", "\uff5e": "5"}, "{\"Z\":\"3\",\"z\":\"2\",\"é\":\"1\",\"\uff5e\":\"5\",\"\U0001F600\":\"4\"}"},
		{"raw message sorted at every level", json.RawMessage(`{"b":[{"y":1,"x":2}],"a":1.0}`), `{"a":1.0,"b":[{"x":2,"y":1}]}`},
		{"struct through encoding/json", struct {
			B string `json:"b"`
			A string `json:"a"`
		}{"<", "\u2028"}, "{\"a\":\"\u2028\",\"b\":\"<\"}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := CanonicalJSON(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
	for _, bad := range []any{math.NaN(), math.Inf(1), json.Number("01"), make(chan int)} {
		if b, err := CanonicalJSON(bad); err == nil {
			t.Errorf("CanonicalJSON(%v) = %s, want an error", bad, b)
		}
	}
}

// TestCompactJSON: expectations are JSON.stringify(JSON.parse(in)) recorded from node 20, except
// the rows marked as documented deviations.
func TestCompactJSON(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"tool input", `{"command": "ls -la", "description":"List"}`, `{"command":"ls -la","description":"List"}`},
		{"order kept, whitespace dropped", " { \"b\" : 1 , \"a\" : [ true , false , null , \"x\" ] } \n", `{"b":1,"a":[true,false,null,"x"]}`},
		{"escapes decoded, pairs joined, lone surrogates escaped", `{"s":"\u00e9\/\u003c\u2028\ud83d\ude00\uD83D\uDE00\ud83d \ude00"}`, "{\"s\":\"é/<\u2028\U0001F600\U0001F600\\ud83d \\ude00\"}"},
		{"repeated key: first position, last value", `{"a":1,"b":2,"a":3}`, `{"a":3,"b":2}`},
		{"control escapes", `"\b\f\n\r\t\u0001\u001F\u007f"`, "\"\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\""},
		{"empty containers", `[[],{},[{}],""]`, `[[],{},[{}],""]`},
		{"__proto__ is a plain key", `{"__proto__":1}`, `{"__proto__":1}`},
		{"raw UTF-8 kept", "{\"k\":\"日本 \U0001F600\"}", "{\"k\":\"日本 \U0001F600\"}"},
		// Documented deviations from JavaScript.
		{"deviation: number literals kept", `[1.0, -0, 1E5, 2e-7, 10000000000000000000001]`, `[1.0,-0,1E5,2e-7,10000000000000000000001]`},
		{"deviation: integer-like keys keep their position", `{"b":1,"2":2,"1":3}`, `{"b":1,"2":2,"1":3}`},
		{"deviation: invalid UTF-8 bytes become U+FFFD each", "\"a\xff\xfeb\"", "\"a\uFFFD\uFFFDb\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := CompactJSON([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	t.Run("many keys with a repeat", func(t *testing.T) {
		var in, want strings.Builder
		in.WriteString("{")
		want.WriteString("{")
		for i := 0; i < 40; i++ {
			fmt.Fprintf(&in, `"k%d":%d,`, i, i)
			if i == 30 {
				fmt.Fprintf(&want, `"k%d":"last",`, i)
			} else {
				fmt.Fprintf(&want, `"k%d":%d,`, i, i)
			}
		}
		in.WriteString(`"k30":"last"}`)
		w := strings.TrimSuffix(want.String(), ",") + "}"
		got, err := CompactJSON([]byte(in.String()))
		if err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("got %s\nwant %s", got, w)
		}
	})
}

func TestCompactJSONErrors(t *testing.T) {
	cases := map[string]string{
		"empty":                 "",
		"only space":            "  ",
		"trailing comma":        `{"a":1,}`,
		"trailing value":        `{} {}`,
		"leading zero":          `01`,
		"bare minus":            `-`,
		"fraction w/o digits":   `1.`,
		"exponent w/o digits":   `1e+`,
		"unterminated string":   `"abc`,
		"raw control in string": "\"a\nb\"",
		"bad escape":            `"\x"`,
		"short unicode escape":  `"\u12"`,
		"single quotes":         `{'a':1}`,
		"unquoted key":          `{a:1}`,
		"missing colon":         `{"a" 1}`,
		"bad literal":           `tru`,
		"unclosed array":        `[1,2`,
		"too deep":              strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if got, err := CompactJSON([]byte(in)); err == nil {
				t.Errorf("CompactJSON(%q) = %q, want an error", in, got)
			}
		})
	}
}

func TestFingerprintMatchesCanonicalJSON(t *testing.T) {
	texts := []string{"", "plain", "a\"b\\c", "line1\nline2\r\n\t", "\x00\x1f\x7f", "\u2028\u2029", "\xff\xed\xa0\x80", strings.Repeat("é", 1000)}
	for i, text := range texts {
		for _, name := range []string{"", "Read"} {
			obj := map[string]any{"prev": texts[(i+1)%len(texts)], "role": "tool", "kind": "tool_result", "name": nil, "text": text}
			if name != "" {
				obj["name"] = name
			}
			b, err := CanonicalJSON(obj)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			if got, want := Fingerprint(texts[(i+1)%len(texts)], "tool", "tool_result", name, text), hex.EncodeToString(sum[:16]); got != want {
				t.Errorf("text %q name %q: Fingerprint %s, CanonicalJSON hash %s", text, name, got, want)
			}
		}
	}
}

func BenchmarkFingerprint(b *testing.B) {
	text := strings.Repeat("some tool output line with \"quotes\" and tabs\t\n", 200)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Fingerprint("ef4ec80451390e48c7d9345e3d025634", "tool", "tool_result", "Bash", text)
	}
}
