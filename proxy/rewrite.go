package proxy

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

// rewritten is a request the proxy rewrote, with what the usage tap needs afterwards.
type rewritten struct {
	// out is the body to send: spans of the client's body and the inserted bytes
	// (segments); body() flattens it.
	out     *segments
	format  apiFormat
	sess    *session
	thread  string
	model   string
	chars   int
	trimmed int64 // 0 sent whole, 1 carried an earlier cut, 2 made a new cut (contract: Events)
	// wholeChars and threshold are for the savings record (savings.go): the estimate
	// characters of the request as the agent sent it, and the trim threshold that applied.
	wholeChars, threshold int
	// replyPrev is the chain value after the request's last row: the reply's rows chain
	// after it, as they will in the next request (contract: Rows).
	replyPrev string
	// keepsReasoning (Chat): an assistant message of the request has a thinking row, so
	// the client sends reasoning back and the reply's rows include it.
	keepsReasoning bool
	// db is the writer the request's rows went to (checkSessionDB).
	db *store.DB

	// breakpoints and breakpointAt: the Anthropic route only (contract: Events); nil on
	// the others.
	breakpoints  *int64
	breakpointAt string
}

// body returns the rewritten body as one slice: a copy of the parts, or the one part when
// there is only one (segments.bytes).
func (r *rewritten) body() []byte { return r.out.bytes() }

// errPassThrough is returned for a request that must reach the upstream untouched (a Codex
// compaction, a previous_response_id continuation): not a fault, so no fail-open line.
var errPassThrough = errors.New("pass through")

// target is what the route says about a request: its wire format and the upstream family
// ("anthropic", "openai", "codex").
type target struct {
	format apiFormat
	family string
}

// rewrite runs steps 3–10 of the request path (DESIGN.md §4) on a decoded Anthropic
// Messages body. An error means the request goes upstream unchanged.
func (p *Proxy) rewrite(h http.Header, body []byte) (*rewritten, *session, error) {
	return p.rewriteAs(target{anthropicFormat, "anthropic"}, h, body)
}

// rewriteAs is rewrite for a request of any format.
func (p *Proxy) rewriteAs(tg target, h http.Header, body []byte) (*rewritten, *session, error) {
	var sess *session
	res, err := p.rewriteFor(tg, "", h, body, false, &sess)
	return res, sess, err
}

// rewriteFor is rewrite with more inputs: tg names the format and upstream, dry renders
// the session's current view without trimming, storing or caching anything (count_tokens
// must see what the model sees: api-rules §2.2 runs the same thinking prefix check), and
// out receives the session as soon as it is known, so a panic later can still be recorded
// against it. agent is the route's agent, recorded in the trim state.
func (p *Proxy) rewriteFor(tg target, agent string, h http.Header, body []byte, dry bool, out **session) (*rewritten, error) {
	// Claude Code names its session in a header, so the session (and what its previous
	// request looked like) is usually known before the body is parsed. Other clients name
	// it in the body; a header hint still finds their previous request.
	var sess *session
	sid, source := headerSessionID(h)
	var prev *known
	if sid != "" {
		var err error
		if sess, err = p.lockedSession(sid); err != nil {
			return nil, newFault("state", err)
		}
		defer sess.mu.Unlock()
		*out = sess
		prev = sess.last
	} else if hint := hintSessionID(h); hint != "" {
		prev = p.peekKnown(hint)
	}
	req, err := parseRequest(tg.format, body, prev)
	if err != nil {
		return nil, newFault("parse", err)
	}
	if req.passThrough != "" {
		return nil, errPassThrough
	}
	if sess == nil {
		if sid, source = sessionIDSource(h, req); sid == "" {
			tmp := &session{threads: map[string][]*message{}}
			msgs, _, err := p.buildMessages(tmp, req)
			if err != nil {
				return nil, newFault("parse", err)
			}
			sid, source = fallbackSessionID(req, msgs), "fingerprint"
		}
		if sess, err = p.lockedSession(sid); err != nil {
			return nil, newFault("state", err)
		}
		defer sess.mu.Unlock()
		*out = sess
	}
	p.noteSource(sess, source, agent)
	if !dry {
		p.registerFirstSeen(sess, agent, body)
	}
	p.settleStores(sess)
	if !dry {
		p.checkSessionDB(sess)
	}

	msgs, thread, err := p.buildMessages(sess, req)
	if err != nil {
		return nil, newFault("parse", err)
	}
	// the cached messages keep no bytes of this body once it is rendered (message.attach)
	defer detachAll(msgs)
	req.readFacts(msgs)
	bpCount, bpAt := anthropicBreakpoints(req, msgs)
	now := p.now()
	ts, plan, block := sess.threadPlan(thread, msgs, dry)
	threshold := thresholdFor(p.cfg().TrimAtTokens, req.model)
	trimmed := int64(0)
	if plan.active() {
		trimmed = 1
	}
	est := func(pl cutPlan, blk string) int {
		return sess.state.estimate(thread, viewChars(req, msgs, pl, blk), p.cfg().CharsPerToken)
	}
	before := est(plan, block)
	force := !dry && p.root.Force(sid)
	if !dry && (force || before >= threshold) {
		if next, nblock, ok := p.newCut(sess, sid, ts, req, msgs, plan, threshold, before, force, now, est); ok {
			plan, block, trimmed = next, nblock, 2
		}
		if force {
			p.clearForce(sid)
		}
	}
	if !dry {
		after := before
		if before >= threshold {
			after = est(plan, block) // the rare path: over the threshold
		}
		p.noteThreshold(sid, before, after, threshold, trimmed == 2)
	}

	v := render(req, msgs, plan, block, p.cfg().StandingInstruction, tg.family)
	if !dry {
		p.keepRequest(sess, thread, req, msgs, plan, now)
	}
	res := &rewritten{out: v.out, format: req.format, sess: sess, thread: thread, model: req.model, chars: v.chars,
		trimmed: trimmed, breakpoints: bpCount, breakpointAt: bpAt, db: sess.db,
		wholeChars: wholeChars(req, msgs), threshold: threshold}
	if n := len(msgs); n > 0 {
		res.replyPrev = msgs[n-1].endFP
	}
	if req.format == chatFormat {
		res.keepsReasoning = keepsReasoning(msgs)
	}
	return res, nil
}

// threadPlan returns the thread's trim state, its stored cut found in msgs, and the
// pointer text that cut carries ("" without one). dry (count_tokens) leaves no new thread
// in the saved state.
func (s *session) threadPlan(thread string, msgs []*message, dry bool) (*threadState, cutPlan, string) {
	ts := s.state.Threads[thread]
	if ts == nil {
		ts = &threadState{}
		if !dry { // a count_tokens call must leave no trace in the saved state
			s.state.Threads[thread] = ts
		}
	}
	plan := resolvePlan(ts, msgs)
	block := ts.Block
	if !plan.active() {
		block = ""
	}
	return ts, plan, block
}

// keepRequest stores the request's rows and keeps what the fast path needs of it: the
// thread's messages, the request's known shape, and the cache's size (sess.mu held).
func (p *Proxy) keepRequest(sess *session, thread string, req *request, msgs []*message, plan cutPlan, now time.Time) {
	f := req.factsFor(msgs)
	key := threadCacheKey(req.format, thread)
	sess.lastThread = ""
	if p.storeRows(sess, thread, msgs, f, plan, now) {
		sess.keepThread(req.format, thread, msgs)
		sess.lastThread = key
	} else {
		// the rows of messages the fast path reuses must be parsed again, with their text
		clear(sess.threads)
	}
	sess.last = remember(req, msgs, sess.last)
	sess.used = now
	p.recount(sess, key, f.cacheCost())
}

// newCut plans a new cut for a request at or over the threshold, or forced (contract: Trim),
// and when it drops more than the current plan and (unless forced) makes the request
// smaller, records it in ts and the trim state file, writes the trim event and returns the
// plan and its pointer text. est is the request's calibrated estimate of a plan and block.
func (p *Proxy) newCut(sess *session, sid string, ts *threadState, req *request, msgs []*message, plan cutPlan,
	threshold, before int, force bool, now time.Time, est func(cutPlan, string) int) (cutPlan, string, bool) {
	budget := int(p.cfg().TrimToFraction * float64(threshold))
	provisional := PointerText(sid, 0)
	under := func(pl cutPlan) bool { return est(pl, provisional) < budget }
	next := planTrim(msgs, plan, under, bindsThinkingToPrefix(req.model, req.thinking) && !p.contractStripOnly)
	// A trim the threshold asks for must make the request smaller: dropping one short
	// step while adding the pointer would grow it and still cost the prompt cache. A
	// forced trim (/smarter-compact) is the user's call.
	if !next.active() {
		return plan, "", false
	}
	dropped := next.dropped(msgs)
	if dropped <= plan.dropped(msgs) || !(force || est(next, PointerText(sid, dropped)) < before) {
		return plan, "", false
	}
	plan, block := next, PointerText(sid, dropped)
	// Recall is asked once per cut and stored with it, so later requests repeat the
	// block byte for byte (contract: Proxy-inserted text).
	block += p.recallNote(sid, func() (string, error) { return p.cutText(sid, msgs[plan.cut]) })
	*ts = threadState{Cut: msgs[plan.cut].key, KeepHead: plan.keepHead, Dropped: dropped, Block: block, Sample: ts.Sample, Untrimmed: ts.Untrimmed}
	if plan.gap > plan.cutEnd+1 && plan.gap < len(msgs) {
		ts.Gap = msgs[plan.gap].key
	}
	if start, last := latestRun(msgs); last >= 0 && plan.strip >= start {
		// named by the start of the latest assistant run at trim time; models that
		// bind thinking strip that message too (api-rules §1.7.4)
		if plan.strip > last {
			ts.StripFP, ts.StripAfter = msgs[last].key, true
		} else {
			ts.StripFP = msgs[start].key
		}
	}
	after := est(plan, block)
	sess.dirty = true
	if err := p.root.SaveTrimState(sid, sess.stateJSON()); err != nil {
		p.storeFault(err) // stays dirty: Close tries again
	} else {
		sess.dirty, sess.saved = false, now
	}
	p.event(sid, store.Event{At: now, Kind: "trim", Version: p.version,
		TokensBefore: i64(before), TokensAfter: i64(after), Dropped: i64(dropped)})
	p.log.Info("trim", "session", sid, "tokens_before", before, "tokens_after", after, "dropped", dropped, "forced", force,
		"recall", len(block) > len(PointerText(sid, dropped)))
	return plan, block, true
}

func i64(n int) *int64 { v := int64(n); return &v }

// resolvePlan finds the thread's stored cut in this request (sticky cut, contract: Trim).
// A cut whose turn the request no longer carries (a rewritten history) is not applied.
func resolvePlan(ts *threadState, msgs []*message) cutPlan {
	first := firstRealUser(msgs)
	p := noPlan(first)
	if ts.Cut == "" || first < 0 {
		return p
	}
	find := func(fp string) int {
		if fp == "" {
			return -1
		}
		for i, m := range msgs {
			if m.key == fp {
				return i
			}
		}
		return -1
	}
	if p.cut = find(ts.Cut); p.cut < 0 {
		return p
	}
	p.keepHead = ts.KeepHead
	if p.cut > first && !p.keepHead {
		p.reply = replyBefore(msgs, p.cut)
	}
	p.cutEnd = turnEnd(msgs, p.cut)
	p.gap = p.cutEnd + 1
	if g := find(ts.Gap); g > p.cutEnd {
		p.gap = g
	}
	if ts.StripFP != "" {
		if at := find(ts.StripFP); at >= 0 {
			p.strip = at
			if ts.StripAfter {
				p.strip++
			}
		} else {
			p.strip = p.cut
		}
	}
	return p
}

// event queues e on the session's write queue, after the rows queued before it, as a held
// write (store.AddEventHeld): a trim event commits with the request's rows queued right after
// it, a usage event with the session's next request, rather than each alone.
func (p *Proxy) event(sid string, e store.Event) {
	failed := func(err error) {
		p.storeWarn("smarter-compact: writing an event failed", err, "kind", e.Kind)
	}
	db, err := p.root.Session(sid)
	if err != nil {
		failed(err)
		return
	}
	db.AddEventHeld(e, failed)
}

// anthropicBreakpoints is breakpoints for an Anthropic request; nil and "" on the other
// routes (contract: Events).
func anthropicBreakpoints(req *request, msgs []*message) (*int64, string) {
	if req.format != anthropicFormat {
		return nil, ""
	}
	n, at := breakpoints(req, msgs)
	return &n, at
}

// clearForce deletes the session's force flag once a forced request was trimmed or found
// nothing to drop.
func (p *Proxy) clearForce(sid string) {
	if err := p.root.ClearForce(sid); err != nil {
		p.log.Warn("smarter-compact: clearing the force flag failed", "session", sid, "err", err.Error())
	}
}

// breakpoints counts the incoming request's cache_control markers and names their
// positions in prefix order: tools, system, m-<k> (contract: Events, breakpoints). The
// messages' markers were counted when they were parsed, so a repeated history costs nothing.
func breakpoints(req *request, msgs []*message) (int64, string) {
	var pos []string
	for i := countMarkers(req.tools); i > 0; i-- {
		pos = append(pos, "tools")
	}
	for i := countMarkers(req.system); i > 0; i-- {
		pos = append(pos, "system")
	}
	for i, x := range req.factsFor(msgs) {
		if x.flags&factMarkers == 0 {
			continue
		}
		for n := msgs[i].markers; n > 0; n-- {
			pos = append(pos, "m-"+strconv.Itoa(len(msgs)-i))
		}
	}
	return int64(len(pos)), strings.Join(pos, ",")
}

// countMarkers counts "cache_control" keys in a raw JSON value. Inside a JSON string the
// quotes would be escaped, so an unescaped "cache_control" followed by ':' is a key.
func countMarkers(raw []byte) int {
	key := []byte(`"cache_control"`)
	n := 0
	for i := 0; ; {
		j := bytes.Index(raw[i:], key)
		if j < 0 {
			return n
		}
		i += j + len(key)
		if k := skipSpace(raw, i); k < len(raw) && raw[k] == ':' {
			n++
		}
	}
}

// storeFault logs a context-store error on the request path: the request goes on with its
// rewritten view (contract: Rows). The store counted it in its health record (shown by the
// dashboard, status and the tray); the line says what to do the first time a condition is
// seen (a full disk, a read-only file) and goes to the debug level while it lasts.
func (p *Proxy) storeFault(err error) {
	f := newFaultAt(2, "store", err)
	p.storeWarn("smarter-compact: fail-open "+f.kind+" at "+f.loc, err)
}

// storeWarn logs msg for a store error: at warning level with what to do when it announces
// a condition (store.WriteError), at debug level while that condition lasts.
func (p *Proxy) storeWarn(msg string, err error, args ...any) {
	args = append(args, "err", errorClass(err))
	if we := store.AsWriteError(err); we != nil {
		if !we.Announce {
			p.log.Debug(msg, append(args, "class", we.Class)...)
			return
		}
		args = append(args, "class", we.Class, "do", we.Hint)
	}
	p.log.Warn(msg, args...)
}

// keepsReasoning reports whether an assistant message of msgs has a thinking row: the
// client sends reasoning back with its history.
func keepsReasoning(msgs []*message) bool {
	for _, m := range msgs {
		if m.role != "assistant" {
			continue
		}
		for _, r := range m.rows {
			if r.kind == "thinking" {
				return true
			}
		}
	}
	return false
}
