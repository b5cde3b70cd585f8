package proxy

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

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
	placed := make([]*message, req.msgCount())
	defer func() {
		if err != nil {
			detachAll(placed) // the caller never sees them
		}
	}()
	thread, again, err := p.placeMessages(s, req, placed, true)
	if err == nil && again {
		detachAll(placed)
		clear(placed)
		thread, _, err = p.placeMessages(s, req, placed, false)
	}
	if err != nil {
		return nil, "", err
	}
	msgs = placed
	switch req.format {
	case responsesFormat:
		prepareItems(msgs, req.model)
	case chatFormat:
		numberLegacyCalls(msgs)
	}
	return msgs, thread, nil
}

// placeMessages fills msgs for buildMessages and returns the thread. The thread cache is
// known once the first turn has named the thread; before that, a request that repeats the
// known shape's messages from the start (req.knownMsgs) takes them from the cache they were
// made from (s.lastThread) when early is set, first turn included, rather than parsing them
// again. Should the thread then come out as another one, again is true and nothing of
// msgs is to be kept: the caller fills it again without early, since a thread's cached
// messages carry what was stored for that thread (message.handed).
func (p *Proxy) placeMessages(s *session, req *request, msgs []*message, early bool) (thread string, again bool, err error) {
	var cache []*message
	// Messages before bulk repeat the known shape's (req.knownMsgs), which are the cache's
	// (s.lastThread): the same bytes, and each chained after the one before it as in the
	// request they came from. Once message i-1 is the cache's, message i is too, unchecked.
	bulk := 0
	if k := req.known; !early || k == nil || k != s.last || s.lastThread == "" || req.knownMsgs == 0 {
		early = false
	} else if c := s.threads[s.lastThread]; len(c) == len(k.msgs) {
		cache, bulk = c, min(req.knownMsgs, len(c))
	} else {
		early = false
	}
	// named checks the thread an early cache was taken for.
	named := func(thread string) bool {
		return !early || threadCacheKey(req.format, thread) == s.lastThread
	}
	prev, firstTurn := "", ""
	for i := range msgs {
		raw := req.rawMsg(i)
		var m *message
		switch {
		case i < bulk && (i == 0 || msgs[i-1] == cache[i-1]):
			m = cache[i]
			m.attach(raw)
			msgs[i] = m
			if thread != "" && i+1 < bulk {
				continue // prev is read at the end of the run
			}
		case reusable(cache, i, prev, req) != nil:
			m = cache[i]
			m.attach(raw)
			msgs[i] = m
		default:
			// A new message is a span of the body, not a copy: it lets go of the body when
			// the request is answered (detachAll), and its sum is what the next request is
			// matched by.
			if m, err = parseItem(req.format, raw); err != nil {
				return "", false, err
			}
			m.sum = req.sumAt(i)
			msgs[i] = m
			if err := p.chainRows(m, prev, toolNames(msgs[:i+1]).name); err != nil {
				return "", false, err
			}
		}
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
			if !named(thread) {
				return "", true, nil
			}
			if early {
				continue // the cache is the thread's
			}
			// Not early: a request repeating from its start the known shape made from
			// this thread's cache would have been, so the cache's messages are checked
			// one by one (reusable).
			cache = s.threads[threadCacheKey(req.format, thread)]
		}
	}
	if thread == "" {
		thread = firstTurn
	}
	return thread, !named(thread), nil
}

// detachAll lets every message of a request go of the request's body (message.detach).
func detachAll(msgs []*message) {
	for _, m := range msgs {
		if m != nil {
			m.detach()
		}
	}
}

// reusable returns the thread cache's message i when the request repeats it: the same bytes
// (by length and span sum) after the same chain (prev). nil otherwise.
func reusable(cache []*message, i int, prev string, req *request) *message {
	if i < len(cache) && cache[i].prevFP == prev && cache[i].sum.n == req.msgSpans[i].len() && cache[i].sum == req.sumAt(i) {
		return cache[i]
	}
	return nil
}

// toolNames looks up the tool name of a tool_use id among msgs (the messages up to and
// including the one being parsed), the latest use of the id first: a tool_result's row
// names the tool it answers. Looked up backwards per result, not collected into a map per
// request, so a repeated history costs nothing; the call a result answers is almost always
// in the message just before it.
type toolNames []*message

func (t toolNames) name(id string) string {
	for i := len(t) - 1; i >= 0; i-- {
		uses := t[i].toolUses
		for j := len(uses) - 1; j >= 0; j-- {
			if uses[j].id == id {
				return uses[j].name
			}
		}
	}
	return ""
}

// rowsFor builds the rows of a new message (contract: Rows) chained after prev, and the
// compressed form of its large tool results (contract: compressed tool result); names maps
// tool_use ids to tool names (may be nil).
func (p *Proxy) rowsFor(m *message, prev string, names map[string]string) error {
	return p.chainRows(m, prev, func(id string) string { return names[id] })
}

// chainRows is rowsFor with the tool names looked up by name.
func (p *Proxy) chainRows(m *message, prev string, names func(id string) string) error {
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
		r := newRow(role, kind, name, text)
		if kind == "tool_result" && b.typ == "tool_result" {
			blobID, rendered, err := p.compressToolResult(m.blockRaw(b), r.text)
			if err != nil {
				return err
			}
			if rendered != nil {
				r.blobID, b.rendered, compressed = blobID, rendered, true
			}
		}
		prev = m.chainRow(r, prev)
	}
	m.endChain(prev)
	if compressed {
		m.rendered = renderContent(m, "", false)
	}
	return nil
}

// preRowsFor chains the rows of a Chat message or Responses item and compresses a large
// tool result in the member its row names.
func (p *Proxy) preRowsFor(m *message, prev string, names func(id string) string) error {
	m.rows = make([]row, 0, len(m.pre))
	for _, pr := range m.pre {
		r := newRow(pr.role, pr.kind, pr.name, pr.text)
		if pr.kind == "tool_result" && pr.callID != "" {
			r.name = names(pr.callID)
		}
		if pr.compress != "" {
			blobID, rendered, err := p.compressMember(m.raw, pr.compress, r.text)
			if err != nil {
				return err
			}
			if rendered != nil {
				r.blobID, m.rendered = blobID, rendered
			}
		}
		prev = m.chainRow(r, prev)
	}
	m.endChain(prev)
	m.pre = nil // the rows hold all of it now
	return nil
}

// chainRow gives r its fingerprint after the chain value prev (contract: Rows), appends it
// to m's rows and returns the new chain value.
func (m *message) chainRow(r row, prev string) string {
	r.fp = store.Fingerprint(prev, r.role, r.kind, r.name, r.text)
	m.rows = append(m.rows, r)
	return r.fp
}

// endChain records the chain value after m's last row and the fingerprint of its first.
func (m *message) endChain(end string) {
	m.endFP = end
	if len(m.rows) > 0 {
		m.firstFP = m.rows[0].fp
	}
}

// storeRows queues the request's rows with their in_context flags on the session's write
// queue (contract: Rows), so the request goes upstream without waiting for SQLite; they
// commit while it is answered, with the events held before them (Proxy.event). They are not
// held themselves: the reply's commit, which the end of the response waits for, would carry
// them and put their inserts on the path to the client's last byte. Only the messages not
// handed to the store before with the same flags go (message.handed): a warm request hands
// its new step, a new cut the rows it moves, rather than the whole history. A database
// error is logged as a fail-open line from the queue; the request has its view. f are the
// facts of msgs; their handed follows the messages'.
//
// Once stored, a row's text is freed (settleStores, at the session's next request): the
// thread cache keeps the message for the fast path and the store has the text, so a session
// costs about its request's size in memory rather than twice that. ok is false when the
// session database could not be opened; the caller then drops the thread cache.
func (p *Proxy) storeRows(sess *session, thread string, msgs []*message, f msgFacts, plan cutPlan, now time.Time) (ok bool) {
	sid := sess.sid
	cutFP := ""
	if plan.active() {
		cutFP = msgs[plan.cut].firstFP
	}
	states := make([]uint8, len(msgs))
	var handed []*message
	n := 0
	for i := range f {
		states[i] = handedState(f.kept(&plan, i), f.stripped(plan, i))
		if f[i].handed != states[i] && f[i].flags&factRows != 0 {
			handed = append(handed, msgs[i])
			n += len(msgs[i].rows)
		}
	}
	rows := make([]store.RowWrite, 0, n)
	for i, m := range msgs {
		if f[i].handed == states[i] || f[i].flags&factRows == 0 {
			continue
		}
		kept, strip := states[i]&handedKept != 0, states[i]&handedStrip != 0
		for _, r := range m.rows {
			in := kept && !(strip && r.kind == "thinking")
			w := store.RowWrite{Fingerprint: r.fp, Thread: thread, Role: r.role, Kind: r.kind,
				Name: r.name, Text: r.storedText(), BlobID: r.blobID, InContext: in, TextGone: m.textGone}
			if !in {
				w.CutFingerprint = cutFP
			}
			rows = append(rows, w)
		}
	}
	db, err := p.root.Session(sid)
	if err != nil {
		p.storeFault(err)
		return false
	}
	job := &storeJob{msgs: handed}
	onStored := p.cfg().OnRowsStored
	db.SyncRowsLater(rows, now, func(res store.SyncResult, err error) {
		switch {
		case errors.Is(err, store.ErrTextGone):
			p.log.Warn("smarter-compact: the session's database lacks rows it had stored; the next request stores them again", "session", sid)
		case err != nil:
			p.storeFault(err)
		}
		if res.Inserted > 0 && onStored != nil {
			onStored(sid)
		}
		job.err = err
		job.done.Store(true)
	})
	sess.stores = append(sess.stores, job)
	for i := range f {
		if f[i].handed != states[i] {
			msgs[i].handed, f[i].handed = states[i], states[i]
		}
	}
	return true
}

// The bits of message.handed.
const (
	handedAt    uint8 = 1 << iota // the rows went to the store
	handedKept                    // in context (cutPlan.kept)
	handedStrip                   // thinking rows out of context (stripped)
)

// handedState is message.handed for rows handed with these flags.
func handedState(kept, strip bool) uint8 {
	s := handedAt
	if kept {
		s |= handedKept
	}
	if strip {
		s |= handedStrip
	}
	return s
}

// storeJob is a request's rows on the write queue: the messages they came from, and how
// the write ended (err is written before done, and read only after done reads true).
type storeJob struct {
	msgs []*message
	err  error
	done atomic.Bool
}

// settleStores looks at the session's finished row writes, oldest first (s.mu held): a
// stored request's rows free their text; a failed one drops the thread cache, so the next
// request parses every message again and stores what is missing, text and all.
func (p *Proxy) settleStores(s *session) {
	kept := s.stores[:0]
	for _, job := range s.stores {
		if !job.done.Load() {
			kept = append(kept, job)
			continue
		}
		if job.err != nil {
			clear(s.threads)
			continue
		}
		for _, m := range job.msgs {
			if m.textGone {
				continue
			}
			for i := range m.rows {
				m.rows[i].text, m.rows[i].exact = "", ""
			}
			m.textGone = true
		}
	}
	clear(s.stores[len(kept):])
	s.stores = kept
}

// checkSessionDB notes the writer the session's rows go to (s.mu held). When it is not the
// one they last went to (the file was deleted, replaced, or moved aside as broken), the
// thread cache is dropped, so this request stores the whole history with its text, in
// conversation order (issue 16, item 5): the cached messages' text was freed once stored,
// and storing only the new rows first would give the history higher seqs than its end.
func (p *Proxy) checkSessionDB(s *session) {
	db, err := p.root.Session(s.sid)
	if err != nil {
		return // storeRows reports it
	}
	if s.db != nil && s.db != db {
		clear(s.threads)
	}
	s.db = db
}
