package proxy

import (
	"context"
	"errors"
	"strings"
)

// Recaller is a memory provider (seed 001, context proxy step 4). proxy/memory's Hindsight
// client is one; another provider goes behind the same two calls. Both must return by
// ctx's deadline.
type Recaller interface {
	// Recall returns the memory text the provider recalls from bank for query, "" when it
	// recalls nothing.
	Recall(ctx context.Context, bank, query string) (string, error)
	// Ingesting reports whether bank still has pending or processing ingest operations.
	Ingesting(ctx context.Context, bank string) (bool, error)
}

// recallNote returns what follows the pointer on a new cut (contract: Proxy-inserted text):
// "\n" and the recall block when the provider recalls text for the cut turn's user text,
// then "\n" and the pending-ingest line when the bank is still ingesting. It is "" without
// a provider, without a bank in the session's registration, or when the provider fails or
// is slower than the timeout; then it logs one line. It never waits past the timeout: an
// answer arriving later is dropped.
func (p *Proxy) recallNote(sid string, query func() (string, error)) string {
	s := p.cfg()
	if s.Recall == nil {
		return ""
	}
	reg, err := p.root.Registration(sid)
	if err != nil {
		p.log.Warn("smarter-compact: recall skipped: reading the registration failed", "session", sid, "err", errorClass(err))
		return ""
	}
	if reg == nil || reg.Bank == "" {
		return "" // no bank: recall injection is skipped (contract: Session id, fp- sessions)
	}
	q, err := query()
	if err != nil {
		p.log.Warn("smarter-compact: recall skipped: the cut turn's text is not available", "session", sid, "err", errorClass(err))
		return ""
	}
	start := p.now()
	ctx, cancel := context.WithTimeout(context.Background(), s.RecallTimeout)
	defer cancel()

	type answer struct {
		text    string
		pending bool
		err     error
	}
	recalled, ingesting := make(chan answer, 1), make(chan answer, 1)
	go func() {
		if strings.TrimSpace(q) == "" {
			recalled <- answer{}
			return
		}
		t, err := s.Recall.Recall(ctx, reg.Bank, q)
		recalled <- answer{text: t, err: err}
	}()
	go func() {
		b, err := s.Recall.Ingesting(ctx, reg.Bank)
		ingesting <- answer{pending: b, err: err}
	}()
	// Each answer is taken or given up at the deadline; a provider that ignores ctx
	// finishes in the background into the buffered channels.
	take := func(c chan answer) answer {
		select {
		case a := <-c:
			return a
		case <-ctx.Done():
			return answer{err: ctx.Err()}
		}
	}
	ra, ia := take(recalled), take(ingesting)

	if ra.err != nil {
		what := "failed"
		if errors.Is(ra.err, context.DeadlineExceeded) {
			what = "timed out after " + s.RecallTimeout.String()
		}
		p.log.Warn("smarter-compact: recall "+what+": the pointer goes alone", "session", sid, "bank", reg.Bank,
			"err", errorClass(ra.err), "ms", p.now().Sub(start).Milliseconds())
		return ""
	}
	var b strings.Builder
	if blk := RecallBlock(ra.text, s.RecallMaxChars); blk != "" {
		b.WriteString("\n")
		b.WriteString(blk)
	}
	if ia.err != nil {
		p.log.Warn("smarter-compact: memory ingest status failed: no pending-ingest line", "session", sid, "bank", reg.Bank, "err", errorClass(ia.err))
	} else if ia.pending {
		b.WriteString("\n")
		b.WriteString(MemoryIngestNote(sid))
	}
	return b.String()
}

// cutText returns the user text of the cut turn at msgs[i] (its text rows joined by "\n"),
// the query of recall on trim. Rows whose text the store already took are read back from
// the session database.
func (p *Proxy) cutText(sid string, m *message) (string, error) {
	var fps []string
	for _, r := range m.rows {
		if r.role == "user" && r.kind == "text" {
			fps = append(fps, r.fp)
		}
	}
	if len(fps) == 0 {
		return "", nil
	}
	texts := map[string]string{}
	if m.textGone {
		db, err := p.root.Session(sid)
		if err != nil {
			return "", err
		}
		if texts, err = db.Texts(fps); err != nil {
			return "", err
		}
	} else {
		for _, r := range m.rows {
			texts[r.fp] = r.text
		}
	}
	parts := make([]string, 0, len(fps))
	for _, fp := range fps {
		if t := texts[fp]; t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n"), nil
}
