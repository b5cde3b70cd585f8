package proxy

import (
	"fmt"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

// replyWait bounds how long the end of a response waits for the session's rows to commit.
// A store that slow (a lock held elsewhere, a stuck disk) must not hold the agent's answer:
// past it the response goes on and the rows land when the queue gets to them.
const replyWait = 5 * time.Second

// storeReply stores the reply of a rewritten request (issue 16, items 3 and 4) and returns
// once they and every row queued before them are committed, or after replyWait. It runs on
// the response's goroutine before the client can have the end of the response (usageTap),
// so a message whose answer the client fully received is in SQLite, kill -9 or not.
//
// The reply's rows are those the next request will give it: the items the client keeps
// (replyAsm) parsed by the request adapters and chained after the request's last row. A cut
// reply keeps its text and thinking rows and ends with a cutReplyMarker row; it stores no
// tool_use. It must never panic into the client's stream.
func (p *Proxy) storeReply(res *rewritten, a *replyAsm) {
	defer func() {
		if v := recover(); v != nil {
			p.failOpen(nil, "panic", fmt.Errorf("%v", v), "proxy/reply_rows.go")
		}
	}()
	rows, err := p.replyRows(res, a)
	if err != nil {
		p.log.Warn("smarter-compact: the reply could not be read for the store; the next request stores it", "session", res.sess.sid, "err", errorClass(err))
	}
	sid := res.sess.sid
	db, err := p.root.Session(sid)
	if err != nil {
		p.storeFault(err)
		return
	}
	if db != res.db {
		// the file was deleted, replaced or recovered since the request: its rows went to
		// the old one, and the next request stores the whole history, this reply included,
		// in order (checkSessionDB)
		return
	}
	done := make(chan struct{})
	onStored := p.cfg().OnRowsStored
	// An empty write still waits its turn: the request's own rows are queued before it.
	db.SyncRowsLater(rows, p.now(), func(r store.SyncResult, err error) {
		if err != nil {
			p.storeFault(err)
		}
		if r.Inserted > 0 && onStored != nil {
			onStored(sid)
		}
		close(done)
	})
	t := time.NewTimer(replyWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		p.log.Warn("smarter-compact: the session's rows took longer than the wait before the end of the response; the response goes on",
			"session", sid, "wait", replyWait.String())
	}
}

// replyRows turns the reply into rows (contract: Rows) chained after the request's last
// row, in the request's thread, in context.
func (p *Proxy) replyRows(res *rewritten, a *replyAsm) ([]store.RowWrite, error) {
	items, dropped := a.conversationItems(res.keepsReasoning)
	complete := a.complete && !a.failed
	prev := res.replyPrev
	var rows []store.RowWrite
	add := func(r row) {
		rows = append(rows, store.RowWrite{Fingerprint: r.fp, Thread: res.thread, Role: r.role, Kind: r.kind,
			Name: r.name, Text: r.text, BlobID: r.blobID, InContext: true})
	}
	for _, raw := range items {
		m, err := parseItem(res.format, raw)
		if err != nil {
			return rows, err
		}
		// a reply's items answer no tool call of their own: no tool names to look up
		if err := p.rowsFor(m, prev, nil); err != nil {
			return rows, err
		}
		for _, r := range m.rows {
			add(r)
		}
		prev = m.endFP
	}
	if !complete && (len(rows) > 0 || len(dropped) > 0) {
		text := cutReplyMarker(dropped)
		add(row{fp: store.Fingerprint(prev, "assistant", "text", "", text), role: "assistant", kind: "text", text: text})
	}
	return rows, nil
}
