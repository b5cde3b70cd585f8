package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

// session is the proxy's in-memory side of one session: its trim state and, per thread,
// the messages of the last request, so that a request that repeats the previous one and
// appends a turn costs work in proportion to what is new (DESIGN.md §4, fast path).
type session struct {
	mu      sync.Mutex
	sid     string
	state   trimState
	threads map[string][]*message
	last    *known // the previous request of any thread, for the parse fast path
	used    time.Time
	// dirty: state has usage samples not yet in .trim.json; saved: when it was last written.
	dirty bool
	saved time.Time
	// stores are this session's row writes on the store's queue not yet looked at
	// (settleStores).
	stores []*storeJob
	// cacheBytes is what threads and last cost, as cacheCost counts it; written with mu
	// held, read by other sessions' recount without it.
	cacheBytes atomic.Int64
}

// cacheBudget bounds the fast path's caches of all sessions together, in cacheCost bytes
// (about the Go heap they hold). Over it the caches of the least recently used sessions are
// dropped; those sessions keep their trim state and their next request is parsed whole.
// Before this bound serve's memory grew by about 1 MB per 120k-token session it had seen,
// up to 64 sessions. 32 MiB holds about 40 such sessions.
const cacheBudget = 32 << 20

// cacheCost estimates the heap a session's caches hold: the message bytes twice (the bytes,
// and the parse results and rows about as large again) plus the remembered top-level
// values. A message in several threads counts each time, an overestimate.
func (s *session) cacheCost() int64 {
	var n int64
	for _, msgs := range s.threads {
		for _, m := range msgs {
			n += 2*int64(len(m.raw)) + int64(len(m.rendered))
		}
	}
	if s.last != nil {
		for _, v := range s.last.top {
			n += int64(len(v))
		}
	}
	return n
}

// recount updates the session's cache size (s.mu held) and, while the sessions' caches
// together are over cacheBudget, drops those of the least recently used other sessions.
func (p *Proxy) recount(s *session) {
	s.cacheBytes.Store(s.cacheCost())
	type aged struct {
		s    *session
		used time.Time
	}
	var total int64
	var idle []aged
	p.mu.Lock()
	for _, o := range p.sessions {
		total += o.cacheBytes.Load()
		if o != s && o.cacheBytes.Load() > 0 && o.mu.TryLock() { // a session in use keeps its cache
			idle = append(idle, aged{o, o.used})
			o.mu.Unlock()
		}
	}
	p.mu.Unlock()
	budget := p.cacheBudget
	if total <= budget {
		return
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].used.Before(idle[j].used) })
	for _, a := range idle {
		if total <= budget {
			return
		}
		if a.s.mu.TryLock() {
			total -= a.s.cacheBytes.Load()
			a.s.dropCache()
			a.s.mu.Unlock()
		}
	}
}

// dropCache empties the session's fast-path caches (s.mu held). Its store jobs go too:
// they name the messages of the last request, which would otherwise stay in memory until
// the session's next request, and with the cache gone their outcome no longer matters.
func (s *session) dropCache() {
	clear(s.threads)
	s.last = nil
	clear(s.stores)
	s.stores = nil
	s.cacheBytes.Store(0)
}

// maxThreads bounds the threads whose last request a session keeps (a main conversation
// plus subagents); a thread not kept only loses the fast path.
const maxThreads = 8

// threadCacheKey names a thread's cached messages per wire format: the same JSON can be a
// message of two formats (a string-content user message is valid Chat and Anthropic), and a
// message parsed as one format must not be reused as the other.
func threadCacheKey(f apiFormat, thread string) string { return f.String() + "/" + thread }

func (s *session) keepThread(f apiFormat, thread string, msgs []*message) {
	thread = threadCacheKey(f, thread)
	if _, ok := s.threads[thread]; !ok && len(s.threads) >= maxThreads {
		for k := range s.threads {
			delete(s.threads, k)
			break
		}
	}
	s.threads[thread] = msgs
}

// buildMessages parses the request's messages and gives each its rows, reusing the
// messages of the thread's previous request where the bytes and the chain agree.
//
// The thread is named by the chain fingerprint after the first turn's last row, not by its
// first row (contract: messages.thread says first row): Claude Code starts the main
// conversation and each subagent with the same <system-reminder> block, so the first row
// alone would make them one thread, and they would keep re-trimming each other. The first
// turn is the first user message and the user messages right after it (firstRealUser),
// so a turn that Codex sends as two items names the same thread as one message of two
// blocks.
func (p *Proxy) buildMessages(s *session, req *request) (msgs []*message, thread string, err error) {
	msgs = make([]*message, len(req.rawMsgs))
	names := map[string]string{}
	var cache []*message
	prev, firstTurn := "", ""
	for i, raw := range req.rawMsgs {
		if cache != nil && i < len(cache) && cache[i].prevFP == prev && bytes.Equal(cache[i].raw, raw) {
			m := cache[i]
			msgs[i] = m
			for _, u := range m.toolUses {
				names[u.id] = u.name
			}
			prev = m.endFP
			continue
		}
		// A new message is copied out of the body, so the cache holds only the messages it
		// keeps, not every body they first came in.
		m, err := parseItem(req.format, bytes.Clone(raw))
		if err != nil {
			return nil, "", err
		}
		for _, u := range m.toolUses {
			names[u.id] = u.name
		}
		if err := p.rowsFor(m, prev, names); err != nil {
			return nil, "", err
		}
		msgs[i] = m
		prev = m.endFP
		if thread != "" || m.pinned {
			continue
		}
		// the first turn ends at the first message that is not a real user message
		switch {
		case m.role == "user" && m.realUser && m.firstFP != "":
			firstTurn = m.endFP
			continue
		case firstTurn == "" && m.firstFP != "":
			firstTurn = m.endFP
		}
		if firstTurn != "" {
			thread = firstTurn
			cache = s.threads[threadCacheKey(req.format, thread)]
		}
	}
	if thread == "" {
		thread = firstTurn
	}
	switch req.format {
	case responsesFormat:
		prepareItems(msgs, req.model)
	case chatFormat:
		numberLegacyCalls(msgs)
	}
	return msgs, thread, nil
}

// rowsFor builds the rows of a new message (contract: Rows) chained after prev, and the
// compressed form of its large tool results (contract: compressed tool result).
func (p *Proxy) rowsFor(m *message, prev string, names map[string]string) error {
	m.prevFP = prev
	defer func() {
		if m.firstFP != "" {
			m.key = m.firstFP
		} else {
			m.key = store.Fingerprint(m.prevFP, "", "item", "", string(m.raw))
		}
	}()
	if m.pinned {
		m.endFP = prev
		return nil
	}
	if m.pre != nil || m.blocks == nil {
		return p.preRowsFor(m, prev, names)
	}
	m.rows = make([]row, 0, len(m.blocks))
	compressed := false
	for bi := range m.blocks {
		b := &m.blocks[bi]
		role, kind, name, text, ok, err := blockRow(m, b, names)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		r := row{role: role, kind: kind, name: name, text: text}
		if kind == "tool_result" && b.typ == "tool_result" {
			blobID, rendered, err := p.compressToolResult(b.raw, text)
			if err != nil {
				return err
			}
			if rendered != nil {
				r.blobID, b.rendered, compressed = blobID, rendered, true
			}
		}
		r.fp = store.Fingerprint(prev, r.role, r.kind, r.name, r.text)
		prev = r.fp
		m.rows = append(m.rows, r)
	}
	m.endFP = prev
	if len(m.rows) > 0 {
		m.firstFP = m.rows[0].fp
	}
	if compressed {
		m.rendered = renderContent(m, "", false)
	}
	return nil
}

// preRowsFor chains the rows of a Chat message or Responses item and compresses a large
// tool result in the member its row names.
func (p *Proxy) preRowsFor(m *message, prev string, names map[string]string) error {
	m.rows = make([]row, 0, len(m.pre))
	for _, pr := range m.pre {
		r := row{role: pr.role, kind: pr.kind, name: pr.name, text: pr.text}
		if pr.kind == "tool_result" && pr.callID != "" {
			r.name = names[pr.callID]
		}
		if pr.compress != "" {
			blobID, rendered, err := p.compressMember(m.raw, pr.compress, pr.text)
			if err != nil {
				return err
			}
			if rendered != nil {
				r.blobID, m.rendered = blobID, rendered
			}
		}
		r.fp = store.Fingerprint(prev, r.role, r.kind, r.name, r.text)
		prev = r.fp
		m.rows = append(m.rows, r)
	}
	m.endFP = prev
	if len(m.rows) > 0 {
		m.firstFP = m.rows[0].fp
	}
	return nil
}

// sessionID picks the session id by the contract's five sources (contract: Session id),
// each sanitized; it returns "" when none yields one.
func sessionID(h interface{ Get(string) string }, req *request) string {
	sid, _ := sessionIDSource(h, req)
	return sid
}

// sessionIDSource is sessionID and the source it came from: a header name, "metadata",
// or "prompt_cache_key". After the contract's headers (session_id, x-session-id,
// conversation_id) it also reads session-id and thread-id, which Codex sends with the
// value of its prompt_cache_key.
func sessionIDSource(h interface{ Get(string) string }, req *request) (string, string) {
	if sid, source := headerSessionID(h); sid != "" {
		return sid, source
	}
	if sid := metadataSessionID(req.metadata); sid != "" {
		return sid, "metadata"
	}
	if sid, ok := store.SanitizeSID(req.promptCacheKey); ok {
		return sid, "prompt_cache_key"
	}
	for _, name := range laterSIDHeaders {
		if sid, ok := store.SanitizeSID(h.Get(name)); ok {
			return sid, strings.ToLower(name)
		}
	}
	return "", ""
}

// laterSIDHeaders are source 5 of the contract, then Codex's session-id and thread-id.
var laterSIDHeaders = []string{"Session_id", "X-Session-Id", "Conversation_id", "Session-Id", "Thread-Id"}

// hintSessionID guesses the session from headers alone, to find its previous request
// before the body is parsed (fast path); the body may still name another session.
func hintSessionID(h interface{ Get(string) string }) string {
	for _, name := range laterSIDHeaders {
		if sid, ok := store.SanitizeSID(h.Get(name)); ok {
			return sid
		}
	}
	return ""
}

// headerSessionID is the session id from the first two sources: our header, then Claude
// Code's.
func headerSessionID(h interface{ Get(string) string }) (sid, source string) {
	for _, name := range []string{"X-Smarter-Compact-Session-Id", "X-Claude-Code-Session-Id"} {
		if sid, ok := store.SanitizeSID(h.Get(name)); ok {
			return sid, strings.ToLower(name)
		}
	}
	return "", ""
}

var legacyUserID = regexp.MustCompile(`_session_([0-9A-Za-z-]{8,})$`)

// metadataSessionID reads metadata.user_id: the JSON form's session_id, then the legacy
// user_<hex>_account_<uuid>_session_<id> form.
func metadataSessionID(meta []byte) string {
	if kindOf(meta) != '{' {
		return ""
	}
	fields, err := objectMembers(meta)
	if err != nil {
		return ""
	}
	for _, f := range fields {
		if f.key != "user_id" || kindOf(f.val) != '"' {
			continue
		}
		uid, _ := decodeString(f.val)
		if strings.HasPrefix(strings.TrimSpace(uid), "{") {
			if inner, err := objectMembers([]byte(uid)); err == nil {
				for _, g := range inner {
					if g.key == "session_id" && kindOf(g.val) == '"' {
						s, _ := decodeString(g.val)
						if sid, ok := store.SanitizeSID(s); ok {
							return sid
						}
					}
				}
			}
		}
		if m := legacyUserID.FindStringSubmatch(uid); m != nil {
			if sid, ok := store.SanitizeSID(m[1]); ok {
				return sid
			}
		}
	}
	return ""
}

// fallbackSessionID is fp-<first 16 hex of SHA-256(system prompt + first user message)>,
// over the system text blocks joined by newlines and the first user message's row texts
// joined by newlines.
func fallbackSessionID(req *request, msgs []*message) string {
	h := sha256.New()
	if req.format == anthropicFormat || req.system != nil {
		h.Write([]byte(systemText(req.system)))
	}
	if req.format != anthropicFormat {
		// Chat and Responses carry the system prompt as pinned messages
		for _, m := range msgs {
			if m.pinned && m.contentAt >= 0 {
				t, _ := partsText(m.members[m.contentAt].val)
				h.Write([]byte(t))
			}
		}
	}
	for _, m := range msgs {
		if m.role == "user" {
			for i, r := range m.rows {
				if i > 0 {
					h.Write([]byte{'\n'})
				}
				h.Write([]byte(r.text))
			}
			break
		}
	}
	return "fp-" + hex.EncodeToString(h.Sum(nil))[:16]
}

func systemText(system []byte) string {
	switch kindOf(system) {
	case '"':
		s, _ := decodeString(system)
		return s
	case '[':
		elems, err := arrayElems(system)
		if err != nil {
			return ""
		}
		parts := make([]string, 0, len(elems))
		for _, e := range elems {
			if t, typ, err := textBlock(e); err == nil && typ == "text" {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// bindsThinkingToPrefix reports whether the model checks that a thinking block's earlier
// conversation is unchanged (api-rules §1.7.4: Fable 5.1 and Opus 5.5), or the request sets
// thinking.block_binding itself. Other models keep the contract's strip: guessing wrong
// there costs a fatal "Expected thinking" 400 in an open tool loop, while an unlisted model
// that does bind costs one "bound to a different conversation" 400 that Claude Code
// recovers from by resending without thinking (research/clients.md, gotchas).
func bindsThinkingToPrefix(model string, thinking []byte) bool {
	if bytes.Contains(thinking, []byte(`"block_binding"`)) {
		return true
	}
	m := strings.ToLower(model)
	return strings.Contains(m, "opus-5-5") || strings.Contains(m, "fable-5-1")
}
