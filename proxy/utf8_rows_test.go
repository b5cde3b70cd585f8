package proxy

import (
	"bytes"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

// TestInvalidUTF8IsStoredAsReceived (issue 16): a user text and a tool result holding a raw
// 0xff byte and an escaped lone surrogate are forwarded byte for byte and stored as the agent
// sent them (raw bytes kept, the surrogate as its 3-byte generalized UTF-8), under the
// fingerprints of the repaired text, so a resend adds no row; search finds the valid words.
func TestInvalidUTF8IsStoredAsReceived(t *testing.T) {
	r := newRig(t, testSettings(1<<30), fakeupstream.Options{})
	const sid = "7b0c7a52-3f1e-4d6a-9c1b-2a4e6f8d0c11"
	body := []byte(`{"model":"claude-opus-4-5","max_tokens":100,"stream":true,` +
		`"metadata":{"user_id":"{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"` + sid + `\"}"},` +
		`"messages":[` +
		"{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"alpha \xff bravo \\ud800 charlie\"}]}," +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},` +
		"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":\"delta \xff\xfe echo \\udfff foxtrot\"}]}]}")
	hdr := map[string]string{"X-Claude-Code-Session-Id": sid}
	url := r.srv.URL + "/claude-code/v1/messages?beta=true"
	post(t, url, body, hdr)

	reqs := r.fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests, want 1", len(reqs))
	}
	for _, part := range []string{"alpha \xff bravo \\ud800 charlie", "delta \xff\xfe echo \\udfff foxtrot"} {
		if !bytes.Contains(reqs[0].Raw, []byte(part)) {
			t.Errorf("forwarded body lacks %q byte for byte", part)
		}
	}

	user, userFixed := "alpha \xff bravo \xed\xa0\x80 charlie", "alpha \uFFFD bravo \uFFFD charlie"
	result, resultFixed := "delta \xff\xfe echo \xed\xbf\xbf foxtrot", "delta \uFFFD\uFFFD echo \uFFFD foxtrot"
	fp1 := store.Fingerprint("", "user", "text", "", userFixed)
	fp2 := store.Fingerprint(fp1, "assistant", "tool_use", "Bash", `{"command":"ls"}`)
	fp3 := store.Fingerprint(fp2, "tool", "tool_result", "Bash", resultFixed)
	want := []struct{ fp, text string }{{fp1, user}, {fp2, `{"command":"ls"}`}, {fp3, result}}

	check := func(step string) {
		t.Helper()
		db := sessionDB(t, r, sid)
		rows, err := db.Query(`SELECT fingerprint, CAST(text AS BLOB) FROM messages ORDER BY seq`)
		must(t, err)
		defer rows.Close()
		i := 0
		for ; rows.Next(); i++ {
			var fp string
			var text []byte
			must(t, rows.Scan(&fp, &text))
			if i >= len(want) {
				t.Fatalf("%s: extra row %d: %q", step, i+1, text)
			}
			if fp != want[i].fp || string(text) != want[i].text {
				t.Errorf("%s: row %d = %s %q; want %s %q", step, i+1, fp, text, want[i].fp, want[i].text)
			}
		}
		must(t, rows.Err())
		if i != len(want) {
			t.Fatalf("%s: %d rows stored, want %d", step, i, len(want))
		}
		var line []byte
		must(t, db.QueryRow(`SELECT CAST(text AS BLOB) FROM lines WHERE message_seq = 3`).Scan(&line))
		if string(line) != result {
			t.Errorf("%s: lines row = %q, want %q", step, line, result)
		}
		for word, seq := range map[string]int{"alpha": 1, "bravo": 1, "charlie": 1, "delta": 3, "echo": 3, "foxtrot": 3} {
			var got int
			must(t, db.QueryRow(`SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?`, word).Scan(&got))
			if got != seq {
				t.Errorf("%s: messages_fts %q found seq %d, want %d", step, word, got, seq)
			}
			var n int
			must(t, db.QueryRow(`SELECT count(*) FROM lines_fts WHERE lines_fts MATCH ?`, word).Scan(&n))
			if n != 1 {
				t.Errorf("%s: lines_fts %q matched %d lines, want 1", step, word, n)
			}
		}
	}
	check("first sync")
	post(t, url, body, hdr) // the same messages again: same fingerprints, nothing added
	check("second sync")
	if strings.Contains(r.logs.String(), "fail-open") {
		t.Errorf("store logged a fail-open:\n%s", r.logs.String())
	}
}
