package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/store"
)

// benchConvo builds Claude Code–shaped requests without a model: a system prompt of three
// blocks, the first user turn, the mid-conversation system message, then user turns of
// ten tool steps each (assistant thinking + tool_use, user tool_result of ~700 bytes).
type benchConvo struct {
	msgs []string
	step int
}

func newBenchConvo() *benchConvo {
	c := &benchConvo{}
	c.msgs = append(c.msgs,
		`{"role":"user","content":[{"type":"text","text":"<system-reminder>\nContext.\n</system-reminder>"},{"type":"text","text":"Fix the failing tests in the parser package."}]}`,
		`{"role":"system","content":"Environment: cwd /work\nDeferred tools: WebFetch, WebSearch","output_config":{"effort":"medium"}}`)
	return c
}

// add appends one tool step, starting a new user turn every ten steps.
func (c *benchConvo) add() {
	c.step++
	if c.step%10 == 0 {
		c.msgs = append(c.msgs,
			fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"sig%d"},{"type":"text","text":"Step %d is done; the parser now handles case %d."}]}`, c.step, c.step, c.step),
			fmt.Sprintf(`{"role":"user","content":"Good. Now handle case %d as well."}`, c.step))
		return
	}
	out := strings.Repeat(fmt.Sprintf("parser_test.go:%d: ok value=%d\n", c.step, c.step*7), 30)
	outJSON, _ := json.Marshal(out)
	c.msgs = append(c.msgs,
		fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"sig%d"},{"type":"tool_use","id":"toolu_%d","name":"Bash","input":{"command":"go test ./parser -run Case%d","description":"Run the test"}}]}`, c.step, c.step, c.step),
		fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%d","content":%s,"is_error":false}]}`, c.step, outJSON))
}

// body renders the request with the moving cache_control marker on the last message.
func (c *benchConvo) body() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"claude-opus-5-5","messages":[`)
	for i, m := range c.msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		if i == len(c.msgs)-1 && strings.HasSuffix(m, `"is_error":false}]}`) {
			m = strings.TrimSuffix(m, `}]}`) + `,"cache_control":{"type":"ephemeral"}}]}`
		}
		b.WriteString(m)
	}
	b.WriteString(`],"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.332.0b8;"},{"type":"text","text":"You are a Claude agent.","cache_control":{"type":"ephemeral"}},{"type":"text","text":`)
	sys, _ := json.Marshal(strings.Repeat("You are an agent working with the user. Follow the rules. ", 120))
	b.Write(sys)
	b.WriteString(`,"cache_control":{"type":"ephemeral"}}],"tools":[`)
	for i := 0; i < 12; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"Tool%d","description":%q,"input_schema":{"type":"object","properties":{"command":{"type":"string"}}}}`, i, strings.Repeat("Runs a thing. ", 60))
	}
	b.WriteString(`],"metadata":{"user_id":"{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"bench\"}"},"max_tokens":32000,"thinking":{"type":"adaptive","display":"omitted"},"stream":true}`)
	return []byte(b.String())
}

func benchProxy(b testing.TB, trimAt int) *Proxy {
	root, err := store.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { root.Close() })
	s := testSettings(trimAt)
	return New(s, allOn{}, root, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func benchHeader(sid string) http.Header {
	h := http.Header{}
	h.Set("X-Claude-Code-Session-Id", sid)
	return h
}

// convoOfSize grows a conversation to about 400 messages and 300 KB.
func convoOfSize() *benchConvo {
	c := newBenchConvo()
	for len(c.msgs) < 400 {
		c.add()
	}
	return c
}

// BenchmarkRequestPathWarm: a session whose previous request is known; each request adds
// one tool step and makes no new cut. The variant "after-cut" re-renders a stored cut. To
// keep the request near 300 KB and 400 messages, a session is replaced (untimed) after 40
// steps.
func BenchmarkRequestPathWarm(b *testing.B) {
	for _, tc := range []struct {
		name   string
		trimAt int
	}{{"no-cut", 10_000_000}, {"after-cut", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			p := benchProxy(b, tc.trimAt)
			var c *benchConvo
			var h http.Header
			sessions, size, msgs := 0, 0, 0
			fresh := func() {
				c = convoOfSize()
				sessions++
				h = benchHeader(fmt.Sprintf("bench-%d", sessions))
				body := c.body()
				if tc.trimAt == 0 {
					// make one cut first, then keep the threshold out of reach
					p.cfg().TrimAtTokens = 1000
					if res, _, err := p.rewrite(h, body); err != nil || res.trimmed != 2 {
						b.Fatalf("no cut: %v", err)
					}
				}
				p.cfg().TrimAtTokens = 10_000_000
				if _, _, err := p.rewrite(h, body); err != nil {
					b.Fatal(err)
				}
			}
			fresh()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if len(c.msgs) >= 440 {
					fresh()
				}
				c.add()
				body := c.body()
				size += len(body)
				msgs += len(c.msgs)
				b.StartTimer()
				res, _, err := p.rewrite(h, body)
				if err != nil || res == nil {
					b.Fatal(err)
				}
				if tc.trimAt == 0 && res.trimmed != 1 {
					b.Fatalf("trimmed = %d, want 1 (carried cut)", res.trimmed)
				}
			}
			b.ReportMetric(float64(size)/float64(b.N)/1024, "KB/req")
			b.ReportMetric(float64(msgs)/float64(b.N), "msgs/req")
		})
	}
}

// BenchmarkRequestPathNewCut: the request that crosses the threshold and makes a new cut,
// on a session warmed with the same history minus one step.
func BenchmarkRequestPathNewCut(b *testing.B) {
	p := benchProxy(b, 10_000_000)
	c := convoOfSize()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := benchHeader(fmt.Sprintf("bench-%d", i))
		p.cfg().TrimAtTokens = 10_000_000
		if _, _, err := p.rewrite(h, c.body()); err != nil {
			b.Fatal(err)
		}
		c2 := *c
		c2.msgs = append([]string(nil), c.msgs...)
		c2.add()
		body := c2.body()
		p.cfg().TrimAtTokens = 60_000
		b.SetBytes(int64(len(body)))
		b.StartTimer()
		res, _, err := p.rewrite(h, body)
		if err != nil || res == nil {
			b.Fatal(err)
		}
		if res.trimmed != 2 {
			b.Fatalf("trimmed = %d, want 2 (new cut)", res.trimmed)
		}
	}
}
