package proxy

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

func TestCompressedToolResultIsStoredWholeAndServedFromABlob(t *testing.T) {
	s := testSettings(1_000_000)
	s.CompressOverTokens = 200
	r := newRig(t, s, fakeupstream.Options{})
	c := r.client(t, "comp", "claude-mythos-5-1")
	c.userTurn("read the big log, use tools", output(300, 0))
	c.userTurn("thanks", output(1, 0))
	reqs := r.accepted(t)
	last := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(last, "[smarter-compact: tool result compressed, ") {
		t.Fatal("the large tool result was not compressed")
	}
	if strings.Contains(last, "step 0 line 100:") {
		t.Fatal("a middle line of the result reached the model")
	}
	db := sessionDB(t, r, "comp")
	var text, blob string
	must(t, db.QueryRow(`SELECT text, blob_id FROM messages WHERE kind = 'tool_result' AND blob_id IS NOT NULL`).Scan(&text, &blob))
	full := output(300, 0)(0)
	if text != full {
		t.Fatalf("the row holds %d chars, want the full %d", len(text), len(full))
	}
	b, err := os.ReadFile(filepath.Join(r.root.Dir(), "blobs", blob+".txt"))
	must(t, err)
	if string(b) != full {
		t.Fatal("the blob is not the full text")
	}
	if !strings.Contains(last, `smart_compact_get(id=\"`+blob+`\")`) {
		t.Fatal("the header does not name the blob")
	}
	// the same result renders the same bytes on every request (cache-stable)
	if a, b := compressedContent(t, reqs[1].Body), compressedContent(t, reqs[len(reqs)-1].Body); a == "" || a != b {
		t.Fatal("the compressed result changed between requests")
	}
}

// compressedContent returns the first tool_result content that carries the compressed header.
func compressedContent(t *testing.T, body []byte) string {
	for _, m := range decodeJSON(t, body)["messages"].([]any) {
		blocks, _ := m.(map[string]any)["content"].([]any)
		for _, b := range blocks {
			if s, ok := b.(map[string]any)["content"].(string); ok && strings.HasPrefix(s, "[smarter-compact: tool result compressed") {
				return s
			}
		}
	}
	return ""
}

func TestForceFlagTrimsBelowTheThresholdAndIsDeleted(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "forced", "claude-opus-5-5")
	c.userTurn("one, use tools", output(3, 1))
	c.userTurn("two", output(1, 0))
	must(t, r.root.SetForce("forced"))
	c.userTurn("three", output(1, 0))
	reqs := r.accepted(t)
	if !strings.Contains(string(reqs[len(reqs)-1].Body), "[smarter-compact: continuing session forced; ") {
		t.Fatal("the forced request carries no pointer")
	}
	if r.root.Force("forced") {
		t.Fatal("the .force flag was not deleted")
	}
	var trims int
	must(t, sessionDB(t, r, "forced").QueryRow(`SELECT count(*) FROM events WHERE kind='trim'`).Scan(&trims))
	if trims != 1 {
		t.Fatalf("%d trim events, want 1", trims)
	}
}

func TestStoreErrorKeepsTheRewrittenView(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "locked", "claude-opus-5-5")
	c.userTurn("hello", output(1, 0))
	// Another connection holds the write lock past the busy timeout.
	path := filepath.Join(r.root.Dir(), "sessions", "locked.db")
	other, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=0")
	must(t, err)
	defer other.Close()
	conn, err := other.Conn(t.Context())
	must(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(t.Context(), "BEGIN IMMEDIATE")
	must(t, err)
	c.userTurn("are you there?", output(1, 0))
	r.root.SettleAll() // the queued write meets the lock and gives up after the busy timeout
	_, _ = conn.ExecContext(t.Context(), "ROLLBACK")
	reqs := r.accepted(t)
	if !strings.Contains(string(reqs[len(reqs)-1].Body), StandingInstruction[:40]) {
		t.Fatal("the request did not go on with its rewritten view")
	}
	if !strings.Contains(r.logs.String(), "smarter-compact: fail-open store") {
		t.Fatalf("want one fail-open store line, got:\n%s", r.logs.String())
	}
}

func TestNewerSchemaIsLeftAloneAndTheRequestGoesOn(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	path := filepath.Join(r.root.Dir(), "sessions", "future.db")
	db, err := sql.Open("sqlite3", "file:"+path)
	must(t, err)
	_, err = db.Exec("CREATE TABLE x (y); PRAGMA user_version = 4")
	must(t, err)
	db.Close()
	before, _ := os.ReadFile(path)
	c := r.client(t, "future", "claude-opus-5-5")
	c.userTurn("hello", output(1, 0))
	r.accepted(t)
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("a database with a newer schema was modified")
	}
}

func TestZstdBodyIsDecodedAndRewritten(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "zstd", "claude-opus-5-5")
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": "hi"})
	enc, _ := zstd.NewWriter(nil)
	body := enc.EncodeAll(c.body(), nil)
	resp := post(t, r.srv.URL+"/claude-code/v1/messages", body, map[string]string{"Content-Encoding": "zstd", "X-Claude-Code-Session-Id": "zstd"})
	if resp != 200 {
		t.Fatalf("status %d", resp)
	}
	reqs := r.accepted(t)
	if reqs[0].Header.Get("Content-Encoding") != "" || !strings.Contains(string(reqs[0].Raw), StandingInstruction[:40]) {
		t.Fatal("want the decoded body, rewritten, without Content-Encoding")
	}
}

func TestUsageEventsCountBreakpoints(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "bp", "claude-opus-5-5")
	c.userTurn("hi", output(1, 0))
	c.userTurn("again", output(1, 0))
	r.accepted(t)
	rows, err := sessionDB(t, r, "bp").Query(`SELECT breakpoints, breakpoint_at, trimmed, cache_read_tokens IS NOT NULL, model FROM events WHERE kind='usage' ORDER BY id`)
	must(t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var n, trimmed, hasRead int
		var at, model string
		must(t, rows.Scan(&n, &at, &trimmed, &hasRead, &model))
		got = append(got, strings.Join([]string{at, model}, " "))
		if n != 3 || trimmed != 0 || hasRead != 1 {
			t.Errorf("usage event: %d breakpoints at %q, trimmed %d, cache read reported %d", n, at, trimmed, hasRead)
		}
	}
	want := []string{"system,system,m-1 claude-opus-5-5", "system,system,m-1 claude-opus-5-5"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q want %q", got, want)
	}
}
