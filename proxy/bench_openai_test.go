package proxy

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// Request-path benchmarks of the OpenAI formats, the counterparts of BenchmarkRequestPathWarm
// and BenchmarkRequestPathNewCut: a Codex-shaped Responses request and an OpenCode-shaped
// Chat request of about 300 KB (≈120k tokens at 2.5 characters a token), measured warm
// (the session's next request appends one step: the fast path) and on the request that
// makes a new cut.

// oaBenchConvo builds requests of one format without a model. items are the raw
// conversation items after the pinned ones; add appends one tool step and starts a new
// user turn every ten steps.
type oaBenchConvo struct {
	format apiFormat
	items  []string
	step   int
	rng    *rand.Rand
	head   string // the body up to the first conversation item
	tail   string // the body after the last one
}

// newCodexBench is Codex CLI's request (clients.md): a 17 KB developer system prompt, a
// developer skills message, the environment context and the prompt as user items, then per
// step a reasoning item (summary and about 1.6 KB of encrypted_content), an exec_command
// function_call and its function_call_output in Codex's report format.
func newCodexBench() *oaBenchConvo {
	c := &oaBenchConvo{format: responsesFormat, rng: rand.New(rand.NewSource(1))}
	msg := func(id, role, text string) string {
		t, _ := json.Marshal(text)
		return fmt.Sprintf(`{"type":"message","id":%q,"role":%q,"content":[{"type":"input_text","text":%s}]}`, id, role, t)
	}
	var tools []string
	for i := 0; i < 8; i++ {
		tools = append(tools, fmt.Sprintf(`{"type":"function","name":"tool_%d","description":%q,"strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string","description":"Shell command to execute."},"workdir":{"type":"string"}},"required":["cmd"],"additionalProperties":false}}`, i, strings.Repeat("Runs a command in a PTY. ", 30)))
	}
	tools = append(tools, `{"type":"web_search","external_web_access":false}`)
	c.head = `{"model":"gpt-5-codex","stream":true,"input":[` +
		msg("msg_01a2277d-bf7a-71b2-a814-afbbf2e99473", "developer", simPrompt("You are a coding agent running in the Codex CLI, a terminal-based coding assistant.", 17000)) + "," +
		msg("msg_01a2277d-bf7a-71b2-a814-afbbf2e99474", "developer", simPrompt("<skills_instructions>\n## Skills", 2800)) + ","
	c.tail = `],"tools":[` + strings.Join(tools, ",") + `],"tool_choice":"auto","parallel_tool_calls":true,"reasoning":{"summary":"auto"},"store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"01a2277d-bece-7921-8dbe-29b4e1d3bc80","client_metadata":{"thread_id":"01a2277d-bece-7921-8dbe-29b4e1d3bc80","turn_id":"01a2277d-bf17-7143-9296-125df103b578"}}`
	c.items = append(c.items,
		msg("msg_01a2277d-bf7a-71b2-a814-afc5175b2097", "user", "<environment_context>\n  <cwd>/work/parser</cwd>\n  <shell>bash</shell>\n  <current_date>2026-11-29</current_date>\n  <timezone>Etc/UTC</timezone>\n"+strings.Repeat("  <entry access=\"read\"><path>/work/parser/.git</path></entry>\n", 12)+"</environment_context>"),
		msg("msg_01a2277d-bf8d-7a32-a36d-745171c29402", "user", "Fix the failing tests in the parser package."))
	return c
}

// newChatBench is OpenCode's Chat Completions request (clients.md, opencode run 03): the
// system prompt as the first message, ten tools, then per step an assistant message with
// content "" and one bash tool call, and its tool message.
func newChatBench() *oaBenchConvo {
	c := &oaBenchConvo{format: chatFormat, rng: rand.New(rand.NewSource(1))}
	sys, _ := json.Marshal(simPrompt("You are opencode, an interactive CLI tool that helps users with software engineering tasks.", 9700))
	var tools []string
	for i := 0; i < 10; i++ {
		tools = append(tools, fmt.Sprintf(`{"type":"function","function":{"name":"tool_%d","description":%q,"parameters":{"type":"object","properties":{"command":{"type":"string"},"description":{"type":"string"}},"required":["command","description"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}}}`, i, strings.Repeat("Executes a given bash command. ", 25)))
	}
	c.head = `{"model":"fake-model","max_tokens":8192,"messages":[{"role":"system","content":` + string(sys) + `},`
	c.tail = `],"tools":[` + strings.Join(tools, ",") + `],"tool_choice":"auto","stream":true,"stream_options":{"include_usage":true}}`
	c.items = append(c.items, `{"role":"user","content":"Fix the failing tests in the parser package."}`)
	return c
}

// output is a realistic tool output of about n bytes.
func (c *oaBenchConvo) output(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "parser_test.go:%d: case %d ok value=%d\n", c.step*100+i, c.step, c.rng.Intn(1e6))
	}
	return b.String()
}

// add appends one tool step, or every tenth step a final reply and a new user turn.
func (c *oaBenchConvo) add() {
	c.step++
	s := c.step
	q := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	if c.format == chatFormat {
		if s%10 == 0 {
			c.items = append(c.items,
				fmt.Sprintf(`{"role":"assistant","content":%s}`, q(fmt.Sprintf("Step %d is done; the parser now handles case %d.", s, s))),
				fmt.Sprintf(`{"role":"user","content":%s}`, q(fmt.Sprintf("Good. Now handle case %d as well.", s))))
			return
		}
		args := q(fmt.Sprintf(`{"command":"go test ./parser -run Case%d","description":"Run the test"}`, s))
		c.items = append(c.items,
			fmt.Sprintf(`{"role":"assistant","content":"","tool_calls":[{"id":"call_%04d","type":"function","function":{"name":"bash","arguments":%s}}]}`, s, args),
			fmt.Sprintf(`{"role":"tool","tool_call_id":"call_%04d","content":%s}`, s, q(c.output(1100))))
		return
	}
	enc := make([]byte, 1200)
	c.rng.Read(enc)
	reasoning := fmt.Sprintf(`{"type":"reasoning","id":"rs_%04d","summary":[{"type":"summary_text","text":%s}],"encrypted_content":%q}`,
		s, q(fmt.Sprintf("**Checking case %d**\n\nThe parser fails on case %d; I'll run its test and read the output before editing.", s, s)), "gAAAAA"+base64.StdEncoding.EncodeToString(enc))
	if s%10 == 0 {
		c.items = append(c.items, reasoning,
			fmt.Sprintf(`{"type":"message","id":"msg_%04d","role":"assistant","status":"completed","content":[{"type":"output_text","text":%s,"annotations":[]}]}`, s, q(fmt.Sprintf("Step %d is done; the parser now handles case %d.", s, s))),
			fmt.Sprintf(`{"type":"message","id":"msg_u%04d","role":"user","content":[{"type":"input_text","text":%s}]}`, s, q(fmt.Sprintf("Good. Now handle case %d as well.", s))))
		return
	}
	args := q(fmt.Sprintf(`{"cmd":"go test ./parser -run Case%d","workdir":"/work/parser","yield_time_ms":10000}`, s))
	report := fmt.Sprintf("Chunk ID: %04x\nWall time: 0.4000 seconds\nProcess exited with code 0\nOriginal token count: 280\nOutput:\n%s", s, c.output(750))
	c.items = append(c.items, reasoning,
		fmt.Sprintf(`{"type":"function_call","id":"fc_%04d","call_id":"call_%04d","name":"exec_command","arguments":%s,"status":"completed"}`, s, s, args),
		fmt.Sprintf(`{"type":"function_call_output","id":"fco_%04d","call_id":"call_%04d","output":%s}`, s, s, q(report)))
}

func (c *oaBenchConvo) body() []byte {
	n := len(c.head) + len(c.tail) + len(c.items)
	for _, it := range c.items {
		n += len(it)
	}
	b := make([]byte, 0, n)
	b = append(b, c.head...)
	for i, it := range c.items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, c.tail...)
}

func (c *oaBenchConvo) clone() *oaBenchConvo {
	c2 := *c
	c2.items = append([]string(nil), c.items...)
	return &c2
}

// ofSize grows the conversation to about 300 KB.
func (c *oaBenchConvo) ofSize() *oaBenchConvo {
	for len(c.body()) < 300<<10 {
		c.add()
	}
	return c
}

// oaBenchTarget and oaBenchHeader are the route and headers of the format's client: Codex
// on the Codex backend (session in prompt_cache_key, session-id and thread-id), OpenCode's
// Chat on the OpenAI family (session in x-session-id).
func oaBenchTarget(f apiFormat) target {
	if f == responsesFormat {
		return target{responsesFormat, "codex"}
	}
	return target{chatFormat, "openai"}
}

func oaBenchHeader(f apiFormat, sid string) http.Header {
	h := http.Header{}
	if f == responsesFormat {
		h.Set("Session-Id", sid)
		h.Set("Thread-Id", sid)
	} else {
		h.Set("X-Session-Id", sid)
	}
	return h
}

// oaBenchSession returns the convo with its session id put where the client sends it.
func oaBenchSession(c *oaBenchConvo, sid string) *oaBenchConvo {
	c2 := c.clone()
	if c.format == responsesFormat {
		c2.tail = strings.Replace(c.tail, `"prompt_cache_key":"01a2277d-bece-7921-8dbe-29b4e1d3bc80"`, fmt.Sprintf(`"prompt_cache_key":%q`, sid), 1)
	}
	return c2
}

func BenchmarkResponsesRequestPathWarm(b *testing.B) { benchOpenAIWarm(b, newCodexBench) }
func BenchmarkChatRequestPathWarm(b *testing.B)      { benchOpenAIWarm(b, newChatBench) }

func BenchmarkResponsesRequestPathNewCut(b *testing.B) { benchOpenAINewCut(b, newCodexBench) }
func BenchmarkChatRequestPathNewCut(b *testing.B)      { benchOpenAINewCut(b, newChatBench) }

// benchOpenAIWarm: a session whose previous request is known; each request adds one tool
// step and makes no new cut. "after-cut" re-renders a stored cut. A session is replaced
// (untimed) after 40 steps, to keep the request near 300 KB.
func benchOpenAIWarm(b *testing.B, newConvo func() *oaBenchConvo) {
	base := newConvo().ofSize()
	for _, tc := range []struct {
		name   string
		trimAt int
	}{{"no-cut", 10_000_000}, {"after-cut", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			p := benchProxy(b, tc.trimAt)
			tg := oaBenchTarget(base.format)
			var c *oaBenchConvo
			var h http.Header
			sessions, size, items, grown := 0, 0, 0, 0
			fresh := func() {
				sessions++
				sid := fmt.Sprintf("bench-%d", sessions)
				c, h, grown = oaBenchSession(base, sid), oaBenchHeader(base.format, sid), 0
				body := c.body()
				if tc.trimAt == 0 {
					// make one cut first, then keep the threshold out of reach
					p.cfg().TrimAtTokens = 1000
					if res, _, err := p.rewriteAs(tg, h, body); err != nil || res.trimmed != 2 {
						b.Fatalf("no cut: %v", err)
					}
				}
				p.cfg().TrimAtTokens = 10_000_000
				if _, _, err := p.rewriteAs(tg, h, body); err != nil {
					b.Fatal(err)
				}
			}
			fresh()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if grown >= 40 {
					fresh()
				}
				c.add()
				grown++
				body := c.body()
				size += len(body)
				items += len(c.items)
				b.StartTimer()
				res, _, err := p.rewriteAs(tg, h, body)
				if err != nil || res == nil {
					b.Fatal(err)
				}
				if tc.trimAt == 0 && res.trimmed != 1 {
					b.Fatalf("trimmed = %d, want 1 (carried cut)", res.trimmed)
				}
				if tc.trimAt != 0 && res.trimmed != 0 {
					b.Fatalf("trimmed = %d, want 0", res.trimmed)
				}
			}
			b.ReportMetric(float64(size)/float64(b.N)/1024, "KB/req")
			b.ReportMetric(float64(items)/float64(b.N), "items/req")
		})
	}
}

// benchOpenAINewCut: the request that crosses the threshold and makes a new cut, on a
// session warmed with the same history minus one step.
func benchOpenAINewCut(b *testing.B, newConvo func() *oaBenchConvo) {
	base := newConvo().ofSize()
	p := benchProxy(b, 10_000_000)
	tg := oaBenchTarget(base.format)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sid := fmt.Sprintf("bench-%d", i)
		c, h := oaBenchSession(base, sid), oaBenchHeader(base.format, sid)
		p.cfg().TrimAtTokens = 10_000_000
		if _, _, err := p.rewriteAs(tg, h, c.body()); err != nil {
			b.Fatal(err)
		}
		c.add()
		body := c.body()
		p.cfg().TrimAtTokens = 60_000
		b.SetBytes(int64(len(body)))
		b.StartTimer()
		res, _, err := p.rewriteAs(tg, h, body)
		if err != nil || res == nil {
			b.Fatal(err)
		}
		if res.trimmed != 2 {
			b.Fatalf("trimmed = %d, want 2 (new cut)", res.trimmed)
		}
	}
}

// TestRenderAllocatesTheViewOnce: rendering a request allocates the output body and the
// message list once each, about twice the body. The list buffer is sized for the kept
// messages, the pointer and the standing instruction (view.go render); when it is too small
// for what is added, append copies the whole list into a buffer twice its size, on every
// request of a session.
//
// Fails for Responses (bug): the buffer reserves len(StandingInstruction)+64 bytes for the
// instruction, but the developer message item that carries it (responsesInstruction, used
// for Codex and for any request without instructions) is 81 bytes longer than the text, so
// every untrimmed Codex request reallocates its ~300 KB input list.
func TestRenderAllocatesTheViewOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		convo func() *oaBenchConvo
	}{{"chat", newChatBench}, {"responses", newCodexBench}} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.convo().ofSize()
			body := c.body()
			p := benchProxy(t, 10_000_000)
			req, err := parseRequest(c.format, body, nil)
			must(t, err)
			msgs, _, err := p.buildMessages(&session{threads: map[string][]*message{}}, req)
			must(t, err)
			plan := noPlan(firstRealUser(msgs))
			family := oaBenchTarget(c.format).family
			var v view
			const runs = 20
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			for i := 0; i < runs; i++ {
				v = render(req, msgs, plan, "", true, family)
			}
			runtime.ReadMemStats(&m1)
			perRun := int(m1.TotalAlloc-m0.TotalAlloc) / runs
			if len(v.body) <= len(body) {
				t.Fatalf("the view (%d bytes) does not carry the standing instruction", len(v.body))
			}
			t.Logf("%d KB request, %d KB allocated per render", len(body)>>10, perRun>>10)
			if limit := 2*len(body) + 64<<10; perRun > limit {
				t.Errorf("rendering a %d KB request allocates %d KB, want at most %d KB (body and list once each)", len(body)>>10, perRun>>10, limit>>10)
			}
		})
	}
}
