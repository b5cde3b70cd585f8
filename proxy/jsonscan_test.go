package proxy

import (
	"encoding/json"
	"testing"

	"github.com/smarter-compact/smarter-compact/store"
)

var scanCases = []string{
	`{}`, `[]`, `{"a":1}`, ` { "a" : [ 1 , 2.5e-3 , -0 , true , false , null ] } `,
	`"\u00e9\n\"x\""`, `{"a":"\ud83d\ude00"}`, `[{"b":{"c":[]}}]`,
	`{"a":}`, `{"a" 1}`, `[1,]`, `{"a":1,}`, `01`, `1.`, `-`, `"abc`, `"a\x"`, "\"a\x01\"",
	`tru`, `nul`, `{"a":1}}`, `[1 2]`, `"\u12g4"`, `1e`, `{"a":"b"`, `{1:2}`,
}

func valid(b []byte) bool {
	end, err := skipValue(b, 0)
	return err == nil && skipSpace(b, end) == len(b)
}

func TestSkipValueAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range scanCases {
		if got, want := valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("%q: scanner says valid=%v, encoding/json says %v", c, got, want)
		}
	}
}

func FuzzSkipValue(f *testing.F) {
	for _, c := range scanCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := valid(b), json.Valid(b); got != want {
			t.Fatalf("%q: scanner valid=%v, encoding/json %v", b, got, want)
		}
	})
}

func TestObjectMembersAndSplice(t *testing.T) {
	obj := []byte(`{ "role" : "user", "content":"hi" ,"x":{"y":[1]} }`)
	mem, err := objectMembers(obj)
	if err != nil {
		t.Fatal(err)
	}
	if len(mem) != 3 || mem[0].key != "role" || string(mem[1].val) != `"hi"` || string(mem[2].val) != `{"y":[1]}` {
		t.Fatalf("members: %+v", mem)
	}
	got := spliceObject(nil, obj, mem, map[int][]byte{1: []byte(`[{"type":"text","text":"hi"}]`)})
	want := `{ "role" : "user", "content":[{"type":"text","text":"hi"}] ,"x":{"y":[1]} }`
	if string(got) != want {
		t.Fatalf("splice:\n got %s\nwant %s", got, want)
	}
}

func TestAppendJSONStringMatchesJSONStringify(t *testing.T) {
	// Expected values are what JavaScript's JSON.stringify prints for these strings.
	cases := map[string]string{
		"plain":          `"plain"`,
		"q\"b\\":         `"q\"b\\"`,
		"\b\f\n\r\t":     `"\b\f\n\r\t"`,
		"\x00\x1f":       `"\u0000\u001f"`,
		"<&> é \u2028 😀": `"<&> é ` + "\u2028" + ` 😀"`,
	}
	for in, want := range cases {
		if got := string(store.AppendJSONString(nil, in)); got != want {
			t.Errorf("%q: got %s want %s", in, got, want)
		}
		var back string
		if err := json.Unmarshal(store.AppendJSONString(nil, in), &back); err != nil || back != in {
			t.Errorf("%q does not round-trip: %q %v", in, back, err)
		}
	}
}

// The fast path must read a body exactly as a full scan does, whatever the previous
// request was: same members, same message spans, and the same errors.
func TestParseWithKnownPrefixMatchesAFullScan(t *testing.T) {
	prev := []byte(`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c","x":1}],"system":"s","tools":[1,2]}`)
	pr, err := parseAnthropic(prev, nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]*message, pr.msgCount())
	for i := range msgs {
		msgs[i] = &message{raw: pr.rawMsg(i)}
	}
	k := remember(pr, msgs, nil)
	bodies := []string{
		string(prev),
		`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"},{"role":"assistant","content":"d"}],"system":"s","tools":[1,2]}`,
		`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"bb"},{"role":"user","content":"c","x":1}],"system":"s","tools":[1,2,3]}`,
		`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}],"system":"s","tools":[1,2]}`,
		`{"model":"m","messages":[{"role":"user","content":"a"} ,{"role":"assistant","content":"b"}],"system":"s","tools":[1,2] }`,
		`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c","x":1}],"system":"s","tools":[1,2]} x`,
		`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c","x":1}],"system":"s","tools":[1,2]`,
		`{"model":"m","messages":[{"role":"user","content":"a"}{"role":"assistant","content":"b"}],"system":"s"}`,
		`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c","x":1}],"system":"s","tools":[1,2]]`,
	}
	for _, b := range bodies {
		slow, serr := parseAnthropic([]byte(b), nil)
		fast, ferr := parseAnthropic([]byte(b), k)
		if (serr == nil) != (ferr == nil) {
			t.Errorf("%s: full scan err %v, fast path err %v", b, serr, ferr)
			continue
		}
		if serr != nil {
			continue
		}
		if slow.msgCount() != fast.msgCount() || len(slow.top) != len(fast.top) {
			t.Errorf("%s: shapes differ", b)
			continue
		}
		for i := range slow.msgSpans {
			if string(slow.rawMsg(i)) != string(fast.rawMsg(i)) {
				t.Errorf("%s: message %d differs", b, i)
			}
		}
		for i := range slow.top {
			if slow.top[i].key != fast.top[i].key || string(slow.top[i].val) != string(fast.top[i].val) || slow.top[i].vs != fast.top[i].vs {
				t.Errorf("%s: member %d differs", b, i)
			}
		}
	}
}
