package proxy

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// R5. A panic in the rewrite after the session id is known must also write a fail_open
// event (contract: Rows, "A rewrite error after the session id is known also writes a
// fail_open event"; DESIGN §4 fail open). rewriteSafely's recover uses its local sess,
// which is only assigned when p.rewrite returns, so a panic always logs with sess == nil
// and no event is written. (Fault injection: p.now panics once, inside rewrite, after the
// session is loaded; any other panic in steps 5–10 takes the same path.)
//
// Regression test from the first review of proxy/ (R1…R11 name its findings).
func TestReviewPanicAfterTheSessionIsKnownWritesAFailOpenEvent(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "boom", "claude-mythos-5-1")
	c.userTurn("hello", output(1, 0))
	var calls atomic.Int32
	r.proxy.now = func() time.Time {
		if calls.Add(1) == 1 {
			panic("injected fault")
		}
		return time.Now()
	}
	c.userTurn("again", output(1, 0)) // fails open: goes upstream unmodified
	if !strings.Contains(r.logs.String(), "smarter-compact: fail-open panic at proxy/") {
		t.Fatalf("want the fail-open line, log:\n%s", r.logs.String())
	}
	var n int
	must(t, sessionDB(t, r, "boom").QueryRow(`SELECT count(*) FROM events WHERE kind = 'fail_open'`).Scan(&n))
	if n != 1 {
		t.Fatalf("%d fail_open events after a panic in a rewrite of a known session, want 1", n)
	}
}

// R6. Trailing data after the top-level object is not detected: parseAnthropic's check
// `skipSpace(body, len(body))` always returns len(body), so it is dead code and
// objectMembers stops at the first closing brace. Such a body is rewritten (rows stored, a
// trim possible, the standing instruction spliced in) instead of failing open with its
// original bytes (DESIGN §4, fail open: "Any error in 3–10 forwards the original bytes").
//
// Regression test from the first review of proxy/ (R1…R11 name its findings).
func TestReviewTrailingDataFailsOpenWithTheOriginalBytes(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	body := append(reviewBody("claude-mythos-5-1", `,"system":"s"`, u("hi")), []byte(` {"x":1}`)...)
	post(t, r.srv.URL+"/claude-code/v1/messages", body, map[string]string{"X-Claude-Code-Session-Id": "trail"})
	reqs := r.fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d upstream requests", len(reqs))
	}
	if !bytes.Equal(reqs[0].Raw, body) {
		t.Fatalf("a body with trailing data was rewritten instead of failing open:\nsent      %s\nforwarded %s", body, reqs[0].Raw)
	}
}

// R2-2. A second "messages" member that is not a list is no longer rejected. scanTop keeps
// the elements of the last "messages" value that was an array, while parseAnthropic points
// messagesAt at the last "messages" member whatever its kind, and checks only msgs != nil.
// The old parse (arrayElems(top[messagesAt].val)) failed open here. Now the proxy splices
// the first list's messages over the second value, so a request the API would read as
// "messages": "x" (last member wins) and reject goes upstream as a valid one — the proxy
// changes what the client asked for instead of forwarding its bytes. Not the fast path: a
// full scan does the same. Fix: in scanTop reset msgs = nil when a "messages" value is not
// an array (or record which member msgs came from and check it is top[messagesAt]).
//
// Regression test from the second review of proxy/ (parse fast path, dry count_tokens,
// session lock before parse).
func TestReview2DuplicateMessagesKeyFailsOpen(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"a"}],"messages":"x"}`)
	if req, err := parseAnthropic(body, nil); err == nil {
		t.Errorf("accepted: messages at member %d (%s) but %d message(s) from another member", req.messagesAt, req.top[req.messagesAt].val, req.msgCount())
	}
}

func TestStoreErrorKeepsTheRewrittenView(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "locked", "claude-opus-5-5")
	c.userTurn("hello", output(1, 0))
	// The first turn's queued writes (rows, then its usage event) land before the lock is
	// taken: a lock taken between them failed the usage event first, and the store logs one
	// line per class of fault, so the rows' fail-open line never came (a CI flake under load).
	r.root.SettleAll()
	// Another connection holds the write lock past the busy timeout.
	path := filepath.Join(r.root.Dir(), "sessions", "locked.db")
	other, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=2000") // waits for the first turn's queued writes
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

// A body an OpenAI adapter cannot read goes upstream byte for byte, with exactly one
// fail-open line each, and stores no rows:
//   - chat: not JSON, a role the API does not have, content that is not a string or a list,
//     messages that is not a list, data after the object.
//   - responses: not JSON, instructions that are not a string, an item role the API does
//     not have, input that is not a string or a list.
//
// TestChatFailOpen (chat_test.go) and TestResponsesFailOpen (responses_test.go) are its
// cases chat and responses; the responses case now also checks the 200 and that no rows
// were stored, as the chat case always did.
func TestOpenAIFailOpen(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		sid        string
		bad        []string
	}{
		{"chat", "/v1/chat/completions", map[string]string{"X-Session-Id": "chat-bad"}, "chat-bad", []string{
			`{"model":"gpt-5.4","messages":[{"role":"user","content":"hi"}`, // truncated
			`{"model":"gpt-5.4","messages":[{"role":"critic","content":"hi"}]}`,
			`{"model":"gpt-5.4","messages":[{"role":"user","content":7}]}`,
			`{"model":"gpt-5.4","messages":{"role":"user"}}`,
			`{"model":"gpt-5.4","messages":[{"role":"user","content":"hi"}]} trailing`,
		}},
		{"responses", "/codex/responses", map[string]string{"Session_id": "resp-bad"}, "resp-bad", []string{
			`{"model":"gpt-5.4","input":[{"role":"user","content":"hi"}]`,
			`{"model":"gpt-5.4","instructions":["x"],"input":[{"role":"user","content":"hi"}]}`,
			`{"model":"gpt-5.4","input":[{"type":"message","role":"tool","content":"hi"}]}`,
			`{"model":"gpt-5.4","input":7}`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newAdUpstream(t, nil)
			h := newAdHTTP(t, testSettings(0), allOn{}, up.srv.URL)
			for _, bad := range tc.bad {
				before := strings.Count(h.logs.String(), "smarter-compact: fail-open")
				r, _ := h.post(t, tc.path, []byte(bad), tc.hdr)
				got := up.last(t)
				if r.StatusCode != 200 || string(got.Body) != bad {
					t.Errorf("%q: upstream got %q", bad, got.Body)
				}
				if n := strings.Count(h.logs.String(), "smarter-compact: fail-open") - before; n != 1 {
					t.Errorf("%q: %d fail-open lines, want 1", bad, n)
				}
			}
			if n := adRowCount(t, h.root, tc.sid); n != 0 {
				t.Errorf("a failed-open request stored %d rows", n)
			}
		})
	}
}
