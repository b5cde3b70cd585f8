package proxy

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o600) }

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return b
}

func globOne(t *testing.T, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) != 1 {
		t.Fatalf("files matching %s: %v (%v), want one", filepath.Base(pattern), m, err)
	}
	return m[0]
}

// replyFormat drives one API format for the reply tests: the client's items, its request
// body, and what it keeps of an answer (as the agents do: research/clients.md).
type replyFormat struct {
	name, path string
	header     func(sid string) http.Header
	user       func(text string) json.RawMessage
	toolResult func(callID, out string) json.RawMessage
	body       func(sid string, items []json.RawMessage, stream bool) []byte
	// read returns the items the client appends to its history and the first call id.
	read func(t *testing.T, r io.Reader, stream bool) ([]json.RawMessage, string)
}

func replyFormats(t *testing.T) []replyFormat {
	return []replyFormat{
		{
			name: "anthropic", path: "/claude-code/v1/messages",
			header: func(sid string) http.Header {
				h := http.Header{}
				h.Set("Content-Type", "application/json")
				h.Set("X-Api-Key", "dummy-key")
				h.Set("Anthropic-Version", "2023-06-01")
				h.Set("X-Claude-Code-Session-Id", sid)
				return h
			},
			user: func(text string) json.RawMessage {
				return simBody(t, "role", "user", "content", text)
			},
			toolResult: func(id, out string) json.RawMessage {
				return simBody(t, "role", "user", "content", []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": out}})
			},
			body: func(sid string, items []json.RawMessage, stream bool) []byte {
				return simBody(t, "model", "claude-sonnet-4-5", "max_tokens", 4096, "messages", simList(items), "stream", stream,
					"tools", []any{map[string]any{"name": "Bash", "description": "Run", "input_schema": map[string]any{"type": "object"}}})
			},
			read: func(t *testing.T, r io.Reader, stream bool) ([]json.RawMessage, string) {
				var content []any
				if stream {
					content, _ = readSSE(t, r)
				} else {
					var msg struct{ Content []any }
					must(t, json.NewDecoder(r).Decode(&msg))
					content = msg.Content
				}
				id := ""
				for _, b := range content {
					if m := b.(map[string]any); m["type"] == "tool_use" && id == "" {
						id = m["id"].(string)
					}
				}
				return []json.RawMessage{simJSON(t, map[string]any{"role": "assistant", "content": content})}, id
			},
		},
		{
			name: "chat", path: routeOpenCodeChat,
			header: func(sid string) http.Header {
				h := http.Header{}
				h.Set("Content-Type", "application/json")
				h.Set("Authorization", "Bearer dummy-key")
				h.Set("X-Session-Id", sid)
				return h
			},
			user: func(text string) json.RawMessage {
				return simBody(t, "role", "user", "content", text)
			},
			toolResult: func(id, out string) json.RawMessage {
				return simBody(t, "role", "tool", "tool_call_id", id, "content", out)
			},
			body: func(sid string, items []json.RawMessage, stream bool) []byte {
				return simBody(t, "model", "gpt-4.1", "messages", simList(items), "stream", stream,
					"tools", []any{map[string]any{"type": "function", "function": map[string]any{"name": "Bash", "parameters": map[string]any{"type": "object"}}}})
			},
			read: func(t *testing.T, r io.Reader, stream bool) ([]json.RawMessage, string) {
				if !stream {
					var resp struct {
						Choices []struct{ Message json.RawMessage }
					}
					must(t, json.NewDecoder(r).Decode(&resp))
					msg := resp.Choices[0].Message
					var m struct {
						ToolCalls []struct{ ID string } `json:"tool_calls"`
					}
					must(t, json.Unmarshal(msg, &m))
					id := ""
					if len(m.ToolCalls) > 0 {
						id = m.ToolCalls[0].ID
					}
					return []json.RawMessage{msg}, id
				}
				rep := readChatSSE(t, r)
				msg := map[string]any{"role": "assistant", "content": rep.content}
				id := ""
				if len(rep.calls) > 0 {
					calls := make([]any, len(rep.calls))
					for i, tc := range rep.calls {
						calls[i] = map[string]any{"id": tc.id, "type": "function", "function": map[string]any{"name": tc.name, "arguments": tc.arguments}}
					}
					msg["tool_calls"], id = calls, rep.calls[0].id
				}
				return []json.RawMessage{simJSON(t, msg)}, id
			},
		},
		{
			name: "responses", path: routeCodexResponses,
			header: func(sid string) http.Header {
				h := http.Header{}
				h.Set("Content-Type", "application/json")
				h.Set("Authorization", "Bearer dummy-key")
				return h
			},
			user: func(text string) json.RawMessage {
				return simBody(t, "type", "message", "role", "user", "content", []any{map[string]any{"type": "input_text", "text": text}})
			},
			toolResult: func(id, out string) json.RawMessage {
				return simBody(t, "type", "function_call_output", "call_id", id, "output", out)
			},
			body: func(sid string, items []json.RawMessage, stream bool) []byte {
				return simBody(t, "model", "gpt-5-codex", "input", simList(items), "stream", stream, "store", false, "prompt_cache_key", sid,
					"tools", []any{map[string]any{"type": "function", "name": "Bash", "parameters": map[string]any{"type": "object"}}})
			},
			read: func(t *testing.T, r io.Reader, stream bool) ([]json.RawMessage, string) {
				var items []json.RawMessage
				if stream {
					for _, o := range readResponsesSSE(t, r) {
						items = append(items, o.raw)
					}
				} else {
					var resp struct{ Output []json.RawMessage }
					must(t, json.NewDecoder(r).Decode(&resp))
					items = resp.Output
				}
				id := ""
				for _, it := range items {
					var o struct {
						CallID string `json:"call_id"`
					}
					_ = json.Unmarshal(it, &o)
					if o.CallID != "" && id == "" {
						id = o.CallID
					}
				}
				return items, id
			},
		},
	}
}

// replyScript answers a question about the key with a text and a tool call, a tool result
// with the final answer, and anything else with a short text.
func replyScript(req *fakeupstream.Request) fakeupstream.Reply {
	if req.EndsWithToolResults() {
		return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("The answer is ZEBRA-42.")}}
	}
	if !strings.Contains(req.LastUserText(), "key") {
		return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("You're welcome.")}}
	}
	return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("Let me look."),
		fakeupstream.ToolUse("Bash", map[string]any{"command": "ls", "description": "List"})}}
}

// storedRows reads (role kind name text) of every row in seq order from a connection of its
// own, without waiting for the proxy's write queue: what a reader sees right now.
func storedRows(t *testing.T, r *rig, sid string) []string {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+r.root.Dir()+"/sessions/"+sid+".db?mode=ro")
	must(t, err)
	defer db.Close()
	q, err := db.Query(`SELECT role, kind, coalesce(name, ''), text, in_context FROM messages ORDER BY seq`)
	must(t, err)
	defer q.Close()
	var out []string
	for q.Next() {
		var role, kind, name, text string
		var in int
		must(t, q.Scan(&role, &kind, &name, &text, &in))
		out = append(out, fmt.Sprintf("%s %s %s %s in=%d", role, kind, name, text, in))
	}
	must(t, q.Err())
	return out
}

func postItems(t *testing.T, r *rig, f replyFormat, sid string, items []json.RawMessage, stream bool) ([]json.RawMessage, string) {
	t.Helper()
	resp, fail := simPost(t, http.DefaultClient, r.srv.URL+f.path, f.body(sid, items, stream), f.header(sid))
	if fail != "" {
		t.Fatal(fail)
	}
	defer resp.Body.Close()
	return f.read(t, resp.Body, stream)
}

// The reply is in the session database the moment the client has read the response, for
// every format, streamed or not (issue 16, items 3 and 4), and the next request, which
// carries it back, neither stores it twice nor out of order: its rows are the ones the
// request gives it.
func TestTheReplyIsStoredBeforeTheClientHasIt(t *testing.T) {
	for _, f := range replyFormats(t) {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", f.name, stream), func(t *testing.T) {
				r := newSimRig(t, testSettings(1_000_000), fakeupstream.Options{Reply: replyScript})
				sid := "ses-reply-" + f.name
				items := []json.RawMessage{f.user("Where is the key?")}
				got, callID := postItems(t, r, f, sid, items, stream)
				want := []string{
					"user text  Where is the key? in=1",
					"assistant text  Let me look. in=1",
					`assistant tool_use Bash {"command":"ls","description":"List"} in=1`,
				}
				if rows := storedRows(t, r, sid); strings.Join(rows, "\n") != strings.Join(want, "\n") {
					t.Fatalf("rows right after the first response:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
				}
				if callID == "" {
					t.Fatal("the first answer has no tool call")
				}
				items = append(append(items, got...), f.toolResult(callID, "key.txt"))
				postItems(t, r, f, sid, items, stream)
				want = append(want, "tool tool_result Bash key.txt in=1", "assistant text  The answer is ZEBRA-42. in=1")
				if rows := storedRows(t, r, sid); strings.Join(rows, "\n") != strings.Join(want, "\n") {
					t.Fatalf("rows right after the last response:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
				}
				// the search the agent's tools run finds the last reply at once
				rd, err := r.root.OpenReader(sid)
				must(t, err)
				defer rd.Close()
				res, err := rd.Search(t.Context(), store.SearchOptions{Query: "ZEBRA-42"})
				must(t, err)
				if len(res.Hits) != 1 || !strings.Contains(res.Hits[0].Excerpt, "ZEBRA-42") {
					t.Fatalf("search for the last reply: %+v", res)
				}
			})
		}
	}
}

// Without the reply store (the behaviour before it), the last reply is not in the store.
func TestTheLastReplyIsMissingWithoutTheReplyStore(t *testing.T) {
	f := replyFormats(t)[0]
	r := newSimRig(t, testSettings(1_000_000), fakeupstream.Options{Reply: replyScript})
	r.proxy.noReplyRows = true
	sid := "ses-no-reply"
	postItems(t, r, f, sid, []json.RawMessage{f.user("Where is the key?")}, true)
	r.root.SettleAll()
	if rows := storedRows(t, r, sid); len(rows) != 1 {
		t.Fatalf("rows without the reply store: %q, want only the user row", rows)
	}
}

// A stream cut mid-reply stores the text that arrived and a marker row, and no tool_use row
// (nothing would ever pair it); the client's retry then stores its answer after them.
func TestACutStreamStoresWhatArrivedAndNoToolUse(t *testing.T) {
	for _, f := range replyFormats(t) {
		for _, cut := range []string{"truncated", "error event"} {
			t.Run(f.name+"/"+cut, func(t *testing.T) {
				script := func(req *fakeupstream.Request) fakeupstream.Reply {
					rp := fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("Partial answer TAPIR-7."),
						fakeupstream.ToolUse("Bash", map[string]any{"command": "ls"})}}
					if cut == "truncated" {
						rp.Truncate = true
					} else {
						rp.StreamError, rp.StreamErrorAfter = fakeupstream.Overloaded(), 1
					}
					return rp
				}
				r := newSimRig(t, testSettings(1_000_000), fakeupstream.Options{Reply: script})
				sid := "ses-cut-" + f.name
				resp, fail := simPost(t, http.DefaultClient, r.srv.URL+f.path, f.body(sid, []json.RawMessage{f.user("Go.")}, true), f.header(sid))
				if fail != "" {
					t.Fatal(fail)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				r.root.SettleAll()
				rows := storedRows(t, r, sid)
				joined := strings.Join(rows, "\n")
				if !strings.Contains(joined, "assistant text  Partial answer TAPIR-7. in=1") {
					t.Fatalf("the text that arrived is not stored:\n%s", joined)
				}
				if strings.Contains(joined, "tool_use") {
					t.Fatalf("a cut reply stored a tool_use row:\n%s", joined)
				}
				last := rows[len(rows)-1]
				if !strings.Contains(last, "[smarter-compact: reply cut off") {
					t.Fatalf("the last row is %q, want the cut marker", last)
				}
				if cut == "truncated" && !strings.Contains(last, "tool calls not stored: Bash") {
					t.Fatalf("the marker does not name the tool call that started: %q", last)
				}
			})
		}
	}
}

// A session database deleted under a running proxy is refilled by the next request in
// conversation order: the history the proxy had cached (and freed the text of) is stored
// again whole, before the new turn (issue 16, item 5).
func TestADeletedDatabaseIsRefilledInOrder(t *testing.T) {
	for _, f := range replyFormats(t) {
		t.Run(f.name, func(t *testing.T) {
			r := newSimRig(t, testSettings(1_000_000), fakeupstream.Options{Reply: replyScript})
			sid := "ses-deleted-" + f.name
			items := []json.RawMessage{f.user("Where is the key?")}
			got, callID := postItems(t, r, f, sid, items, true)
			items = append(append(items, got...), f.toolResult(callID, "key.txt"))
			got, _ = postItems(t, r, f, sid, items, true)
			items = append(items, got...)
			r.root.SettleAll()
			want := storedRows(t, r, sid)
			for _, s := range []string{".db", ".db-wal", ".db-shm"} {
				must(t, removeIfExists(r.root.Dir()+"/sessions/"+sid+s))
			}
			items = append(items, f.user("Thanks."))
			postItems(t, r, f, sid, items, true)
			r.root.SettleAll()
			rows := storedRows(t, r, sid)
			if len(rows) < len(want) || strings.Join(rows[:len(want)], "\n") != strings.Join(want, "\n") {
				t.Fatalf("refilled rows:\n%s\nwant first:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
			}
			if !strings.HasPrefix(rows[len(want)], "user text  Thanks.") {
				t.Fatalf("row after the history is %q, want the new user turn", rows[len(want)])
			}
		})
	}
}

// A session database found not to be a database when serve starts is moved aside by the
// session's next request, which stores the whole history it carries in a fresh one, in
// order; a fail_open event and one log line say so.
func TestACorruptDatabaseIsMovedAsideAndRefilled(t *testing.T) {
	f := replyFormats(t)[0]
	r := newSimRig(t, testSettings(1_000_000), fakeupstream.Options{Reply: replyScript})
	sid := "ses-corrupt"
	items := []json.RawMessage{f.user("Where is the key?")}
	got, callID := postItems(t, r, f, sid, items, true)
	items = append(append(items, got...), f.toolResult(callID, "key.txt"))
	got, _ = postItems(t, r, f, sid, items, true)
	items = append(items, got...)
	must(t, r.root.Close()) // serve stops
	path := r.root.Dir() + "/sessions/" + sid
	must(t, writeFile(path+".db", bytes.Repeat([]byte("not a database "), 500)))
	root, err := store.Open(r.root.Dir()) // and starts again
	must(t, err)
	t.Cleanup(func() { root.Close() })
	r = rigAround2(t, r, root)
	for _, text := range []string{"Thanks.", "Bye."} {
		items = append(items, f.user(text))
		got, _ = postItems(t, r, f, sid, items, true)
		items = append(items, got...)
	}
	r.root.SettleAll()
	want := []string{
		"user text  Where is the key? in=1",
		"assistant text  Let me look. in=1",
		`assistant tool_use Bash {"command":"ls","description":"List"} in=1`,
		"tool tool_result Bash key.txt in=1",
		"assistant text  The answer is ZEBRA-42. in=1",
		"user text  Thanks. in=1",
		"assistant text  You're welcome. in=1",
		"user text  Bye. in=1",
		"assistant text  You're welcome. in=1",
	}
	if rows := storedRows(t, r, sid); strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("refilled rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	moved := globOne(t, path+".db.corrupt-*")
	if b := readFile(t, moved); !bytes.HasPrefix(b, []byte("not a database")) {
		t.Fatalf("moved file %s does not hold the broken bytes", moved)
	}
	db := sessionDB(t, r, sid)
	var n int
	must(t, db.QueryRow(`SELECT count(*) FROM events WHERE kind = 'fail_open' AND error = 'store_not_a_database'`).Scan(&n))
	if n != 1 {
		t.Fatalf("%d fail_open events for the recovery, want 1", n)
	}
}

// rigAround2 serves a second proxy over root, in front of r's fake upstream: serve started
// again over the same store.
func rigAround2(t *testing.T, r *rig, root *store.Root) *rig {
	logs := &logBuf{}
	s := testSettings(1_000_000)
	s.Upstreams = simUpstreams(r.fake)
	p := New(s, allOn{}, root, slog.New(slog.NewTextHandler(logs, nil)))
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return &rig{fake: r.fake, proxy: p, srv: srv, root: root, logs: logs}
}
