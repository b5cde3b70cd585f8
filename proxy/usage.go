package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

type tapKey struct{}

// usage is what the provider reported for one call (api-rules §7). nil: not reported.
type usage struct {
	input, cacheRead, cacheCreation, output *int64
}

func (u usage) prompt() (int64, bool) {
	if u.input == nil && u.cacheRead == nil && u.cacheCreation == nil {
		return 0, false
	}
	var n int64
	for _, p := range []*int64{u.input, u.cacheRead, u.cacheCreation} {
		if p != nil {
			n += *p
		}
	}
	return n, true
}

// usageTap passes a response body through unchanged and reads the provider's usage from
// it on the way (api-rules §2.1, §7): message_start's usage, overwritten by any field a
// message_delta carries; or the usage object of a non-stream JSON body. done runs once, when
// the body ends or is closed.
//
// It also rebuilds the assistant reply (replyAsm) and hands it to replied before the client
// can have all of it (durable before done, issue 16 item 3): in an event stream, before the
// bytes of the event that ends the reply are returned; in a JSON or compressed body, whose
// end only EOF tells, it holds back the last byte of each read until the next one, and
// calls replied before giving back the final byte. replied also runs for a body that ends
// or closes without that event (a cut stream).
type usageTap struct {
	format   apiFormat
	body     io.ReadCloser
	sse      bool
	encoding string
	line     []byte
	whole    []byte // non-stream or compressed bodies, kept (bounded) to parse at the end
	u        usage
	once     sync.Once
	done     func(usage)

	reply    *replyAsm
	replied  func(*replyAsm) // nil: no reply store
	stored   bool            // replied has run
	terminal bool            // the reply's last event is in the bytes read
	held     []byte          // the byte held back (JSON and compressed bodies)
	ended    bool            // the body reached EOF; held goes out next
}

const maxTapped = 8 << 20

func newUsageTap(body io.ReadCloser, f apiFormat, contentType, encoding string, done func(usage), replied func(*replyAsm)) io.ReadCloser {
	enc := strings.ToLower(strings.TrimSpace(encoding))
	if enc == "identity" {
		enc = ""
	}
	return &usageTap{format: f, body: body, sse: strings.HasPrefix(contentType, "text/event-stream"), encoding: enc, done: done,
		reply: newReplyAsm(f), replied: replied}
}

func (t *usageTap) Read(b []byte) (int, error) {
	if t.replied != nil && (!t.sse || t.encoding != "") {
		return t.readHeld(b)
	}
	n, err := t.body.Read(b)
	if n > 0 {
		t.feed(b[:n])
	}
	if t.terminal {
		t.storeReply()
	}
	if err == io.EOF {
		t.finish()
	}
	return n, err
}

// readHeld is Read for a body whose end only EOF tells: every read keeps its last byte
// back, so the client's copy of the body is whole only after finish stored the reply.
func (t *usageTap) readHeld(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if t.ended {
		n := copy(b, t.held)
		t.held = t.held[n:]
		if len(t.held) == 0 {
			return n, io.EOF
		}
		return n, nil
	}
	off := copy(b, t.held)
	t.held = t.held[:0]
	n, err := t.body.Read(b[off:])
	if n > 0 {
		t.feed(b[off : off+n])
	}
	total := off + n
	switch {
	case err == io.EOF:
		t.ended = true
		t.finish()
		return total, io.EOF
	case err != nil:
		return total, err
	}
	if total > 1 || (total == 1 && len(b) > 1) {
		t.held = append(t.held, b[total-1])
		total--
	}
	return total, nil
}

func (t *usageTap) Close() error {
	t.finish()
	return t.body.Close()
}

// storeReply hands the reply to replied once.
func (t *usageTap) storeReply() {
	if t.stored || t.replied == nil {
		return
	}
	t.stored = true
	t.replied(t.reply)
}

func (t *usageTap) feed(b []byte) {
	if !t.sse || t.encoding != "" {
		if len(t.whole)+len(b) <= maxTapped {
			t.whole = append(t.whole, b...)
		}
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(t.line)+len(b) <= maxTapped {
				t.line = append(t.line, b...)
			}
			return
		}
		t.line = append(t.line, b[:i]...)
		t.sseLine(t.line)
		t.line = t.line[:0]
		b = b[i+1:]
	}
}

func (t *usageTap) sseLine(line []byte) {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	if t.replied != nil && t.reply.event(data) {
		t.terminal = true
	}
	if !bytes.Contains(data, []byte(`"usage"`)) {
		return
	}
	switch t.format {
	case chatFormat:
		// with stream_options.include_usage the last chunk carries the usage; the others
		// carry "usage": null (api-rules §3.3)
		var ev struct {
			Usage json.RawMessage `json:"usage"`
		}
		if json.Unmarshal(bytes.TrimSpace(data), &ev) == nil {
			t.u.mergeOpenAI(ev.Usage)
		}
		return
	case responsesFormat:
		// response.completed carries response.usage (api-rules §4.3, §7); an incomplete
		// response (max_output_tokens, content filter) is a finished call too
		var ev struct {
			Type     string `json:"type"`
			Response struct {
				Usage json.RawMessage `json:"usage"`
			} `json:"response"`
		}
		if json.Unmarshal(bytes.TrimSpace(data), &ev) == nil && (ev.Type == "response.completed" || ev.Type == "response.incomplete") {
			t.u.mergeOpenAI(ev.Response.Usage)
		}
		return
	}
	var ev struct {
		Type    string `json:"type"`
		Message struct {
			Usage json.RawMessage `json:"usage"`
		} `json:"message"`
		Usage json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(bytes.TrimSpace(data), &ev) != nil {
		return
	}
	switch ev.Type {
	case "message_start":
		t.u.merge(ev.Message.Usage)
	case "message_delta":
		t.u.merge(ev.Usage)
	}
}

// merge overwrites the fields present in raw (message_delta counts are cumulative).
func (u *usage) merge(raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	var f struct {
		Input         *int64 `json:"input_tokens"`
		CacheRead     *int64 `json:"cache_read_input_tokens"`
		CacheCreation *int64 `json:"cache_creation_input_tokens"`
		Output        *int64 `json:"output_tokens"`
	}
	if json.Unmarshal(raw, &f) != nil {
		return
	}
	if f.Input != nil {
		u.input = f.Input
	}
	if f.CacheRead != nil {
		u.cacheRead = f.CacheRead
	}
	if f.CacheCreation != nil {
		u.cacheCreation = f.CacheCreation
	}
	if f.Output != nil {
		u.output = f.Output
	}
}

// mergeOpenAI reads a Chat or Responses usage object (api-rules §7). Their prompt count
// includes cached tokens; input here excludes cache reads and writes (contract: Events),
// so the prompt is still the sum of the three.
func (u *usage) mergeOpenAI(raw json.RawMessage) {
	if len(raw) == 0 || raw[0] != '{' {
		return
	}
	var f struct {
		Prompt *int64 `json:"prompt_tokens"`
		Input  *int64 `json:"input_tokens"`
		Output *int64 `json:"output_tokens"`
		Compl  *int64 `json:"completion_tokens"`
		// LiteLLM adds Anthropic's cache write count to the Chat usage (api-rules §7)
		CacheCreation *int64 `json:"cache_creation_input_tokens"`
		PromptDetails *struct {
			Cached *int64 `json:"cached_tokens"`
			Write  *int64 `json:"cache_write_tokens"`
		} `json:"prompt_tokens_details"`
		InputDetails *struct {
			Cached *int64 `json:"cached_tokens"`
			Write  *int64 `json:"cache_write_tokens"`
		} `json:"input_tokens_details"`
	}
	if json.Unmarshal(raw, &f) != nil {
		return
	}
	prompt, output, details := f.Input, f.Output, f.InputDetails
	if f.Prompt != nil {
		prompt, output, details = f.Prompt, f.Compl, f.PromptDetails
	}
	if prompt == nil {
		return
	}
	in := *prompt
	u.cacheRead, u.cacheCreation = nil, nil
	if details != nil {
		u.cacheRead, u.cacheCreation = details.Cached, details.Write
	}
	if u.cacheCreation == nil {
		u.cacheCreation = f.CacheCreation
	}
	for _, n := range []*int64{u.cacheRead, u.cacheCreation} {
		if n != nil {
			in -= *n
		}
	}
	if in < 0 {
		in = 0
	}
	u.input = &in
	if output != nil {
		u.output = output
	}
}

func (t *usageTap) finish() {
	t.once.Do(func() {
		body := t.whole
		if t.encoding != "" && len(body) > 0 {
			if dec, err := decodeBody(body, t.encoding); err == nil {
				body = dec
			} else {
				body = nil
			}
		}
		if t.sse && t.encoding != "" {
			for _, line := range bytes.Split(body, []byte{'\n'}) {
				t.sseLine(line)
			}
		} else if !t.sse && len(body) > 0 {
			var msg struct {
				Usage json.RawMessage `json:"usage"`
			}
			if t.replied != nil {
				t.reply.whole(body)
			}
			if json.Unmarshal(body, &msg) == nil {
				if t.format == anthropicFormat {
					t.u.merge(msg.Usage)
				} else {
					t.u.mergeOpenAI(msg.Usage)
				}
			}
		} else if len(t.line) > 0 {
			t.sseLine(t.line)
		}
		t.whole, t.line = nil, nil
		t.storeReply() // before usage: the reply is what the client waits for
		t.done(t.u)
	})
}

// recordUsage calibrates the estimate with the call's prompt size and writes the usage
// event (contract: Events; seed 001: token estimate).
// It runs inside the response copy, so it must never panic into the client's stream.
func (p *Proxy) recordUsage(res *rewritten, u usage) {
	defer func() {
		if v := recover(); v != nil {
			p.log.Warn("smarter-compact: recording usage failed", "panic", fmt.Sprint(v))
		}
	}()
	s := res.sess
	var saving *store.SavingsRecord
	if prompt, ok := u.prompt(); ok && prompt > 0 {
		s.mu.Lock()
		sample := &usageSample{Chars: res.chars, Tokens: int(prompt)}
		ts := s.state.thread(res.thread)
		saving = savingsRecord(res, u, ts.Untrimmed, p.now())
		ts.Untrimmed = int(saving.SentPromptTokens() + saving.RemovedTokens)
		ts.Sample = sample
		s.state.Latest = sample
		s.dirty = true
		// A sample only tunes the estimate, so it is saved at most every samplePersist
		// (and by Close); a cut is saved when it is made.
		save := p.now().Sub(s.saved) >= samplePersist
		s.mu.Unlock()
		if save {
			p.saveState(s)
		}
	}
	// the savings record first: once the usage event has landed, so has its record
	if saving != nil {
		if err := p.root.AppendSavings(s.sid, *saving); err != nil {
			p.log.Warn("smarter-compact: writing the savings record failed", "session", s.sid, "err", err.Error())
		}
	}
	p.event(s.sid, store.Event{At: p.now(), Kind: "usage", Version: p.version, Model: res.model,
		ThreadRoot: res.thread, Trimmed: &res.trimmed, InputTokens: u.input, CacheReadTokens: u.cacheRead,
		CacheCreationTokens: u.cacheCreation, OutputTokens: u.output, Breakpoints: res.breakpoints, BreakpointAt: res.breakpointAt})
}

// samplePersist is how often a session's usage samples reach .trim.json at the most.
const samplePersist = 30 * time.Second

// saveState writes the session's trim state when it has unsaved changes.
// The write happens under the session lock, so an older snapshot never overwrites a newer
// cut.
func (p *Proxy) saveState(s *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dirty {
		return
	}
	if err := p.root.SaveTrimState(s.sid, s.stateJSON()); err != nil {
		p.storeWarn("smarter-compact: saving the trim state failed", err, "session", s.sid)
		return
	}
	s.dirty, s.saved = false, p.now()
}

// Close saves the trim state of every session with unsaved usage samples. The proxy may
// still serve requests afterwards; call it when the service stops.
func (p *Proxy) Close() error {
	p.mu.Lock()
	all := slices.Collect(maps.Values(p.sessions))
	p.mu.Unlock()
	for _, s := range all {
		p.saveState(s)
	}
	return nil
}
