package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// The scripted model of the replay: the strict fake's Reply function. It answers from what
// its request carries, as a model would, and knows nothing of the generator's truth:
// acknowledge a batch; answer a question from the batches it can see; when the answer is not
// there and the request carries a [smarter-compact: …] pointer, call the tool the pointer
// and the standing instruction name (smart_compact_search with a pattern for an exact key or
// request id, smart_compact_sql for a count over the whole session, since a count over what
// it can see would miss the trimmed lines); then answer from the tool result.
//
// It reads its prompt perfectly, so keep-everything scores 1.00 here by construction: this
// measures whether every value stays recoverable through serve and its tools, not a model's
// attention over a long prompt (run B of seed 003 shows keep-everything losing lookups and
// counts as the prompt grows).

const (
	toolSearch = "mcp__smarter-compact__smart_compact_search"
	toolSQL    = "mcp__smarter-compact__smart_compact_sql"
	pointerTag = "[smarter-compact: continuing session "
)

var (
	reGet   = regexp.MustCompile(`^QUESTION \d+/\d+: GET (\S+)`)
	reWho   = regexp.MustCompile(`^QUESTION \d+/\d+: Which user made request (\S+)\?`)
	reCount = regexp.MustCompile(`^QUESTION \d+/\d+: How many lines of the whole log have level (\S+) and service (\S+)\?`)
)

func answer(s string) fakeupstream.Reply {
	return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("ANSWER: " + s)}}
}

func blockText(b map[string]any) string {
	if b["type"] != "text" {
		return ""
	}
	s, _ := b["text"].(string)
	return s
}

func lastText(m fakeupstream.Message) string {
	for i := len(m.Content) - 1; i >= 0; i-- {
		if t := blockText(m.Content[i]); t != "" {
			return t
		}
	}
	return ""
}

func toolResults(m fakeupstream.Message) []map[string]any {
	var out []map[string]any
	for _, b := range m.Content {
		if b["type"] == "tool_result" {
			out = append(out, b)
		}
	}
	return out
}

func resultText(b map[string]any) string {
	switch c := b["content"].(type) {
	case string:
		return c
	case []any:
		var sb strings.Builder
		for _, e := range c {
			if m, ok := e.(map[string]any); ok {
				sb.WriteString(blockText(m))
			}
		}
		return sb.String()
	}
	return ""
}

// view is what the model sees: the batches in order and the pointer's session id.
type view struct {
	batches []string
	sid     string
}

func see(req *fakeupstream.Request) view {
	var v view
	for _, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		for _, b := range m.Content {
			t := blockText(b)
			switch {
			case strings.HasPrefix(t, "BATCH "):
				v.batches = append(v.batches, t)
			case strings.HasPrefix(t, pointerTag):
				rest := t[len(pointerTag):]
				if i := strings.IndexByte(rest, ';'); i > 0 {
					v.sid = rest[:i]
				}
			}
		}
	}
	return v
}

// kvValue finds "SET key = value #tag (" in text and returns "value #tag".
func kvValue(text, key string) (string, bool) {
	mark := "SET " + key + " = "
	i := strings.LastIndex(text, mark)
	if i < 0 {
		return "", false
	}
	rest := text[i+len(mark):]
	if j := strings.Index(rest, " ("); j > 0 {
		return rest[:j], true
	}
	return "", false
}

// whoMade finds the line of request id in text and returns its user field.
func whoMade(text, req string) (string, bool) {
	i := strings.Index(text, "req="+req+" ")
	if i < 0 {
		return "", false
	}
	rest := text[i:]
	j := strings.Index(rest, "user=")
	if j < 0 {
		return "", false
	}
	f := strings.Fields(rest[j+len("user="):])
	if len(f) == 0 {
		return "", false
	}
	return f[0], true
}

func scriptedReply(req *fakeupstream.Request) fakeupstream.Reply {
	msgs := req.Messages
	last := msgs[len(msgs)-1]
	if trs := toolResults(last); len(trs) > 0 {
		for i := len(msgs) - 2; i >= 0; i-- {
			if q := lastText(msgs[i]); msgs[i].Role == "user" && strings.HasPrefix(q, "QUESTION ") {
				return fromTool(q, resultText(trs[0]))
			}
		}
		return answer("UNKNOWN (tool result without a question)")
	}
	text := lastText(last)
	switch {
	case strings.HasPrefix(text, "TASK "):
		return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("Ready for the first batch.")}}
	case strings.HasPrefix(text, "BATCH "):
		head, _, _ := strings.Cut(text, "\n")
		return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("Noted " + strings.ToLower(head[:1]) + head[1:] + ".")}}
	case strings.HasPrefix(text, "QUESTION "):
		return ask(req, text)
	}
	return answer("UNKNOWN (not a task message)")
}

// ask answers a question from the visible batches, or calls a recall tool.
func ask(req *fakeupstream.Request, q string) fakeupstream.Reply {
	v := see(req)
	if m := reGet.FindStringSubmatch(q); m != nil {
		for i := len(v.batches) - 1; i >= 0; i-- {
			if val, ok := kvValue(v.batches[i], m[1]); ok {
				return answer(val)
			}
		}
		if v.sid == "" {
			return answer("UNKNOWN")
		}
		return callTool(toolSearch, map[string]any{"session_id": v.sid, "pattern": "SET " + regexp.QuoteMeta(m[1]) + " = ", "role": "user", "limit": 10})
	}
	if m := reWho.FindStringSubmatch(q); m != nil {
		for _, b := range v.batches {
			if u, ok := whoMade(b, m[1]); ok {
				return answer(u)
			}
		}
		if v.sid == "" {
			return answer("UNKNOWN")
		}
		return callTool(toolSearch, map[string]any{"session_id": v.sid, "pattern": "req=" + regexp.QuoteMeta(m[1]) + " ", "role": "user", "limit": 10})
	}
	if m := reCount.FindStringSubmatch(q); m != nil {
		if v.sid != "" { // part of the log is out of context: count over the whole session
			return callTool(toolSQL, map[string]any{"session_id": v.sid,
				"sql": fmt.Sprintf("SELECT count(*) FROM lines WHERE role = 'user' AND text GLOB '* %s %s req=*'", m[1], m[2])})
		}
		n := 0
		for _, b := range v.batches {
			for _, line := range strings.Split(b, "\n") {
				if f := strings.Fields(line); len(f) > 3 && f[1] == m[1] && f[2] == m[2] {
					n++
				}
			}
		}
		return answer(fmt.Sprint(n))
	}
	return answer("UNKNOWN (unparsed question)")
}

func callTool(name string, input map[string]any) fakeupstream.Reply {
	return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("Looking it up."), fakeupstream.ToolUse(name, input)}}
}

// fromTool answers question q from a tool result: the newest search hit that holds the value,
// or the SQL count.
func fromTool(q, result string) fakeupstream.Reply {
	var res struct {
		Results []struct {
			Seq     int64  `json:"seq"`
			Excerpt string `json:"excerpt"`
		} `json:"results"`
		Rows [][]any `json:"rows"`
	}
	if err := json.Unmarshal([]byte(result), &res); err != nil {
		return answer("UNKNOWN (tool error: " + firstLine(result) + ")")
	}
	if reCount.MatchString(q) {
		if len(res.Rows) == 1 && len(res.Rows[0]) == 1 {
			if n, ok := res.Rows[0][0].(float64); ok {
				return answer(fmt.Sprint(int64(n)))
			}
		}
		return answer("UNKNOWN (sql result " + firstLine(result) + ")")
	}
	best, val := int64(-1), ""
	for _, h := range res.Results {
		var v string
		var ok bool
		if m := reGet.FindStringSubmatch(q); m != nil {
			v, ok = kvValue(h.Excerpt, m[1])
		} else if m := reWho.FindStringSubmatch(q); m != nil {
			v, ok = whoMade(h.Excerpt, m[1])
		}
		if ok && h.Seq > best {
			best, val = h.Seq, v
		}
	}
	if best < 0 {
		return answer("UNKNOWN (no hit)")
	}
	return answer(val)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
