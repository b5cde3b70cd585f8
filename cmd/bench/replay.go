package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

// Assumed list prices, Haiku-like, per million tokens (not a quote of any price list).
const (
	priceInput  = 1.00
	priceWrite  = 1.25 // 5-minute cache write: 1.25× input (api-rules §1.8)
	priceRead   = 0.10 // cache read: 0.1× input
	priceOutput = 5.00
)

// replayModel is the model id of the replay; trim_at_tokens is set explicitly, so the
// Haiku default threshold (95k) does not apply.
const replayModel = "claude-haiku-5-5"

// minCacheable is the fake's shortest cached prefix for replayModel: Haiku 4.5's 4096
// (api-rules §1.8).
const minCacheable = 4096

type armStats struct {
	Arm                     string
	Requests                int
	Peak                    int   // largest prompt (input + cache write + cache read), tokens
	Input, Write, Read, Out int64 // usage sums, tokens
	Trims                   int
	LookupOK, LookupN       int
	CountOK, CountN         int
	Searches, SQLs          int
	Over                    int // requests whose prompt exceeded threshold + newest turn
	MaxOver                 int // largest prompt − (threshold + newest turn); negative when always under
	Series                  []int
	Wrong                   []string
	Seconds                 float64
}

func (a *armStats) hitRatio() float64 {
	return float64(a.Read) / float64(a.Input+a.Write+a.Read)
}

func (a *armStats) cost() float64 {
	return (float64(a.Input)*priceInput + float64(a.Write)*priceWrite + float64(a.Read)*priceRead + float64(a.Out)*priceOutput) / 1e6
}

type replayCase struct {
	Task                *task
	Batches, Questions  int
	Keep, Smart         *armStats
	Threshold           int
	PromptTokensRecords int // the size of the records alone, tokens
}

// switchable is a loopback listener whose handler can be replaced between trials, so one
// serve (whose upstream is fixed in its config) meets a fresh fake upstream, with an empty
// prompt cache, on every trial.
type switchable struct {
	h   atomic.Pointer[http.Handler]
	url string
	srv *http.Server
}

func newSwitchable() (*switchable, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &switchable{url: "http://" + ln.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*s.h.Load()).ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *switchable) set(h http.Handler) { s.h.Store(&h) }

// agent is the scripted Claude Code side of a session: it keeps the conversation, sends it
// through serve, and runs the model's tool calls over MCP (POST /mcp on serve).
type agent struct {
	url        string
	sid        string
	head, tail string
	msgs       []agentMsg
	http       *http.Client
	mcp        *client.Client // nil: no recall tools (keep everything)
	fake       *fakeupstream.Server
	threshold  int    // 0: no check
	dump       string // path prefix for the bodies of a rejected request; "" keeps none
	st         *armStats
}

// wireMsg marshals role before content, so the JSON ends with the last block and "]}"
// (body adds the cache_control marker there).
type wireMsg struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type agentMsg struct {
	raw      string // JSON without cache_control
	realUser bool   // a user turn (not tool results only)
}

// ccBase renders what comes before and after "messages" in a Claude Code request of the
// replay: a system prompt of three blocks and the tools, about 20k tokens (mini: about 1.5k,
// for -quick), the two recall tools among them.
func ccBase(sid string, mini bool) (head, tail string) {
	sysText := strings.Repeat("You are an interactive CLI tool that helps users with software engineering tasks. Use the instructions below and the tools available to you to assist the user. ", 60)
	nTools, desc := 16, strings.Repeat("Use this tool when the task needs it; read its parameters carefully and prefer the dedicated tool over a shell command. ", 25)
	if mini {
		sysText, nTools, desc = sysText[:1500], 2, desc[:600]
	}
	var b strings.Builder
	b.WriteString(`{"model":"` + replayModel + `","max_tokens":32000,"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.332.0b8; cc_entrypoint=sdk-cli;"},{"type":"text","text":"You are Claude Code, Anthropic's official CLI for Claude.","cache_control":{"type":"ephemeral"}},{"type":"text","text":`)
	st, _ := json.Marshal(sysText)
	b.Write(st)
	b.WriteString(`,"cache_control":{"type":"ephemeral"}}],"tools":[`)
	for i := 0; i < nTools; i++ {
		fmt.Fprintf(&b, `{"name":"Tool%d","description":%q,"input_schema":{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"number"}},"required":["command"]}},`, i, desc)
	}
	b.WriteString(`{"name":"` + toolSearch + `","description":"Search every stored message of this coding session, including turns trimmed out of your context.","input_schema":{"type":"object","properties":{"query":{"type":"string"},"pattern":{"type":"string"},"session_id":{"type":"string"},"role":{},"limit":{"type":"integer"}}}},`)
	b.WriteString(`{"name":"` + toolSQL + `","description":"Run one read-only SELECT over the session store.","input_schema":{"type":"object","properties":{"session_id":{"type":"string"},"sql":{"type":"string"}},"required":["sql"]}}`)
	b.WriteString(`],"messages":[`)
	tail = fmt.Sprintf(`],"metadata":{"user_id":"{\"device_id\":\"bench\",\"account_uuid\":\"\",\"session_id\":\"%s\"}"},"stream":true}`, sid)
	return b.String(), tail
}

func (a *agent) body() []byte {
	var b bytes.Buffer
	b.WriteString(a.head)
	for i, m := range a.msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		if i == len(a.msgs)-1 { // Claude Code's moving marker on the last block
			b.WriteString(strings.TrimSuffix(m.raw, "}]}"))
			b.WriteString(`,"cache_control":{"type":"ephemeral"}}]}`)
			continue
		}
		b.WriteString(m.raw)
	}
	b.WriteString(a.tail)
	return b.Bytes()
}

// newestTurn is the size of the newest user turn and what follows it, in the fake's tokens
// (raw JSON bytes / 3, a slight overestimate of the canonical form).
func (a *agent) newestTurn() int {
	n := 0
	for i := len(a.msgs) - 1; i >= 0; i-- {
		n += len(a.msgs[i].raw)
		if a.msgs[i].realUser {
			break
		}
	}
	return (n + 2) / 3
}

func userText(s string) agentMsg {
	t, _ := json.Marshal(s)
	return agentMsg{raw: `{"role":"user","content":[{"type":"text","text":` + string(t) + `}]}`, realUser: true}
}

// turn sends one user message and runs the model's tool calls until it answers; it returns
// the final text.
func (a *agent) turn(text string) (string, error) {
	a.msgs = append(a.msgs, userText(text))
	for step := 0; step < 6; step++ {
		blocks, err := a.post()
		if err != nil {
			return "", err
		}
		raw, _ := json.Marshal(wireMsg{"assistant", blocks})
		a.msgs = append(a.msgs, agentMsg{raw: string(raw)})
		var results []any
		var final strings.Builder
		for _, b := range blocks {
			switch b["type"] {
			case "text":
				final.WriteString(fmt.Sprint(b["text"]))
			case "tool_use":
				out, isErr, err := a.runTool(fmt.Sprint(b["name"]), b["input"])
				if err != nil {
					return "", err
				}
				tr := map[string]any{"type": "tool_result", "tool_use_id": b["id"], "content": []any{map[string]any{"type": "text", "text": out}}}
				if isErr {
					tr["is_error"] = true
				}
				results = append(results, tr)
			}
		}
		if len(results) == 0 {
			return final.String(), nil
		}
		raw, _ = json.Marshal(wireMsg{"user", results})
		a.msgs = append(a.msgs, agentMsg{raw: string(raw)})
	}
	return "", errors.New("no answer after 6 model calls")
}

func (a *agent) runTool(name string, input any) (string, bool, error) {
	if a.mcp == nil {
		return "", false, fmt.Errorf("the model called %s in the keep-everything arm, which has no recall tools", name)
	}
	tool, ok := strings.CutPrefix(name, "mcp__smarter-compact__")
	if !ok {
		return "", false, fmt.Errorf("the model called an unknown tool %q", name)
	}
	switch tool {
	case "smart_compact_search":
		a.st.Searches++
	case "smart_compact_sql":
		a.st.SQLs++
	}
	args, _ := input.(map[string]any)
	req := mcpgo.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.mcp.CallTool(ctx, req)
	if err != nil {
		return "", false, fmt.Errorf("MCP %s: %w", tool, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcpgo.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String(), res.IsError, nil
}

// post sends the conversation and reads the answer's content blocks and usage.
func (a *agent) post() ([]map[string]any, error) {
	body := a.body()
	req, _ := http.NewRequest(http.MethodPost, a.url, bytes.NewReader(body))
	setClaudeHeaders(req.Header, a.sid)
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if a.fake != nil {
		defer a.fake.Forget()
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4000))
		err := fmt.Errorf("request %d of session %s: status %d: %s", a.st.Requests+1, a.sid, resp.StatusCode, b)
		if a.fake != nil && a.dump != "" {
			if rj := a.fake.Rejections(); len(rj) > 0 {
				os.WriteFile(a.dump+".sent.json", body, 0o644)
				os.WriteFile(a.dump+".upstream.json", rj[len(rj)-1].Body, 0o644)
				err = fmt.Errorf("%w (bodies kept in %s.*.json)", err, a.dump)
			}
		}
		return nil, err
	}
	blocks, u, err := readStream(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("request %d of session %s: %w", a.st.Requests+1, a.sid, err)
	}
	prompt := u.input + u.write + u.read
	a.st.Requests++
	a.st.Input += int64(u.input)
	a.st.Write += int64(u.write)
	a.st.Read += int64(u.read)
	a.st.Out += int64(u.output)
	a.st.Peak = max(a.st.Peak, prompt)
	a.st.Series = append(a.st.Series, prompt)
	if a.threshold > 0 {
		over := prompt - (a.threshold + a.newestTurn())
		if a.st.Requests == 1 || over > a.st.MaxOver {
			a.st.MaxOver = over
		}
		if over > 0 {
			a.st.Over++
		}
	}
	return blocks, nil
}

type usage struct{ input, write, read, output int }

// readStream accumulates an Anthropic event stream into content blocks and the final usage
// (message_delta's cumulative fields win over message_start's, api-rules §7).
func readStream(r io.Reader) ([]map[string]any, usage, error) {
	var st streamState
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if err := st.event(data); err != nil {
			return nil, st.u, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, st.u, err
	}
	if !st.stopped {
		return nil, st.u, errors.New("the stream ended without message_stop")
	}
	return st.blocks, st.u, nil
}

// wireUsage is the usage object of message_start and message_delta; a nil field was not sent.
type wireUsage struct {
	Input  *int `json:"input_tokens"`
	Write  *int `json:"cache_creation_input_tokens"`
	Read   *int `json:"cache_read_input_tokens"`
	Output *int `json:"output_tokens"`
}

// applyTo overwrites the fields of u that w carries; a nil w changes nothing. It is its own
// step because both usage events apply the same rule: a later sent field wins.
func (w *wireUsage) applyTo(u *usage) {
	if w == nil {
		return
	}
	for _, f := range []struct {
		src *int
		dst *int
	}{{w.Input, &u.input}, {w.Write, &u.write}, {w.Read, &u.read}, {w.Output, &u.output}} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
}

// streamState is what readStream has accumulated so far: the usage, the content blocks, the
// partial tool input JSON per block, and whether message_stop arrived.
type streamState struct {
	u       usage
	blocks  []map[string]any
	partial []string
	stopped bool
}

// event applies the data of one SSE event to st. It is the step readStream repeats per line,
// kept apart so the scanning loop and the per-event rules read separately; its errors
// (bad JSON, a delta for an unknown block, bad tool input, an error event) end the stream.
func (st *streamState) event(data string) error {
	var ev struct {
		Type    string `json:"type"`
		Index   int    `json:"index"`
		Message struct {
			Usage *wireUsage `json:"usage"`
		} `json:"message"`
		Usage        *wireUsage     `json:"usage"`
		ContentBlock map[string]any `json:"content_block"`
		Delta        map[string]any `json:"delta"`
	}
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return fmt.Errorf("bad SSE data %q: %v", firstLine(data), err)
	}
	switch ev.Type {
	case "message_start":
		ev.Message.Usage.applyTo(&st.u)
	case "message_delta":
		ev.Usage.applyTo(&st.u)
	case "content_block_start":
		st.blocks = append(st.blocks, ev.ContentBlock)
		st.partial = append(st.partial, "")
	case "content_block_delta":
		return st.delta(ev.Index, ev.Delta)
	case "content_block_stop":
		return st.stop(ev.Index)
	case "message_stop":
		st.stopped = true
	case "error":
		return fmt.Errorf("stream error event: %s", data)
	}
	return nil
}

// delta appends a content_block_delta to block i: text to its text, tool input JSON to
// its partial input. Its own step because it is the one event that checks the index.
func (st *streamState) delta(i int, delta map[string]any) error {
	if i >= len(st.blocks) {
		return fmt.Errorf("delta for block %d of %d", i, len(st.blocks))
	}
	b := st.blocks[i]
	switch delta["type"] {
	case "text_delta":
		b["text"] = fmt.Sprint(b["text"]) + fmt.Sprint(delta["text"])
	case "input_json_delta":
		st.partial[i] += fmt.Sprint(delta["partial_json"])
	}
	return nil
}

// stop closes block i: a tool_use block with partial input gets that input parsed. Its own
// step because only here the accumulated JSON is decoded.
func (st *streamState) stop(i int) error {
	if i < len(st.blocks) && st.blocks[i]["type"] == "tool_use" && st.partial[i] != "" {
		var in any
		if err := json.Unmarshal([]byte(st.partial[i]), &in); err != nil {
			return fmt.Errorf("tool input %q: %v", st.partial[i], err)
		}
		st.blocks[i]["input"] = in
	}
	return nil
}

// replayPlan sets the sizes of the replay.
type replayPlan struct {
	KV, Log   []int
	Questions int
	TrimAt    int
	Mini      bool
	Seed      uint64
	DumpDir   string // where a rejected request's bodies are written
}

func runReplay(ctx context.Context, pl replayPlan, bin, tmp string, logf func(string, ...any)) ([]*replayCase, error) {
	upSmart, err := newSwitchable()
	if err != nil {
		return nil, err
	}
	defer upSmart.srv.Close()
	upKeep, err := newSwitchable()
	if err != nil {
		return nil, err
	}
	defer upKeep.srv.Close()
	smart, err := startServe("serve-smart", bin, tmp, serveConfig{Upstream: upSmart.url, TrimAt: pl.TrimAt})
	if err != nil {
		return nil, err
	}
	defer smart.stop()
	keep, err := startServe("serve-keep", bin, tmp, serveConfig{Upstream: upKeep.url, AgentOff: true})
	if err != nil {
		return nil, err
	}
	defer keep.stop()
	mc, err := client.NewStreamableHttpClient(smart.url() + "/mcp")
	if err != nil {
		return nil, err
	}
	if err := mc.Start(ctx); err != nil {
		return nil, err
	}
	defer mc.Close()
	ireq := mcpgo.InitializeRequest{}
	ireq.Params.ClientInfo = mcpgo.Implementation{Name: "smarter-compact-bench", Version: "1"}
	if _, err := mc.Initialize(ctx, ireq); err != nil {
		return nil, fmt.Errorf("MCP initialize: %w", err)
	}
	hc := newClient()

	var tasks []*task
	for _, n := range pl.KV {
		tasks = append(tasks, kvTask(n, pl.Questions, pl.Seed))
	}
	for _, n := range pl.Log {
		tasks = append(tasks, logTask(n, pl.Questions, pl.Seed))
	}
	var out []*replayCase
	for _, t := range tasks {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rc := &replayCase{Task: t, Batches: len(t.Batches), Questions: len(t.Questions), Threshold: pl.TrimAt}
		recBytes := 0
		for _, b := range t.Batches {
			recBytes += len(b)
		}
		rc.PromptTokensRecords = recBytes / 3
		for _, arm := range []string{"smart", "keep"} {
			sid := strings.ToLower(fmt.Sprintf("bench-%s-%s-%s", t.Family, t.Name, arm))
			fake := fakeupstream.New(fakeupstream.Options{Reply: scriptedReply, Models: map[string]fakeupstream.ModelRules{
				replayModel: {RejectPrefill: true, AllowSystemRole: true, MinCacheableTokens: minCacheable},
			}})
			st := &armStats{Arm: arm}
			a := &agent{sid: sid, http: hc, fake: fake, st: st, dump: filepath.Join(pl.DumpDir, sid)}
			a.head, a.tail = ccBase(sid, pl.Mini)
			if arm == "smart" {
				upSmart.set(fake)
				a.url, a.mcp, a.threshold = smart.url()+"/claude-code/v1/messages?beta=true", mc, pl.TrimAt
				rc.Smart = st
			} else {
				upKeep.set(fake)
				// proxy off: a serve with claude-code = false passes every request through
				a.url = keep.url() + "/claude-code/v1/messages?beta=true"
				rc.Keep = st
			}
			start := time.Now()
			if err := play(a, t); err != nil {
				srv := map[bool]*proc{true: smart, false: keep}[arm == "smart"]
				return nil, fmt.Errorf("%s, %s arm: %w\nserve's log ends:\n%s", t.label(), arm, err, tail(srv.log.String(), 3000))
			}
			st.Seconds = time.Since(start).Seconds()
			if arm == "smart" {
				root, err := store.Open(filepath.Join(smart.stateDir, "context"))
				if err != nil {
					return nil, err
				}
				st.Trims, err = queryInt(root, sid, `SELECT count(*) FROM events WHERE kind = 'trim'`)
				root.Close()
				if err != nil {
					return nil, err
				}
			}
			logf("replay %s %s: %d requests in %.1fs, peak %s, trims %d, hit %.3f, $%.3f, lookups %d/%d, counts %d/%d",
				t.label(), arm, st.Requests, st.Seconds, ktok(st.Peak), st.Trims, st.hitRatio(), st.cost(), st.LookupOK, st.LookupN, st.CountOK, st.CountN)
		}
		out = append(out, rc)
	}
	return out, nil
}

// play runs the task's session: the statement, every batch, every question.
func play(a *agent, t *task) error {
	if _, err := a.turn(t.First); err != nil {
		return err
	}
	for _, b := range t.Batches {
		if _, err := a.turn(b); err != nil {
			return err
		}
	}
	for _, q := range t.Questions {
		got, err := a.turn(q.Text)
		if err != nil {
			return err
		}
		got = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(got), "ANSWER:"))
		ok := got == q.Truth
		if q.Kind == "count" {
			a.st.CountN++
			if ok {
				a.st.CountOK++
			}
		} else {
			a.st.LookupN++
			if ok {
				a.st.LookupOK++
			}
		}
		if !ok && len(a.st.Wrong) < 5 {
			a.st.Wrong = append(a.st.Wrong, fmt.Sprintf("%s → %q, truth %q", q.Text, got, q.Truth))
		}
	}
	return nil
}
