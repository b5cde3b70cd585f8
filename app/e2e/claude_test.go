//go:build e2e

package e2e_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy"
	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

// trimAtTokens is CONTEXT_TRIM_AT_TOKENS for the Claude Code session. Claude Code 2.1.332's
// first -p request is about 49 KB: 19.6k tokens by the uncalibrated estimate (2.5 chars per
// token), about 16k by the fake's count (3 bytes per token) that calibrates every later
// estimate. 24000 keeps the first request whole, and the session crosses it in turn 2.
const trimAtTokens = 24000

// e2eTurn is one `claude -p` invocation of the scripted session: the prompt, and how many
// tool calls the fake model makes before its final answer. Every file the tools read is
// stepLines lines; a step's output holds its marker, "E2E-OUT t=<turn> s=<step>", once.
type e2eTurn struct {
	prompt string
	steps  int
}

const stepLines = 60

var e2eTurns = []e2eTurn{
	{"E2E-TURN 1: read the three data files of batch 1, one per tool call, then summarise them.", 3},
	{"E2E-TURN 2: now read the three data files of batch 2 the same way.", 3},
	{"E2E-TURN 3: read all eight data files of batch 3, one at a time, and report the last value.", 8},
}

// TestE2EClaudeCodeTrims drives the real Claude Code CLI through the real `smarter-compact
// serve` (a subprocess) against the strict fake Anthropic upstream, for a session of three
// `claude -p` turns (--continue) with Bash and Read tool loops that outgrow trimAtTokens.
// It checks that the fake accepted every request, that each carried the standing instruction
// and, from the first trim on, the pointer, and that the session database holds every
// message with the trimmed ones out of context.
func TestE2EClaudeCodeTrims(t *testing.T) {
	claude := claudeCLI.findLogged(t)
	bin := buildBinary(t)
	for _, tc := range []struct {
		model string
		args  []string // extra flags; none gives Claude Code's default model
	}{
		// Binds thinking signatures to the prefix, so every trim must strip thinking.
		{model: "claude-opus-5-5"},
		// Binds nothing and requires thinking first in an open tool loop; Claude Code also adds a
		// role "system" message ("<total_tokens>… tokens left</total_tokens>") after every
		// tool result for it, so the trimmed view must keep role "system" messages legal.
		{model: "claude-mythos-5-1", args: []string{"--model", "claude-mythos-5-1"}},
	} {
		t.Run(tc.model, func(t *testing.T) { testClaudeCodeSession(t, claude, bin, tc.model, tc.args) })
	}
}

// runClaudeScript runs the real Claude Code (claude) through serve (bin) for the three turns
// of e2eTurns, one `claude -p` per turn (--continue after the first) with extraArgs, against
// the strict fake answering with a script over a fresh working directory, trim_at_tokens =
// trimAtTokens. It fails the test at the first turn that fails or does not print the fake's
// final text, and returns the rig, the runs and the time all turns took.
func runClaudeScript(t *testing.T, claude, bin string, extraArgs ...string) (fake *fakeupstream.Server, srv *serveProc, tp *tap, runs []agentRun, took time.Duration) {
	t.Helper()
	work, home := agentDirs(t)
	sc := &script{dir: filepath.Join(work, "data")}
	sc.writeFiles(t)

	fake, srv, tp = startRig(t, bin, sc.reply, func(fakeURL string) []string {
		return []string{"SMARTER_COMPACT_UPSTREAM_ANTHROPIC=" + fakeURL, "CONTEXT_TRIM_AT_TOKENS=" + strconv.Itoa(trimAtTokens)}
	})

	env := claudeEnv(home, tp.URL)
	start := time.Now()
	for i, turn := range e2eTurns {
		args := append(claudeTurnArgs(i, turn.prompt), extraArgs...)
		run := runAgent(t, 3*time.Minute, claude, work, env, args...)
		runs = append(runs, run)
		if run.err != nil {
			t.Fatalf("turn %d: claude failed:\n%s\n%s", i+1, run, diagnose(fake, srv))
		}
		if want := finalText(i+1, turn.steps); !strings.Contains(run.stdout, want) {
			t.Fatalf("turn %d: claude did not print the fake's final text %q:\n%s\n%s", i+1, want, run, diagnose(fake, srv))
		}
	}
	return fake, srv, tp, runs, time.Since(start)
}

// claudeTurnArgs returns the arguments of `claude -p` for turn i (0-based) of a scripted
// session: the prompt with the Bash tool allowed, and --continue after the first turn.
func claudeTurnArgs(i int, prompt string) []string {
	args := []string{"-p", prompt, "--allowedTools", "Bash"}
	if i > 0 {
		args = append(args, "--continue")
	}
	return args
}

func testClaudeCodeSession(t *testing.T, claude, bin, model string, modelArgs []string) {
	fake, srv, tp, runs, took := runClaudeScript(t, claude, bin, modelArgs...)
	if err := srv.stop(); err != nil { // closes the session database cleanly before we read it
		t.Fatalf("%v\n%s", err, srv.log)
	}

	// The upstream side: every request accepted, in the model asked for, on one session.
	recs := acceptedRequests(t, fake, srv)
	sent := tp.requests()
	if len(recs) != len(sent) {
		t.Errorf("Claude Code sent %d requests, the upstream received %d", len(sent), len(recs))
	}
	var bodies []upstreamBody
	sid := ""
	for i, r := range recs {
		if !strings.HasPrefix(r.Path, "/v1/messages") || r.Method != "POST" {
			t.Fatalf("request %d: %s %s: the proxy sent something other than a Messages call upstream", i+1, r.Method, r.Path)
		}
		h := r.Header.Get("X-Claude-Code-Session-Id")
		s, ok := store.SanitizeSID(h)
		if !ok {
			t.Fatalf("request %d: no usable X-Claude-Code-Session-Id header (%q)", i+1, h)
		}
		if sid == "" {
			sid = s
		} else if s != sid {
			t.Fatalf("request %d: session id %q, want %q: --continue should keep the session", i+1, s, sid)
		}
		b := parseUpstream(t, i+1, r.Body)
		if b.Model != model {
			t.Errorf("request %d: model %q, want %q", i+1, b.Model, model)
		}
		seq, _ := strconv.Atoi(r.Header.Get(seqHeader))
		if seq < 1 || seq > len(sent) {
			t.Fatalf("request %d: %s header %q does not name a request the tap recorded", i+1, seqHeader, r.Header.Get(seqHeader))
		}
		b.sent = len(sent[seq-1].body)
		b.received = len(r.Body)
		bodies = append(bodies, b)
	}
	if len(bodies) == 0 {
		t.Fatal("the fake upstream received no request")
	}

	// Standing instruction on every request; the pointer on every request from the first trim.
	firstTrim, lastDropped := -1, 0
	for i, b := range bodies {
		if n := b.countSystemText(proxy.StandingInstruction); n != 1 {
			t.Errorf("request %d: system carries the standing instruction %d times, want 1", i+1, n)
		}
		ptr, n := b.pointer(sid)
		if ptr == "" {
			if firstTrim >= 0 {
				t.Errorf("request %d: no pointer for session %s, but request %d was trimmed", i+1, sid, firstTrim+1)
			}
			continue
		}
		if firstTrim < 0 {
			firstTrim = i
		}
		if ptr != proxy.PointerText(sid, n) {
			t.Errorf("request %d: pointer text differs from proxy.PointerText(%q, %d):\n%s", i+1, sid, n, ptr)
		}
		if b.pointerCount != 1 {
			t.Errorf("request %d: %d pointer blocks, want 1", i+1, b.pointerCount)
		}
		if n < 1 || n < lastDropped {
			t.Errorf("request %d: the pointer says %d messages dropped, after %d before: the cut is sticky", i+1, n, lastDropped)
		}
		lastDropped = n
	}
	if firstTrim < 0 {
		t.Fatalf("no request was trimmed: the session never reached CONTEXT_TRIM_AT_TOKENS=%d (largest request %d bytes); lower it or add tool steps",
			trimAtTokens, largest(bodies).sent)
	}
	if firstTrim == 0 {
		t.Errorf("the first request was trimmed: CONTEXT_TRIM_AT_TOKENS=%d is below Claude Code's first request (%d bytes); raise it", trimAtTokens, bodies[0].sent)
	}
	last := bodies[len(bodies)-1]
	if last.received >= last.sent {
		t.Errorf("last request: %d bytes upstream, %d from Claude Code: trimming should have made it smaller", last.received, last.sent)
	}

	// The session database: every prompt and every tool output is a row; what the last
	// request carried is in context, the rest is not.
	db := openSessionDB(t, srv.stateDir, sid)
	rows, outRows := countTrimmedRows(t, db)
	for i, turn := range e2eTurns {
		if n := queryInt(t, db, `SELECT count(*) FROM messages WHERE role = 'user' AND kind = 'text' AND text = ?`, turn.prompt); n != 1 {
			t.Errorf("turn %d: %d rows hold the prompt, want 1", i+1, n)
		}
		for s := 1; s <= turn.steps; s++ {
			mark := stepMarker(i+1, s)
			r, err := db.Query(`SELECT in_context, name FROM messages WHERE kind = 'tool_result' AND text LIKE ?`, "%"+mark+"%")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			var inCtx int
			for r.Next() {
				var name sql.NullString
				if err := r.Scan(&inCtx, &name); err != nil {
					t.Fatal(err)
				}
				got = append(got, name.String)
			}
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			r.Close()
			if len(got) != 1 {
				t.Errorf("turn %d step %d: %d tool_result rows hold %q, want 1", i+1, s, len(got), mark)
				continue
			}
			if want := stepTool(s); got[0] != want {
				t.Errorf("turn %d step %d: tool_result row named %q, want %q", i+1, s, got[0], want)
			}
			inLast := strings.Contains(last.raw, mark)
			if (inCtx == 1) != inLast {
				t.Errorf("turn %d step %d: in_context = %d, but the last request carries the output: %v", i+1, s, inCtx, inLast)
			}
		}
	}

	// Every row is in context exactly when the last request carries its text, and so is the
	// session's last reply, stored from the response stream (no request carried it yet).
	inLast := last.texts()
	inLast[finalText(len(e2eTurns), e2eTurns[len(e2eTurns)-1].steps)] = true
	q, err := db.Query(`SELECT seq, role, kind, text, in_context FROM messages ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	// Each reply was stored once: from the response with the rows Claude Code's next
	// request gives it, so that request found them stored (every assistant text and tool
	// call of the script is unique).
	seenReply := map[string]int{}
	for q.Next() {
		var seq, inCtx int
		var role, kind, text string
		if err := q.Scan(&seq, &role, &kind, &text, &inCtx); err != nil {
			t.Fatal(err)
		}
		if role == "assistant" && kind != "thinking" {
			if first, dup := seenReply[kind+" "+text]; dup {
				t.Errorf("row %d (%s %.60q) repeats row %d: a reply was stored twice", seq, kind, text, first)
			}
			seenReply[kind+" "+text] = seq
		}
		if (inCtx == 1) != inLast[text] {
			t.Errorf("row %d (%s %s %.60q): in_context = %d, but in the last request: %v", seq, role, kind, text, inCtx, inLast[text])
		}
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	q.Close()

	// The trims this session must have made: a user-turn cut (turn 2 dropped whole, turn 1 kept
	// as the first turn, the pointer on turn 3) and an in-turn gap in turn 3's tool loop.
	lastTurn := len(e2eTurns)
	for i, turn := range e2eTurns {
		want := i == 0 || i+1 == lastTurn
		if got := inLast[turn.prompt]; got != want {
			t.Errorf("last request carries turn %d's prompt: %v, want %v", i+1, got, want)
		}
	}
	if !last.pointerWith(sid, e2eTurns[lastTurn-1].prompt) {
		t.Errorf("last request: the pointer is not in the message of turn %d's prompt", lastTurn)
	}
	steps := e2eTurns[lastTurn-1].steps
	if strings.Contains(last.raw, stepMarker(lastTurn, 1)) || !strings.Contains(last.raw, stepMarker(lastTurn, steps)) {
		t.Errorf("last request: want an in-turn gap (turn %d's step 1 output dropped, step %d's kept)", lastTurn, steps)
	}

	// Events: a trim for each request that made a new cut, a usage event for each request.
	trims := queryInt(t, db, `SELECT count(*) FROM events WHERE kind = 'trim'`)
	usages := queryInt(t, db, `SELECT count(*) FROM events WHERE kind = 'usage'`)
	usageTrims := queryInt(t, db, `SELECT count(*) FROM events WHERE kind = 'usage' AND trimmed = 2`)
	failOpens := queryInt(t, db, `SELECT count(*) FROM events WHERE kind = 'fail_open'`)
	if trims == 0 {
		t.Error("no trim event")
	}
	if usages != len(bodies) {
		t.Errorf("%d usage events for %d requests", usages, len(bodies))
	}
	if usageTrims != trims {
		t.Errorf("%d usage events say the request made a new cut, %d trim events", usageTrims, trims)
	}
	if failOpens != 0 {
		t.Errorf("%d fail_open events:\n%s", failOpens, srv.log)
	}

	// What we measured.
	big := largest(bodies)
	t.Logf("model %s, session %s: %d claude runs in %s (%s), %d requests, first trimmed request #%d",
		model, sid, len(runs), took.Round(time.Millisecond), runTimes(runs), len(bodies), firstTrim+1)
	u := recs[0].Usage
	t.Logf("first request: %d bytes from Claude Code, %d bytes upstream, %d prompt tokens by the fake's count (CONTEXT_TRIM_AT_TOKENS=%d)",
		bodies[0].sent, bodies[0].received, u.InputTokens+u.CacheReadInputTokens+u.CacheCreationInputTokens, trimAtTokens)
	t.Logf("largest request: %d bytes from Claude Code, %d bytes upstream after the trim; last request: %d -> %d bytes, %d -> %d messages",
		big.sent, big.received, last.sent, last.received, countMessages(t, sent[len(sent)-1].body), len(last.Messages))
	t.Logf("session db: %d rows, %d out of context; %d trim events, %d usage events", rows, outRows, trims, usages)
	tr, err := db.Query(`SELECT tokens_before, tokens_after, dropped FROM events WHERE kind = 'trim' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for tr.Next() {
		var before, after, dropped int
		if err := tr.Scan(&before, &after, &dropped); err != nil {
			t.Fatal(err)
		}
		t.Logf("trim: estimate %d -> %d tokens, %d messages dropped", before, after, dropped)
	}
}

// script is the fake model's side of the session: it reads the data files one tool call
// at a time, alternating Bash (cat) and Read, then answers with finalText. It works out
// where it is from the request alone (the step is in the last tool call's file name), so a
// trimmed history does not confuse it.
type script struct {
	dir string
}

func (sc *script) file(turn, step int) string {
	return filepath.Join(sc.dir, fmt.Sprintf("t%d-s%d.txt", turn, step))
}

// stepTool is the tool a step of the script calls: Bash on odd steps, Read on even ones.
func stepTool(step int) string {
	if step%2 == 1 {
		return "Bash"
	}
	return "Read"
}

func stepMarker(turn, step int) string { return fmt.Sprintf("E2E-OUT t=%d s=%d", turn, step) }

func finalText(turn, steps int) string {
	return fmt.Sprintf("E2E turn %d done: read %d files.", turn, steps)
}

// fillerLine is line l (1 to stepLines-1; line 0 is the step's marker) of the file a step of a
// turn reads, with its newline; no two places of one script's files hold the same line.
func fillerLine(turn, step, l int) string {
	return fmt.Sprintf("batch %d file %d line %02d: value-%d-%d-%02d checksum %08x\n", turn, step, l, turn, step, l, turn*1000003+step*7919+l*104729)
}

func (sc *script) writeFiles(t *testing.T) {
	t.Helper()
	writeStepFiles(t, sc.dir, e2eTurns, sc.file, stepMarker, fillerLine)
}

// writeStepFiles writes in dir the file that each step of turns reads (named by file, turns
// and steps from 1): the step's marker line, then lines 1 to stepLines-1 as line gives them.
func writeStepFiles(t *testing.T, dir string, turns []e2eTurn, file, marker func(turn, step int) string, line func(turn, step, l int) string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, turn := range turns {
		for s := 1; s <= turn.steps; s++ {
			var b strings.Builder
			b.WriteString(marker(i+1, s) + "\n")
			for l := 1; l < stepLines; l++ {
				b.WriteString(line(i+1, s, l))
			}
			if err := os.WriteFile(file(i+1, s), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

var (
	stepFile   = regexp.MustCompile(`t(\d+)-s(\d+)\.txt`)
	turnMarker = regexp.MustCompile(`E2E-TURN (\d+):`)
)

func (sc *script) reply(req *fakeupstream.Request) fakeupstream.Reply {
	blocks := fakeupstream.ThinkingFirst(req, fmt.Sprintf("Planning the next step after %d messages.", len(req.Messages)))
	turn, step := position(req)
	switch {
	case turn < 1 || turn > len(e2eTurns):
		return fakeupstream.Reply{Content: append(blocks, fakeupstream.Text("E2E fake: this request is not part of the script."))}
	case step > e2eTurns[turn-1].steps:
		return fakeupstream.Reply{Content: append(blocks, fakeupstream.Text(finalText(turn, e2eTurns[turn-1].steps)))}
	}
	path := sc.file(turn, step)
	blocks = append(blocks, fakeupstream.Text(fmt.Sprintf("Reading file %d of batch %d.", step, turn)))
	if stepTool(step) == "Bash" {
		blocks = append(blocks, fakeupstream.ToolUse("Bash", map[string]any{"command": "cat " + path, "description": "Show data file"}))
	} else {
		blocks = append(blocks, fakeupstream.ToolUse("Read", map[string]any{"file_path": path}))
	}
	return fakeupstream.Reply{Content: blocks}
}

// position returns the turn and the step the next reply makes: after tool results, the
// step after the one named in the last assistant message's tool call; after a user prompt,
// step 1 of the turn it names. (0, 0) when neither applies.
func position(req *fakeupstream.Request) (turn, step int) {
	if req.EndsWithToolResults() {
		for i := len(req.Messages) - 1; i >= 0; i-- {
			m := req.Messages[i]
			if m.Role != "assistant" {
				continue
			}
			for _, b := range slices.Backward(m.Content) {
				if b["type"] != "tool_use" {
					continue
				}
				in, _ := json.Marshal(b["input"])
				if mm := stepFile.FindSubmatch(in); mm != nil {
					turn, _ = strconv.Atoi(string(mm[1]))
					step, _ = strconv.Atoi(string(mm[2]))
					return turn, step + 1
				}
			}
			return 0, 0
		}
		return 0, 0
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		for _, b := range slices.Backward(m.Content) {
			if text, _ := b["text"].(string); b["type"] == "text" {
				if mm := turnMarker.FindStringSubmatch(text); mm != nil {
					turn, _ = strconv.Atoi(mm[1])
					return turn, 1
				}
			}
		}
		return 0, 0
	}
	return 0, 0
}

// upstreamBody is the part of a request as the model received it that the test checks.
type upstreamBody struct {
	Model    string            `json:"model"`
	System   []json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`

	raw            string
	sent, received int // bytes from Claude Code, bytes to the model
	pointerCount   int
}

func parseUpstream(t *testing.T, n int, body []byte) upstreamBody {
	t.Helper()
	var b upstreamBody
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("request %d: upstream body: %v", n, err)
	}
	b.raw = string(body)
	return b
}

func (b *upstreamBody) countSystemText(text string) int {
	n := 0
	for _, raw := range b.System {
		var blk struct{ Type, Text string }
		if json.Unmarshal(raw, &blk) == nil && blk.Type == "text" && blk.Text == text {
			n++
		}
	}
	return n
}

// pointer returns the text of the pointer block for sid in the messages, and the dropped
// count it states; "" when there is none. It also counts the pointer blocks.
func (b *upstreamBody) pointer(sid string) (string, int) {
	head := "[smarter-compact: continuing session " + sid + "; "
	found, dropped := "", 0
	for _, m := range b.Messages {
		var blocks []struct{ Type, Text string }
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue // a string content
		}
		for _, blk := range blocks {
			if blk.Type != "text" || !strings.HasPrefix(blk.Text, head) {
				continue
			}
			b.pointerCount++
			n, _, _ := strings.Cut(strings.TrimPrefix(blk.Text, head), " ")
			dropped, _ = strconv.Atoi(n)
			found = blk.Text
		}
	}
	return found, dropped
}

// texts returns the text of every block of the messages: text, thinking, a tool_result's
// content (its text blocks joined by newlines) and a tool_use's input as compact JSON, the
// forms the session database stores.
func (b *upstreamBody) texts() map[string]bool {
	out := map[string]bool{}
	for _, m := range b.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			out[s] = true
			continue
		}
		var blocks []struct {
			Type, Text, Thinking string
			Input                json.RawMessage
			Content              json.RawMessage
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, blk := range blocks {
			switch blk.Type {
			case "text":
				out[blk.Text] = true
			case "thinking":
				out[blk.Thinking] = true
			case "tool_use":
				var c bytes.Buffer
				if json.Compact(&c, blk.Input) == nil {
					out[c.String()] = true
				}
			case "tool_result":
				if json.Unmarshal(blk.Content, &s) == nil {
					out[s] = true
					continue
				}
				var parts []struct{ Type, Text string }
				json.Unmarshal(blk.Content, &parts)
				var texts []string
				for _, p := range parts {
					if p.Type == "text" {
						texts = append(texts, p.Text)
					}
				}
				out[strings.Join(texts, "\n")] = true
			}
		}
	}
	return out
}

// pointerWith reports whether the pointer for sid shares a message with a text block text.
func (b *upstreamBody) pointerWith(sid, text string) bool {
	head := "[smarter-compact: continuing session " + sid + "; "
	for _, m := range b.Messages {
		var blocks []struct{ Type, Text string }
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		ptr, txt := false, false
		for _, blk := range blocks {
			ptr = ptr || blk.Type == "text" && strings.HasPrefix(blk.Text, head)
			txt = txt || blk.Type == "text" && blk.Text == text
		}
		if ptr && txt {
			return true
		}
	}
	return false
}

func largest(bodies []upstreamBody) upstreamBody {
	big := bodies[0]
	for _, b := range bodies {
		if b.sent > big.sent {
			big = b
		}
	}
	return big
}

func countMessages(t *testing.T, body []byte) int {
	var b struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Errorf("a request Claude Code sent is not JSON: %v", err)
	}
	return len(b.Messages)
}

func queryInt(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// countTrimmedRows returns how many messages rows the session database db holds and how
// many of them are out of context (in_context = 0). It fails the test when there are no
// rows, and reports an error when none is out of context (nothing was trimmed).
func countTrimmedRows(t *testing.T, db *sql.DB) (rows, outRows int) {
	t.Helper()
	rows = queryInt(t, db, `SELECT count(*) FROM messages`)
	outRows = queryInt(t, db, `SELECT count(*) FROM messages WHERE in_context = 0`)
	if rows == 0 {
		t.Fatal("the session database has no rows")
	}
	if outRows == 0 {
		t.Error("no row has in_context = 0: nothing was trimmed")
	}
	return rows, outRows
}

func runTimes(runs []agentRun) string {
	var parts []string
	for _, r := range runs {
		parts = append(parts, r.took.Round(time.Millisecond).String())
	}
	return strings.Join(parts, ", ")
}

// dumpRequests writes every request as Claude Code sent it (NN-sent.json) and as the model
// received it (NN-upstream.json, NN paired by the tap's sequence number) to the test's
// artifact directory; `go test -artifacts -outputdir DIR` keeps them.
func dumpRequests(t *testing.T, tp *tap, fake *fakeupstream.Server) {
	dir := t.ArtifactDir()
	for _, r := range tp.requests() {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("%02d-sent.json", r.seq)), r.body, 0o644)
	}
	for i, r := range fake.Requests() {
		name := fmt.Sprintf("%s-upstream.json", r.Header.Get(seqHeader))
		if len(name) == len("-upstream.json")+1 {
			name = "0" + name
		}
		if r.Header.Get(seqHeader) == "" {
			name = fmt.Sprintf("upstream-%02d.json", i+1)
		}
		os.WriteFile(filepath.Join(dir, name), r.Body, 0o644)
	}
	t.Logf("request bodies are in %s (kept with go test -artifacts -outputdir DIR)", dir)
}

// diagnose summarises the upstream's records and serve's log for a failure message.
// claudeEnv is the environment of a Claude Code run with HOME home that talks to the
// proxy at proxyURL (the tap) with a dummy key and no nonessential traffic.
func claudeEnv(home, proxyURL string) []string {
	return []string{
		"HOME=" + home,
		"ANTHROPIC_BASE_URL=" + proxyURL + "/claude-code",
		"ANTHROPIC_API_KEY=dummy-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
}

// acceptedRequests returns the requests the fake upstream recorded, and fails the test,
// listing each rejection and the diagnosis, when the fake rejected any.
func acceptedRequests(t *testing.T, fake *fakeupstream.Server, srv *serveProc) []fakeupstream.Recorded {
	t.Helper()
	recs := fake.Requests()
	if rej := fake.Rejections(); len(rej) > 0 {
		var b strings.Builder
		for _, r := range rej {
			fmt.Fprintf(&b, "\n%s %s -> %d %s: %s", r.Method, r.Path, r.Status, r.ErrorType, r.Error)
		}
		t.Fatalf("the fake upstream rejected %d of %d requests:%s\n%s", len(rej), len(recs), b.String(), diagnose(fake, srv))
	}
	return recs
}

func diagnose(fake *fakeupstream.Server, srv *serveProc) string {
	var b strings.Builder
	for i, r := range fake.Requests() {
		fmt.Fprintf(&b, "upstream request %d: %s %s -> %d %s %s (%d bytes)\n", i+1, r.Method, r.Path, r.Status, r.ErrorType, r.Error, len(r.Body))
	}
	fmt.Fprintf(&b, "serve log:\n%s", srv.log)
	return b.String()
}
