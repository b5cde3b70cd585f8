package proxy

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestWarmRequestsMatchColdOnes: whatever a request takes from the session's caches (the
// known shape, the thread caches, message.handed), it forwards the bytes and stores the rows
// that the same request forwards and stores when every message is parsed again. Each
// scenario's requests go through two proxies: warm keeps its caches, cold drops every
// session's cache before each request (as the 32 MiB cap does), so it parses and hands the
// store the whole history each time. The scenarios are what an agent client does to a
// session: a history that grows step by step past cuts (sticky, forced), subagents between
// the main thread's requests (more threads than a session caches), a first turn that grows
// or shrinks, an edited or rewound history, a compaction that starts the list anew, the same
// session in another format (whose request moves the thread's rows before a rewound request
// of the first format), no session header, a count_tokens request, a retried request, a
// failed store write (the thread caches cleared), a deleted session database, Claude Code's
// moving cache_control marker, mid-conversation system messages, Chat's legacy function
// calls, Responses reasoning items and string input.
//
// With WARM_EQUIV_DUMP set to a directory it writes each scenario's forwarded bodies and
// stored rows there, to compare with another build of the proxy.
func TestWarmRequestsMatchColdOnes(t *testing.T) {
	for _, sc := range weScenarios() {
		for _, trimAt := range []int{10_000_000, 1200, 500} {
			name := fmt.Sprintf("%s/trim-%d", sc.name, trimAt)
			t.Run(name, func(t *testing.T) {
				s := testSettings(trimAt)
				s.CompressOverTokens = 300
				warm, cold := newAdEnv(t, s), newAdEnv(t, s)
				defer warm.p.Close()
				defer cold.p.Close()
				var dump strings.Builder
				sids := map[string]bool{}
				cuts := 0
				for i, st := range sc.steps {
					if st.clear {
						weClearThreads(warm.p, st.sid)
					}
					if st.rmdb {
						weRemoveDB(t, warm, st.sid)
						weRemoveDB(t, cold, st.sid)
					}
					weDropCaches(cold.p)
					w, werr := weSend(warm, st)
					c, cerr := weSend(cold, st)
					if (werr == nil) != (cerr == nil) {
						t.Fatalf("step %d: warm error %v, cold error %v", i, werr, cerr)
					}
					if werr != nil {
						fmt.Fprintf(&dump, "step %d: error %v\n", i, werr)
						continue
					}
					sids[w.sess.sid] = true
					if w.sess.sid != c.sess.sid {
						t.Fatalf("step %d (%s): warm session %s, cold %s", i, st.label, w.sess.sid, c.sess.sid)
					}
					wb, cb := w.out.bytes(), c.out.bytes()
					if string(wb) != string(cb) {
						t.Fatalf("step %d (%s): warm forwarded\n%s\ncold forwarded\n%s", i, st.label, wb, cb)
					}
					got, want := weSummary(w), weSummary(c)
					if got != want {
						t.Fatalf("step %d (%s): warm %s\ncold %s", i, st.label, got, want)
					}
					if w.trimmed == 2 {
						cuts++
					}
					fmt.Fprintf(&dump, "step %d %s: %s\n%s\n", i, st.label, got, wb)
				}
				for _, sid := range weSorted(sids) {
					ws, cs := pvRead(t, warm, sid), pvRead(t, cold, sid)
					weCompareStores(t, sid, ws, cs)
					for _, r := range ws.rows {
						fmt.Fprintf(&dump, "%s row %d %s %s %s/%s in %d trimmed %v %q\n", sid, r.Seq, r.Fingerprint, r.Thread, r.Role, r.Kind, r.InContext, r.TrimmedAtSeq, r.Text)
					}
				}
				if trimAt == 500 && sc.cuts && cuts == 0 {
					t.Errorf("no request made a cut: the scenario tests no trim")
				}
				if dir := os.Getenv("WARM_EQUIV_DUMP"); dir != "" {
					must(t, os.MkdirAll(dir, 0o755))
					must(t, os.WriteFile(filepath.Join(dir, strings.ReplaceAll(name, "/", "_")+".txt"), []byte(dump.String()), 0o644))
				}
			})
		}
	}
}

// weSummary is what a rewrite reports besides the body.
func weSummary(r *rewritten) string {
	bp := "none"
	if r.breakpoints != nil {
		bp = fmt.Sprint(*r.breakpoints)
	}
	return fmt.Sprintf("thread %s trimmed %d chars %d whole %d breakpoints %s at %q prev %s", r.thread, r.trimmed, r.chars, r.wholeChars, bp, r.breakpointAt, r.replyPrev)
}

// weStep is one request of a scenario.
type weStep struct {
	label string
	tg    target
	sid   string
	body  []byte
	force bool // set the session's .force flag first (a forced cut)
	dry   bool // a count_tokens request: the view, nothing stored or cached
	clear bool // first clear the warm session's thread caches, as a failed row write does
	rmdb  bool // first delete the session's database file (checkSessionDB drops the cache)
}

type weScenario struct {
	name  string
	steps []weStep
	cuts  bool // at the lowest threshold some request must cut
}

// weRemoveDB deletes the session's database once its writes landed, as a user deleting
// the file does.
func weRemoveDB(t *testing.T, e *adEnv, sid string) {
	t.Helper()
	e.root.SettleAll()
	for _, ext := range []string{".db", ".db-wal", ".db-shm"} {
		if err := os.Remove(filepath.Join(e.root.Dir(), "sessions", sid+ext)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// weSend sends the step's request; a step without a session id sends no session header
// (the session is then named by the body).
func weSend(e *adEnv, st weStep) (*rewritten, error) {
	h := adHeader(st.sid)
	if st.force {
		if err := e.root.SetForce(st.sid); err != nil {
			return nil, err
		}
	}
	var sess *session
	return e.p.rewriteFor(st.tg, "", h, st.body, st.dry, &sess)
}

// weDropCaches drops every session's cache, as the 32 MiB cap does to other sessions.
func weDropCaches(p *Proxy) {
	p.mu.Lock()
	var ss []*session
	for _, s := range p.sessions {
		ss = append(ss, s)
	}
	p.mu.Unlock()
	for _, s := range ss {
		s.mu.Lock()
		s.dropCache()
		s.mu.Unlock()
	}
}

// weClearThreads clears the session's thread caches and nothing else, as settleStores does
// after a failed row write and checkSessionDB after the database file changed.
func weClearThreads(p *Proxy, sid string) {
	p.mu.Lock()
	s := p.sessions[sid]
	p.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	clear(s.threads)
	s.mu.Unlock()
}

func weSorted(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func weCompareStores(t *testing.T, sid string, warm, cold pvStore) {
	t.Helper()
	if len(warm.rows) != len(cold.rows) {
		t.Errorf("%s: warm stored %d rows, cold %d", sid, len(warm.rows), len(cold.rows))
	}
	for i := 0; i < len(warm.rows) && i < len(cold.rows); i++ {
		if !reflect.DeepEqual(warm.rows[i], cold.rows[i]) {
			t.Errorf("%s: row %d differs\n warm %+v\n cold %+v", sid, i+1, warm.rows[i], cold.rows[i])
			break
		}
	}
	if !reflect.DeepEqual(warm.lines, cold.lines) {
		t.Errorf("%s: warm stored %d lines, cold %d, or they differ", sid, len(warm.lines), len(cold.lines))
	}
	if !reflect.DeepEqual(warm.blobs, cold.blobs) {
		t.Errorf("%s: warm stored %d blobs, cold %d, or they differ", sid, len(warm.blobs), len(cold.blobs))
	}
}

// weConv is a conversation of turns user turns that starts with the user message first
// (one block or item per text): each turn a few tool steps, thinking on every other
// step, every fourth tool output long, then a reply.
func weConv(tag string, turns int, first ...string) []pvEvent {
	evs := []pvEvent{pvUser(first...)}
	id := 0
	for turn := 0; turn < turns; turn++ {
		if turn > 0 {
			evs = append(evs, pvUser(fmt.Sprintf("%s: turn %d, use tools", tag, turn)))
		}
		for step := 0; step < 1+turn%3; step++ {
			id++
			th := ""
			if (turn+step)%2 == 0 {
				th = fmt.Sprintf("%s thinks about step %d", tag, id)
			}
			cid := fmt.Sprintf("%s%d", strings.ReplaceAll(tag, " ", ""), id)
			evs = append(evs, pvEvent{kind: "assistant", thinking: th, calls: []pvCall{{id: cid, name: "Bash", input: fmt.Sprintf(`{"command": "ls %d"}`, id)}}})
			out := fmt.Sprintf("%s output %d", tag, id)
			if id%4 == 0 {
				out = strings.TrimSuffix(strings.Repeat(out+" is a long line of the listing\n", 200), "\n")
			}
			evs = append(evs, pvEvent{kind: "results", results: []pvResult{{cid, out}}})
		}
		evs = append(evs, pvEvent{kind: "assistant", texts: []string{fmt.Sprintf("%s: turn %d done", tag, turn)}})
	}
	return evs
}

// weEnds returns the lengths of the prefixes of evs an agent sends: those ending in a user
// message or tool results.
func weEnds(evs []pvEvent) []int {
	var out []int
	for n := 1; n <= len(evs); n++ {
		if evs[n-1].kind != "assistant" {
			out = append(out, n)
		}
	}
	return out
}

const weModel, weSystem = "claude-sonnet-4-5", "You are a careful coding agent."

func weScenarios() []weScenario {
	var out []weScenario
	reminder := "<system-reminder>\nThe project is at /work.\n</system-reminder>"
	for _, f := range pvFormats {
		f := f
		step := func(label, sid string, evs []pvEvent) weStep {
			return weStep{label: label, tg: f.tg, sid: sid, body: f.encode(weModel, weSystem, evs)}
		}
		grow := func(sid, label string, evs []pvEvent, ends []int) []weStep {
			var st []weStep
			for _, n := range ends {
				st = append(st, step(fmt.Sprintf("%s[:%d]", label, n), sid, evs[:n]))
			}
			return st
		}
		main := weConv("main", 7, reminder, "Fix the parser.")
		ends := weEnds(main)

		out = append(out, weScenario{name: f.name + "/grow", steps: grow("s", "main", main, ends), cuts: true})

		// subagents between the main thread's requests, sharing its first block
		sub := weConv("sub", 3, reminder, "Search for the parser's tests.")
		var inter []weStep
		subEnds := weEnds(sub)
		for k, n := range ends {
			inter = append(inter, step(fmt.Sprintf("main[:%d]", n), "s", main[:n]))
			if k < len(subEnds) {
				inter = append(inter, step(fmt.Sprintf("sub[:%d]", subEnds[k]), "s", sub[:subEnds[k]]))
			}
		}
		out = append(out, weScenario{name: f.name + "/subagent", steps: inter, cuts: true})

		// more threads than a session caches (maxThreads), round robin
		var many []weStep
		var convs [][]pvEvent
		for k := 0; k < maxThreads+2; k++ {
			convs = append(convs, weConv(fmt.Sprintf("agent%d", k), 2, reminder, fmt.Sprintf("Subtask %d.", k)))
		}
		for round := 0; round < 4; round++ {
			for k, c := range convs {
				e := weEnds(c)
				n := e[min(round, len(e)-1)]
				many = append(many, step(fmt.Sprintf("agent%d[:%d]", k, n), "s", c[:n]))
			}
		}
		out = append(out, weScenario{name: f.name + "/many-threads", steps: many})

		// a first turn that grows by a second user message, then shrinks back
		one := weConv("ft", 4, "Fix the parser.")
		two := append([]pvEvent{pvUser("Fix the parser."), pvUser("Also the lexer.")}, one[1:]...)
		var ft []weStep
		ft = append(ft, step("one[:1]", "s", one[:1]), step("two[:2]", "s", two[:2]), step("one[:3]", "s", one[:3]))
		ft = append(ft, grow("s", "two", two, weEnds(two)[1:6])...)
		ft = append(ft, grow("s", "one", one, weEnds(one)[2:7])...)
		ft = append(ft, grow("s", "two", two, weEnds(two)[6:])...)
		out = append(out, weScenario{name: f.name + "/first-turn", steps: ft, cuts: true})

		// an edited message in the middle, then the original again; a rewind
		at := 5 // the first tool results from the sixth event on
		for main[at].kind != "results" {
			at++
		}
		edited := append([]pvEvent(nil), main...)
		edited[at] = pvEvent{kind: "results", results: []pvResult{{main[at].results[0].id, "edited output"}}}
		var ed []weStep
		ed = append(ed, grow("s", "main", main, ends[:8])...)
		ed = append(ed, grow("s", "edited", edited, ends[6:12])...)
		ed = append(ed, grow("s", "main", main, ends[10:14])...)
		ed = append(ed, step("main[:4]", "s", main[:4]))
		ed = append(ed, grow("s", "main", main, ends[14:])...)
		out = append(out, weScenario{name: f.name + "/edit-rewind", steps: ed, cuts: true})

		// OpenCode-style compaction: the history is replaced by a summary, then grows again
		summary := weConv("after", 4, "Summary of the session so far: the parser is fixed, the lexer is next.")
		var cp []weStep
		cp = append(cp, grow("s", "main", main, ends[:12])...)
		cp = append(cp, grow("s", "after", summary, weEnds(summary))...)
		cp = append(cp, step("main[:end]", "s", main))
		out = append(out, weScenario{name: f.name + "/compaction", steps: cp, cuts: true})

		// forced cuts, count_tokens, a retried request, a failed store write and a deleted
		// database between warm requests
		var fc []weStep
		for k, st := range grow("s", "main", main, ends) {
			switch k % 7 {
			case 2:
				fc = append(fc, st) // sent twice
			case 6:
				st.rmdb = true
			case 3:
				st.force = true
			case 4:
				d := st
				d.dry, d.label = true, st.label+" (count_tokens)"
				fc = append(fc, d)
			case 5:
				st.clear = true
			}
			fc = append(fc, st)
		}
		out = append(out, weScenario{name: f.name + "/force-dry-clear", steps: fc, cuts: true})

		// no session header: each conversation's session is named by its body (the
		// fallback id), the main thread's requests between a subagent's
		var nh []weStep
		for k, n := range ends {
			nh = append(nh, step(fmt.Sprintf("main[:%d]", n), "", main[:n]))
			if k < len(subEnds) {
				nh = append(nh, step(fmt.Sprintf("sub[:%d]", subEnds[k]), "", sub[:subEnds[k]]))
			}
		}
		out = append(out, weScenario{name: f.name + "/no-header", steps: nh, cuts: true})
	}

	// the same session and conversation in all three formats, in turn; with a GPT model
	// behind Responses, whose reasoning is not signed thinking (never stripped)
	for _, gpt := range []bool{false, true} {
		main := weConv("main", 6, "Fix the parser.")
		var sw []weStep
		for k, n := range weEnds(main) {
			f := pvFormats[(k/2)%len(pvFormats)]
			model := weModel
			if gpt && f.tg == adResponses {
				model = "gpt-5"
			}
			sw = append(sw, weStep{label: fmt.Sprintf("%s main[:%d]", f.name, n), tg: f.tg, sid: "s", body: f.encode(model, weSystem, main[:n])})
		}
		name := "format-switch"
		if gpt {
			name += "-gpt"
		}
		out = append(out, weScenario{name: name, steps: sw, cuts: true})
	}
	// a thread's rows moved by a request of another format, then a rewound request of the
	// first format
	{
		main := weConv("main", 6, "Fix the parser.")
		e := weEnds(main)
		chat, anth := pvFormats[1], pvFormats[0]
		st := func(f pvFormat, n int) weStep {
			return weStep{label: fmt.Sprintf("%s main[:%d]", f.name, n), tg: f.tg, sid: "s", body: f.encode(weModel, weSystem, main[:n])}
		}
		var rw []weStep
		for _, n := range e[:8] {
			rw = append(rw, st(chat, n))
		}
		for _, n := range e[8:] {
			rw = append(rw, st(anth, n))
		}
		rw = append(rw, st(chat, e[7]), st(chat, e[6]), st(chat, e[7]))
		out = append(out, weScenario{name: "format-rewind", steps: rw, cuts: true})
	}
	out = append(out, weRawScenarios()...)
	return out
}

// weRawScenarios are written as the wire messages themselves: what the event encoders
// do not produce.
func weRawScenarios() []weScenario {
	var out []weScenario
	long := func(tag string) string {
		return strings.TrimSuffix(strings.Repeat(tag+" is a long line of the output\n", 200), "\n")
	}
	// grows sends every prefix of msgs that ends at a request point (ok says which).
	grows := func(tg target, body func([]string) []byte, msgs []string, ok func(n int) bool) []weStep {
		var st []weStep
		for n := 1; n <= len(msgs); n++ {
			if ok(n) {
				st = append(st, weStep{label: fmt.Sprintf("[:%d]", n), tg: tg, sid: "s", body: body(msgs[:n])})
			}
		}
		return st
	}
	userEnd := func(msgs []string) func(int) bool {
		return func(n int) bool {
			return !strings.Contains(msgs[n-1], `"role":"assistant"`) && !strings.Contains(msgs[n-1], `"role":"system"`) &&
				!strings.Contains(msgs[n-1], `"type":"reasoning"`) && !strings.Contains(msgs[n-1], `"type":"function_call"`)
		}
	}

	// Anthropic: Claude Code's cache_control marker on the last message (it moves every
	// request), and a mid-conversation system message after a user message.
	{
		var msgs []string
		for turn := 0; turn < 8; turn++ {
			msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":[{"type":"text","text":"turn %d, use tools"}]}`, turn))
			if turn%3 == 1 {
				msgs = append(msgs, fmt.Sprintf(`{"role":"system","content":"mid-conversation note %d"}`, turn))
			}
			for s := 0; s < 2; s++ {
				id := fmt.Sprintf("t%d_%d", turn, s)
				msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":"think %s","signature":"sig-%s"},{"type":"tool_use","id":"toolu_%s","name":"Bash","input":{"command":"ls"}}]}`, id, id, id))
				out := "short " + id
				if s == 1 {
					out = long(id)
				}
				msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%s","content":%s}]}`, id, pvJSON(out)))
			}
			msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":[{"type":"text","text":"turn %d done"}]}`, turn))
		}
		mark := func(m string) string {
			// the marker goes on the last block of the last message
			i := strings.LastIndex(m, "}]}")
			if i < 0 {
				return m
			}
			return m[:i] + `,"cache_control":{"type":"ephemeral"}` + m[i:]
		}
		body := func(ms []string) []byte {
			ms = append([]string(nil), ms...)
			ms[len(ms)-1] = mark(ms[len(ms)-1])
			return []byte(`{"model":"claude-sonnet-4-5","max_tokens":4096,"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],"thinking":{"type":"enabled","budget_tokens":2048},"messages":[` + strings.Join(ms, ",") + `]}`)
		}
		ok := func(n int) bool {
			return !strings.Contains(msgs[n-1], `"role":"assistant"`) && !(n < len(msgs) && strings.Contains(msgs[n], `"role":"system"`))
		}
		out = append(out, weScenario{name: "anthropic-raw/markers-system", steps: grows(adAnthropic, body, msgs, ok), cuts: true})
	}

	// Chat: legacy function calls (paired by name and order), a mid-conversation system
	// message, reasoning_content.
	{
		msgs := []string{`{"role":"system","content":"You are helpful."}`, `{"role":"user","content":"Weather, please."}`}
		for turn := 0; turn < 8; turn++ {
			if turn > 0 {
				msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"turn %d"}`, turn))
			}
			if turn%3 == 2 {
				msgs = append(msgs, fmt.Sprintf(`{"role":"system","content":"note %d"}`, turn))
			}
			for s := 0; s < 2; s++ {
				out := fmt.Sprintf("sunny %d %d", turn, s)
				if s == 1 {
					out = long(fmt.Sprintf("w%d", turn))
				}
				msgs = append(msgs,
					fmt.Sprintf(`{"role":"assistant","content":null,"reasoning_content":"why %d %d","function_call":{"name":"get_weather","arguments":"{\"city\":\"c%d\"}"}}`, turn, s, s),
					fmt.Sprintf(`{"role":"function","name":"get_weather","content":%s}`, pvJSON(out)))
			}
			msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":"turn %d done"}`, turn))
		}
		body := func(ms []string) []byte {
			return []byte(`{"model":"claude-sonnet-4-5","messages":[` + strings.Join(ms, ",") + `],"stream":true}`)
		}
		out = append(out, weScenario{name: "chat-raw/legacy-system", steps: grows(adChat, body, msgs, userEnd(msgs)), cuts: true})
	}

	// Responses: a string input first, then the list; reasoning items with encrypted
	// content (signed thinking for a Claude model: stripped before a cut) and items with
	// ids; and the same through the Codex backend.
	for _, tc := range []struct {
		name  string
		tg    target
		model string
	}{{"responses-raw/claude", adResponses, "claude-sonnet-4-5"}, {"responses-raw/gpt", adResponses, "gpt-5"}, {"codex-raw/gpt", adCodex, "gpt-5-codex"}} {
		msgs := []string{`{"type":"message","role":"user","content":"Fix the parser."}`}
		for turn := 0; turn < 8; turn++ {
			if turn > 0 {
				msgs = append(msgs, fmt.Sprintf(`{"type":"message","role":"user","content":[{"type":"input_text","text":"turn %d"}]}`, turn))
			}
			for s := 0; s < 2; s++ {
				id := fmt.Sprintf("%d_%d", turn, s)
				out := "ok " + id
				if s == 1 {
					out = long(id)
				}
				msgs = append(msgs,
					fmt.Sprintf(`{"type":"reasoning","id":"rs_%s","summary":[{"type":"summary_text","text":"plan %s"}],"encrypted_content":"enc-%s"}`, id, id, id),
					fmt.Sprintf(`{"type":"function_call","id":"fc_%s","call_id":"call_%s","name":"shell","arguments":"{\"cmd\":\"ls\"}"}`, id, id),
					fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%s","output":%s}`, id, pvJSON(out)))
			}
			msgs = append(msgs, fmt.Sprintf(`{"type":"message","id":"msg_%d","role":"assistant","content":[{"type":"output_text","text":"turn %d done","annotations":[]}]}`, turn, turn))
		}
		model := tc.model
		body := func(ms []string) []byte {
			if len(ms) == 1 {
				return []byte(`{"model":"` + model + `","instructions":"sys","input":"Fix the parser.","stream":true}`)
			}
			return []byte(`{"model":"` + model + `","instructions":"sys","input":[` + strings.Join(ms, ",") + `],"stream":true,"include":["reasoning.encrypted_content"]}`)
		}
		out = append(out, weScenario{name: tc.name, steps: grows(tc.tg, body, msgs, userEnd(msgs)), cuts: true})
	}
	return out
}
