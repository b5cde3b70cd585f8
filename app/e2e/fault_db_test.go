//go:build e2e

package e2e_test

// The fault suite (issue 16), a session database that breaks under a running serve: written
// over with garbage, deleted, made immutable. Every request still reaches the model, and the
// session's rows come back in conversation order once the store can write again. The store's
// own tests of the same faults are store/db_recover_test.go and store/read_error_test.go;
// these run the built binary in front of the real fake upstream.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/web"
)

// faultConv is a Claude Code conversation of session sid on serve: each say posts the whole
// history plus a new user turn, as the agent does, and records the model's reply.
type faultConv struct {
	t     *testing.T
	srv   *serveProc
	sid   string
	turns []map[string]any
	texts []string // every message's text in conversation order
	token string   // the path of serve's API token
}

func (c *faultConv) say(prompt string) {
	c.t.Helper()
	c.turns = append(c.turns, map[string]any{"role": "user", "content": prompt})
	c.texts = append(c.texts, prompt)
	body, _ := json.Marshal(map[string]any{
		"model": dashModel, "max_tokens": 256,
		"system":   []map[string]any{{"type": "text", "text": "You are the e2e fault test's agent."}},
		"messages": c.turns,
		"metadata": map[string]any{"user_id": fmt.Sprintf(`{"device_id":"d","account_uuid":"","session_id":%q}`, c.sid)},
	})
	if code := postClaude(c.t, c.srv.url(), c.sid, body); code != http.StatusOK {
		c.t.Fatalf("%q: %d, want the model's 200 (the proxy fails open)", prompt, code)
	}
	// dashReply answers "Noted, after N messages."; the agent sends it back next turn
	reply := fmt.Sprintf("Noted, after %d messages.", len(c.turns))
	c.turns = append(c.turns, map[string]any{"role": "assistant", "content": reply})
	c.texts = append(c.texts, reply)
}

func (c *faultConv) path() string {
	return filepath.Join(c.srv.stateDir, "context", "sessions", c.sid+".db")
}

// rows returns the session's text rows ordered by seq, once the file is quiet.
func (c *faultConv) rows() []string {
	c.t.Helper()
	db := openSessionDB(c.t, c.srv.stateDir, c.sid)
	defer db.Close()
	q, err := db.Query(`SELECT text FROM messages WHERE kind = 'text' ORDER BY seq`)
	if err != nil {
		c.t.Fatal(err)
	}
	defer q.Close()
	var out []string
	for q.Next() {
		var s string
		if err := q.Scan(&s); err != nil {
			c.t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// checkRows fails unless the session's rows are the conversation so far, in order (the last
// reply may be missing: the store takes it from the next request).
func (c *faultConv) checkRows(when string) {
	c.t.Helper()
	got := c.rows()
	if !slices.Equal(got, c.texts) && !slices.Equal(got, c.texts[:len(c.texts)-1]) {
		c.t.Fatalf("%s: rows by seq\n%q\nwant the conversation\n%q", when, got, c.texts)
	}
}

// storeWriteEntry waits up to 5 s for GET /api/health to hold a store_write entry of the
// session and returns it; it fails the test without one.
func (c *faultConv) storeWriteEntry(when string) store.HealthEntry {
	c.t.Helper()
	tok, err := os.ReadFile(c.token)
	if err != nil {
		c.t.Fatalf("the API token: %v", err)
	}
	var snap store.HealthSnapshot
	var last string
	var found store.HealthEntry
	if waitFor(5*time.Second, func() bool {
		snap, err = web.FetchHealth(context.Background(), c.srv.url(), strings.TrimSpace(string(tok)))
		last = fmt.Sprintf("%+v (%v)", snap, err)
		i := slices.IndexFunc(snap.Kind(store.HealthStoreWrite).Entries, func(e store.HealthEntry) bool { return e.Key == c.sid })
		if i >= 0 {
			found = snap.Kind(store.HealthStoreWrite).Entries[i]
		}
		return i >= 0
	}) {
		c.t.Logf("/api/health %s: store_write entry %+v", when, found)
		return found
	}
	c.t.Fatalf("/api/health %s: %s, want a store_write entry for %s", when, last, c.sid)
	return found
}

// faultServe is serve in front of the fake upstream with one conversation started on it
// (two turns, rows checked).
func faultServe(t *testing.T, sid string) *faultConv {
	bin := buildBinary(t)
	_, srv := serveWithFake(t, bin, dashReply)
	c := &faultConv{t: t, srv: srv, sid: sid,
		token: filepath.Join(filepath.Dir(srv.stateDir), "home", ".config", "smarter-compact", "api-token")}
	c.say("first turn before the fault")
	c.say("second turn before the fault")
	c.checkRows("before the fault")
	return c
}

// faultOtherSessions is one more than the writers serve keeps connected (store/writers.go's
// maxConnectedWriters is 64): a request in each parks the least recently used writer.
const faultOtherSessions = 65

// parkWriter sends one request in each of faultOtherSessions other sessions, so the store
// parks the writer of the sessions before them (closes its connection, checkpointing the
// WAL), as it does after two idle minutes.
func parkWriter(t *testing.T, srv *serveProc) {
	t.Helper()
	for i := range faultOtherSessions {
		sid := fmt.Sprintf("e2e-fault-other-%d", i)
		if code := postClaude(t, srv.url(), sid, healthBody(sid, "another session")); code != http.StatusOK {
			t.Fatalf("session %s: %d", sid, code)
		}
	}
	time.Sleep(500 * time.Millisecond) // parking runs on its own goroutine
}

// TestE2EFaultCorruptDB: the session's .db written over with garbage under a running serve,
// once while the session's writer is connected and once after it was parked. The next
// requests are forwarded; the broken file is set aside as <sid>.db.corrupt-<time> with the
// garbage kept, a fresh database holds the whole conversation in order, and /api/status's
// health has a store_write entry of class corrupt for the session. The connected case failed
// before store's checkHeader: the writer kept writing into its WAL, no error, nothing moved.
func TestE2EFaultCorruptDB(t *testing.T) {
	for _, tc := range []struct {
		name string
		park bool
	}{{"connected", false}, {"parked", true}} {
		t.Run(tc.name, func(t *testing.T) {
			sid := "e2e-fault-corrupt-" + tc.name
			c := faultServe(t, sid)
			if tc.park {
				parkWriter(t, c.srv)
			}
			garbage := bytes.Repeat([]byte("this is not sqlite\n"), 300)
			if err := os.WriteFile(c.path(), garbage, 0o600); err != nil {
				t.Fatal(err)
			}
			c.say("first turn after the garbage")
			// The -wal and -shm move with the file when they exist at that moment (a connected
			// writer's may or may not, by timing): count the database file only.
			var moved []string
			matches, _ := filepath.Glob(c.path() + ".corrupt-*")
			for _, m := range matches {
				if !strings.HasSuffix(m, "-wal") && !strings.HasSuffix(m, "-shm") {
					moved = append(moved, m)
				}
			}
			if len(moved) != 1 {
				entries, _ := os.ReadDir(filepath.Dir(c.path()))
				t.Fatalf("moved-aside files %q, want one %s.db.corrupt-<time> (sessions/ holds %v)", moved, sid, entries)
			}
			// A connected writer's close checkpoints its WAL into the file it had open, so the
			// moved file then holds the session's pages over the garbage; only a parked
			// writer's file is the garbage byte for byte.
			if got, _ := os.ReadFile(moved[0]); tc.park && !bytes.Equal(got, garbage) {
				t.Errorf("%s does not hold the garbage (%d bytes, want %d)", filepath.Base(moved[0]), len(got), len(garbage))
			}
			c.say("turn after the recovery")
			c.checkRows("after the recovery")
			e := c.storeWriteEntry("after the recovery")
			if e.Class != "corrupt" || !strings.Contains(e.Text, "moved aside") {
				t.Errorf("store_write entry after the recovery: %+v, want class corrupt saying the file was moved aside", e)
			}
		})
	}
}

// TestE2EFaultDeletedDB: the session's .db (and its -wal, -shm) removed under a running
// serve. The next request is forwarded and refills a database at the same path with the
// whole conversation, seq in conversation order.
func TestE2EFaultDeletedDB(t *testing.T) {
	const sid = "e2e-fault-deleted"
	c := faultServe(t, sid)
	for _, s := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(c.path() + s); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	c.say("first turn after the delete")
	c.say("second turn after the delete")
	c.checkRows("after the delete")
}

// TestE2EFaultImmutableDB (Linux, root: chattr +i): the session's parked .db made immutable
// under a running serve. Requests are still forwarded; the health record has a store_write
// entry for the session; after chattr -i the next request brings the rows back, the whole
// conversation in seq order.
func TestE2EFaultImmutableDB(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("skipping: chattr +i needs Linux and root (CI runs the e2e tests as root)")
	}
	chattr, err := exec.LookPath("chattr")
	if err != nil {
		t.Skipf("skipping: chattr is not installed (e2fsprogs): %v", err)
	}
	const sid = "e2e-fault-immutable"
	c := faultServe(t, sid)
	parkWriter(t, c.srv)
	var locked []string
	for _, s := range []string{"", "-wal", "-shm"} {
		if _, err := os.Stat(c.path() + s); err == nil {
			locked = append(locked, c.path()+s)
		}
	}
	attr := func(flag string) {
		t.Helper()
		if out, err := exec.Command(chattr, append([]string{flag}, locked...)...).CombinedOutput(); err != nil {
			t.Skipf("skipping: chattr %s on the state dir's file system: %v %s", flag, err, out)
		}
	}
	attr("+i")
	t.Cleanup(func() { exec.Command(chattr, append([]string{"-i"}, locked...)...).Run() })
	c.say("first turn on the immutable db")
	c.say("second turn on the immutable db")
	if e := c.storeWriteEntry("on the immutable db"); e.Class != "read_only" || !strings.Contains(e.Hint, "chattr -i") {
		t.Errorf("store_write entry on the immutable db: %+v, want class read_only naming chattr -i", e)
	}
	attr("-i")
	c.say("turn after chattr -i")
	c.checkRows("after chattr -i")
}
