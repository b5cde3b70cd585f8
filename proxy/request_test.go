package proxy

import (
	"bytes"
	"testing"
)

// knownFrom parses prev with a full scan and returns what remember would keep for it (the
// cache holds copies of the messages), or nil when prev does not parse.
func knownFrom(prev []byte) *known {
	pr, err := parseAnthropic(prev, nil)
	if err != nil {
		return nil
	}
	msgs := make([]*message, pr.msgCount())
	for i := range msgs {
		msgs[i] = &message{raw: bytes.Clone(pr.rawMsg(i))}
	}
	return remember(pr, msgs, nil)
}

// sameParse reports how a fast-path parse differs from a full scan ("" when it does not).
func sameParse(body []byte, k *known) string {
	slow, serr := parseAnthropic(body, nil)
	fast, ferr := parseAnthropic(body, k)
	if (serr == nil) != (ferr == nil) {
		return "errors differ: full " + errString(serr) + " / fast " + errString(ferr)
	}
	if serr != nil {
		return ""
	}
	if len(slow.top) != len(fast.top) || slow.msgCount() != fast.msgCount() {
		return "shapes differ"
	}
	for i := range slow.top {
		s, f := slow.top[i], fast.top[i]
		if s.key != f.key || s.vs != f.vs || s.start != f.start || s.end != f.end || !bytes.Equal(s.val, f.val) {
			return "member differs: " + s.key
		}
	}
	off := func(b []byte) int { return len(body) - cap(b) } // spans are sub-slices of body
	for i := range slow.msgSpans {
		if !bytes.Equal(slow.rawMsg(i), fast.rawMsg(i)) || off(slow.rawMsg(i)) != off(fast.rawMsg(i)) {
			return "message span differs"
		}
	}
	if slow.messagesAt != fast.messagesAt || slow.systemAt != fast.systemAt || !bytes.Equal(slow.system, fast.system) {
		return "indexes differ"
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// The fast path must accept exactly what a full scan accepts and split it the same way,
// whatever the previous request was. Run with
// go test -tags sqlite_fts5 ./proxy/ -run '^$' -fuzz FuzzReview2ParseFastPath -fuzztime 60s
//
// Regression test from the second review of proxy/ (parse fast path, dry count_tokens,
// session lock before parse).
func FuzzReview2ParseFastPath(f *testing.F) {
	prev := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":"c","x":1}],"system":"s","tools":[1,2],"n":12,"t":true}`
	seeds := []string{
		prev,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":"c","x":1},{"role":"assistant","content":"d"}],"system":"s","tools":[1,2],"n":12,"t":true}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":"c","x":1}],"system":"s","tools":[1,2],"n":123,"t":truex}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"} ,{"role":"assistant","content":[{"type":"text","text":"b"}]} ],"system":"s" , "tools":[1,2],"n":12.5,"t":true }`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":"c","x":1}],"system":"s","tools":[1,2],"n":12,"t":true]`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":"c","x":1}}],"system":"s","tools":[1,2],"n":12,"t":true}`,
		`{"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"a"},1],"n":12e5}`,
	}
	for _, s := range seeds {
		f.Add([]byte(prev), []byte(s))
		f.Add([]byte(s), []byte(prev))
	}
	f.Fuzz(func(t *testing.T, prev, body []byte) {
		k := knownFrom(prev)
		if k == nil {
			return
		}
		if d := sameParse(body, k); d != "" {
			t.Fatalf("%s\nprev %q\nbody %q", d, prev, body)
		}
	})
}
