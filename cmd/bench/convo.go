package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// convo builds Claude Code–shaped Anthropic requests for the overhead runs, the shape of
// proxy/bench_test.go's benchConvo: a system prompt of three blocks (billing header, two with
// cache_control), twelve tools, adaptive thinking with display omitted, the first user turn,
// Claude Code's mid-conversation system message, then user turns of ten tool steps each
// (assistant thinking + tool_use, user tool_result of about 1 KB), with the moving
// cache_control marker on the last tool_result.
type convo struct {
	sid  string
	msgs []string
	step int
	head string // everything before "messages"
	tail string // everything after "messages"
}

func newConvo(sid string) *convo {
	c := &convo{sid: sid}
	c.msgs = append(c.msgs,
		`{"role":"user","content":[{"type":"text","text":"<system-reminder>\nContext.\n</system-reminder>"},{"type":"text","text":"Fix the failing tests in the parser package."}]}`,
		`{"role":"system","content":"Environment: cwd /work\nDeferred tools: WebFetch, WebSearch","output_config":{"effort":"medium"}}`)
	var b strings.Builder
	b.WriteString(`{"model":"claude-opus-5-5","system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.332.0b8;"},{"type":"text","text":"You are a Claude agent.","cache_control":{"type":"ephemeral"}},{"type":"text","text":`)
	sys, _ := json.Marshal(strings.Repeat("You are an agent working with the user. Follow the rules. ", 120))
	b.Write(sys)
	b.WriteString(`,"cache_control":{"type":"ephemeral"}}],"tools":[`)
	for i := 0; i < 12; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"Tool%d","description":%q,"input_schema":{"type":"object","properties":{"command":{"type":"string"}}}}`, i, strings.Repeat("Runs a thing. ", 60))
	}
	b.WriteString(`],"messages":[`)
	c.head = b.String()
	c.tail = fmt.Sprintf(`],"metadata":{"user_id":"{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"%s\"}"},"max_tokens":32000,"thinking":{"type":"adaptive","display":"omitted"},"stream":true}`, sid)
	return c
}

// add appends one tool step, starting a new user turn every ten steps.
func (c *convo) add() {
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

// clone returns an independent copy (the same session id).
func (c *convo) clone() *convo {
	d := *c
	d.msgs = append([]string(nil), c.msgs...)
	return &d
}

// body renders the request.
func (c *convo) body() []byte {
	n := len(c.head) + len(c.tail) + 64
	for _, m := range c.msgs {
		n += len(m) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, c.head...)
	for i, m := range c.msgs {
		if i > 0 {
			b = append(b, ',')
		}
		if i == len(c.msgs)-1 && strings.HasSuffix(m, `"is_error":false}]}`) {
			b = append(b, strings.TrimSuffix(m, `}]}`)...)
			b = append(b, `,"cache_control":{"type":"ephemeral"}}]}`...)
			continue
		}
		b = append(b, m...)
	}
	return append(b, c.tail...)
}

// size is the request's size in the strict fake's tokens (bytes / 3).
func (c *convo) size() int {
	n := len(c.head) + len(c.tail)
	for _, m := range c.msgs {
		n += len(m) + 1
	}
	return n / 3
}

// convoOf grows a conversation until its request holds about tokens tokens (bytes / 3).
func convoOf(sid string, tokens int) *convo {
	c := newConvo(sid)
	for c.size() < tokens {
		c.add()
	}
	return c
}
