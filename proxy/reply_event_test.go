package proxy

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// plainEvents are events in the form the Messages API streams them: the decoder must read
// every one itself, not through json.Unmarshal.
var plainEvents = []string{
	`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-opus-5-5","usage":{"input_tokens":100,"output_tokens":1}}}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
	`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"Bash","input":{}}}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
	`{"type":"ping"}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Done with the step; the value is 42."}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"caf\u00e9 \"quoted\"\nnext \ud83d\ude00 é"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"ls"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me look."}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkYIARgCIkA="}}`,
	`{"type":"content_block_stop","index":0}`,
	`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":12}}`,
	`{"type":"message_stop"}`,
	`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
	` { "type" : "content_block_delta" , "index" : 12 , "delta" : { "type" : "text_delta" , "text" : "x" } }`,
}

func unmarshalEvent(data []byte) (anthropicEventFields, bool) {
	var ev anthropicEventFields
	err := json.Unmarshal(data, &ev)
	return ev, err == nil
}

func TestPlainAnthropicEventsSkipUnmarshal(t *testing.T) {
	for _, s := range plainEvents {
		var got anthropicEventFields
		if !plainAnthropicEvent([]byte(strings.TrimSpace(s)), &got) {
			t.Errorf("not read as plain: %s", s)
			continue
		}
		want, ok := unmarshalEvent([]byte(s))
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got  %+v\n want %+v (unmarshal ok %v)", s, got, want, ok)
		}
	}
}

// TestDecodeAnthropicEventMatchesUnmarshal: on generated events, plain and not (keys in
// other cases, repeated keys, nulls, wrong types, numbers json.Unmarshal refuses for an int,
// escapes and invalid UTF-8, broken JSON), decodeAnthropicEvent gives json.Unmarshal's
// outcome and fields.
func TestDecodeAnthropicEventMatchesUnmarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 18))
	keys := []string{"type", "index", "content_block", "delta", "Type", "INDEX", "Delta", "usage", "type", "delta", `t\u0079pe`, "ty\xffpe"}
	dkeys := []string{"type", "text", "thinking", "signature", "partial_json", "Text", "PARTIAL_JSON", "stop_reason", "text"}
	values := []string{`"text_delta"`, `"content_block_delta"`, `"a\"b\\c\u00e9\ud800x"`, "\"raw \xff\xfe bytes\"", `""`, `0`, `7`, `-0`, `-3`,
		`1.0`, `1e2`, `99999999999999999999`, `null`, `true`, `[]`, `[1,{"a":2}]`, `{}`, `{"type":"text","text":"hi"}`, `"message_stop"`}
	var gen func(depth int, ks []string) string
	gen = func(depth int, ks []string) string {
		var b strings.Builder
		b.WriteString("{")
		n := r.IntN(5)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			k := ks[r.IntN(len(ks))]
			b.WriteString(`"` + k + `":`)
			if (k == "delta" || k == "Delta") && depth == 0 && r.IntN(3) > 0 {
				b.WriteString(gen(1, dkeys))
			} else {
				b.WriteString(values[r.IntN(len(values))])
			}
		}
		b.WriteString("}")
		return b.String()
	}
	mutate := func(s string) string {
		switch r.IntN(6) {
		case 0:
			return s[:r.IntN(len(s)+1)] // truncated
		case 1:
			return s + " x" // trailing data
		case 2:
			i := r.IntN(len(s) + 1)
			return s[:i] + " " + s[i:]
		}
		return s
	}
	plain := 0
	for i := range 20000 {
		s := gen(0, keys)
		if i%3 == 0 {
			s = mutate(s)
		}
		if i < len(plainEvents) {
			s = plainEvents[i]
		}
		data := []byte(s)
		var got anthropicEventFields
		if plainAnthropicEvent(data, &got) {
			plain++
		}
		ok := decodeAnthropicEvent(data, &got)
		want, wantOK := unmarshalEvent(data)
		if ok != wantOK || (ok && !reflect.DeepEqual(got, want)) {
			t.Fatalf("%q:\n got  %v %+v\n want %v %+v", s, ok, got, wantOK, want)
		}
	}
	if plain < 1000 {
		t.Errorf("only %d of 20000 generated events were read as plain: the comparison says little", plain)
	}
}

func BenchmarkAnthropicEventDecode(b *testing.B) {
	data := []byte(plainEvents[5])
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		var ev anthropicEventFields
		for b.Loop() {
			decodeAnthropicEvent(data, &ev)
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var ev anthropicEventFields
			_ = json.Unmarshal(data, &ev)
		}
	})
}
