package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SyncRows: the messages and lines writes of one request (contract: Rows, Writes), planned against
// the fingerprint index and done in one transaction.

// RowWrite is one row as the proxy sees it on a request (contract: Rows).
type RowWrite struct {
	Fingerprint string // the row key (Fingerprint); must not be empty
	Thread      string // fingerprint of the first row of the row's conversation
	Role        string // user · assistant · tool
	Kind        string // text · tool_use · tool_result · thinking
	Name        string // "" stores NULL
	Text        string
	BlobID      string // "" stores NULL
	InContext   bool
	// CutFingerprint names the first row of the cut turn that dropped this row; used for
	// trimmed_at_seq when InContext is false ("" leaves trimmed_at_seq NULL).
	CutFingerprint string
	// TextGone says the caller no longer holds Text because an earlier call stored the row
	// (the proxy frees the text of rows it has stored). If the row is not stored after all
	// (its database was deleted meanwhile), SyncRows leaves it out, writes the rest and
	// returns its result with an error wrapping ErrTextGone; the caller sends the rows again
	// with their text.
	TextGone bool
}

// ErrTextGone is SyncRows's error for a row marked TextGone that is not stored.
var ErrTextGone = errors.New("a row to insert came without its text (RowWrite.TextGone); send it again with the text")

// SyncResult counts what SyncRows wrote: Inserted new messages rows (each with its lines) and
// Updated stored rows whose in_context changed.
type SyncResult struct{ Inserted, Updated int }

// syncPlan holds indexes into the rows given to SyncRows.
type syncPlan struct {
	inserts []int
	updates []int
}

func (p *syncPlan) empty() bool { return len(p.inserts) == 0 && len(p.updates) == 0 }

// plan picks the rows to insert and the stored rows whose flag changes. Only rows that write
// are tracked for repeats, so a call that writes nothing costs one index lookup per row.
func (d *DB) plan(rows []RowWrite) (syncPlan, error) {
	var p syncPlan
	var planned map[string]struct{}
	for i := range rows {
		r := &rows[i]
		if r.Fingerprint == "" {
			return syncPlan{}, fmt.Errorf("row %d has no fingerprint", i)
		}
		st, known := d.index[r.Fingerprint]
		if known && st.inContext == r.InContext {
			continue
		}
		if _, dup := planned[r.Fingerprint]; dup {
			continue // a repeated fingerprint: the first occurrence that writes wins
		}
		if planned == nil {
			planned = make(map[string]struct{})
		}
		planned[r.Fingerprint] = struct{}{}
		if known {
			p.updates = append(p.updates, i)
		} else if !r.TextGone { // without its text it cannot be stored (SyncRows: textGone)
			p.inserts = append(p.inserts, i)
		}
	}
	return p, nil
}

// SyncRows stores a request's rows (contract: Rows): it inserts rows whose fingerprint is not
// stored yet, each with one lines row per \n-separated line of its text (line_no from 1, role
// copied), and updates in_context of stored rows whose flag changed (to 0: trimmed_at = now and
// trimmed_at_seq = seq of CutFingerprint's row, NULL when "" or unknown; to 1: both NULL). New
// rows get seq in the order given and may already be out of context, with the same trimmed_at
// rule; CutFingerprint may name a row inserted by the same call. Everything happens in one
// BEGIN IMMEDIATE transaction; a call that inserts and moves nothing runs no transaction at
// all. Stored rows a call does not carry keep their values. now gives created_at and
// trimmed_at (ISO 8601 UTC, whole seconds). Of a fingerprint repeated within one call, the
// first occurrence that writes something wins.
//
// The fingerprint index is reloaded when PRAGMA data_version shows another connection
// committed. Errors are SQLite's (for example "database is locked" after the 1 s busy
// timeout); nothing is written then and the index is unchanged.
func (d *DB) SyncRows(rows []RowWrite, now time.Time) (res SyncResult, err error) {
	defer func() { d.noteBroken(err); d.noteReadOnly(err); err = d.noted(err) }()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.use(); err != nil {
		return SyncResult{}, err
	}
	if err := d.checkHeader(); err != nil {
		return SyncResult{}, fmt.Errorf("sync rows: %w", err)
	}
	ctx := context.Background()
	if err := d.refreshIndex(ctx); err != nil {
		return SyncResult{}, fmt.Errorf("sync rows: %w", err)
	}
	p, err := d.plan(rows)
	if err != nil {
		return SyncResult{}, fmt.Errorf("sync rows: %w", err)
	}
	if p.empty() {
		return SyncResult{}, d.textGone(rows)
	}
	if _, err := d.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return SyncResult{}, fmt.Errorf("sync rows: begin: %w", err)
	}
	res, changed, err := d.syncLocked(ctx, rows, p, formatTime(now))
	if err != nil {
		_, _ = d.conn.ExecContext(ctx, "ROLLBACK")
		return SyncResult{}, fmt.Errorf("sync rows: %w", err)
	}
	if res == (SyncResult{}) {
		_, _ = d.conn.ExecContext(ctx, "ROLLBACK")
		return res, d.textGone(rows)
	}
	if _, err := d.conn.ExecContext(ctx, "COMMIT"); err != nil {
		_, _ = d.conn.ExecContext(ctx, "ROLLBACK")
		return SyncResult{}, fmt.Errorf("sync rows: commit: %w", err)
	}
	d.noteCommit()
	for fp, st := range changed {
		d.index[fp] = st
	}
	return res, d.textGone(rows)
}

// syncJob is a SyncRowsLater call on the write queue.
type syncJob struct {
	rows []RowWrite
	now  time.Time
	done func(SyncResult, error) // may be nil
}

// syncBatch writes the queue's batch of rows and event jobs (each with sync or event set) in
// one transaction, in order, and puts each job's outcome in res and errs: what SyncRows and
// AddEvent would have returned for it called one after the other. The jobs see each other's
// writes as they would then (a later job's rows find an earlier one's in the index). One
// header check, one data_version check and one commit serve the batch. When anything fails
// (a locked or broken database, a bad row, a failed statement or commit) nothing of the batch
// is kept and each job runs again alone through SyncRows or AddEvent, so an error reaches
// exactly the jobs it concerns, with the health record and recovery of a single call.
func (d *DB) syncBatch(batch []queuedJob, res []SyncResult, errs []error) {
	one := func(i int) {
		if j := batch[i]; j.sync != nil {
			res[i], errs[i] = d.SyncRows(j.sync.rows, j.sync.now)
		} else {
			errs[i] = d.AddEvent(*j.event)
		}
	}
	if len(batch) > 1 && d.trySyncBatch(batch, res, errs) {
		for i := range errs {
			errs[i] = d.noted(errs[i])
		}
		return
	}
	for i := range batch {
		one(i)
	}
}

// trySyncBatch is syncBatch's single transaction; false means nothing was written and the
// index is marked for a reload.
func (d *DB) trySyncBatch(batch []queuedJob, res []SyncResult, errs []error) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, j := range batch {
		if j.event != nil && j.event.Kind == "" {
			return false // AddEvent's error
		}
	}
	if d.use() != nil || d.checkHeader() != nil {
		return false
	}
	ctx := context.Background()
	if d.refreshIndex(ctx) != nil {
		return false
	}
	if _, err := d.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return false
	}
	fail := func() bool {
		_, _ = d.conn.ExecContext(ctx, "ROLLBACK")
		d.dataVersion = -1 // the index may hold rows of the rolled-back jobs: reload it
		return false
	}
	wrote := false
	for i, j := range batch {
		if e := j.event; e != nil {
			at := e.At
			if at.IsZero() {
				at = time.Now()
			}
			if d.insertEvent(ctx, *e, at) != nil {
				return fail()
			}
			wrote = true
			continue
		}
		p, err := d.plan(j.sync.rows)
		if err != nil {
			return fail()
		}
		if p.empty() {
			continue
		}
		r, changed, err := d.syncLocked(ctx, j.sync.rows, p, formatTime(j.sync.now))
		if err != nil {
			return fail()
		}
		for fp, st := range changed {
			d.index[fp] = st
		}
		res[i] = r
		if r != (SyncResult{}) {
			wrote = true
		}
	}
	end := "COMMIT"
	if !wrote {
		end = "ROLLBACK"
	}
	if _, err := d.conn.ExecContext(ctx, end); err != nil {
		return fail()
	}
	if wrote {
		d.noteCommit()
	}
	for i, j := range batch {
		if j.sync != nil {
			errs[i] = d.textGone(j.sync.rows)
		}
	}
	return true
}

// textGone reports the rows marked TextGone that are not stored: SyncRows left them out
// and wrote the rest.
func (d *DB) textGone(rows []RowWrite) error {
	n := 0
	for i := range rows {
		if rows[i].TextGone {
			if _, ok := d.index[rows[i].Fingerprint]; !ok {
				n++
			}
		}
	}
	if n > 0 {
		return fmt.Errorf("sync rows: %d rows left out: %w", n, ErrTextGone)
	}
	return nil
}

// Multi-row INSERTs: FTS5 flushes its pending terms at the savepoint every statement that
// touches it opens, so each statement costs a segment write. A call's rows and lines go in as
// few statements as possible while the number of prepared statements per database stays
// small: up to exactBatch rows in one statement of that exact size, more in batches of
// exactBatch times a power of two, at most maxBatch (300 lines: 256 + 32 + 12). Only the
// statements of up to exactBatch rows stay prepared: the larger ones serve a session's first
// request and a new cut, and kept they made every writer that had one about a third larger
// (BenchmarkWriterFootprint: 1.1 → 0.77 MB a writer at a 256 KiB page cache).
const (
	exactBatch   = 16
	msgColumns   = "fingerprint, thread, role, kind, name, text, blob_id, in_context, trimmed_at_seq, trimmed_at, created_at"
	msgParams    = 11
	msgMaxBatch  = 64
	lineColumns  = "message_seq, line_no, role, text"
	lineParams   = 4
	lineMaxBatch = 256
)

// execBatched runs "INSERT INTO table (columns) VALUES ..." over args (width values per row)
// and returns the last statement's result.
func (d *DB) execBatched(ctx context.Context, cache *map[int]*sql.Stmt, table, columns string, width, maxBatch int, args []any) (sql.Result, error) {
	var res sql.Result
	for len(args) > 0 {
		n := len(args) / width
		if n > exactBatch {
			p := exactBatch
			for p*2 <= n && p*2 <= maxBatch {
				p *= 2
			}
			n = p
		}
		st := (*cache)[n]
		keep := n <= exactBatch
		if st == nil {
			ph := "(?" + strings.Repeat(", ?", width-1) + ")"
			q := "INSERT INTO " + table + " (" + columns + ") VALUES " + ph + strings.Repeat(", "+ph, n-1)
			var err error
			if st, err = d.conn.PrepareContext(ctx, q); err != nil {
				return nil, fmt.Errorf("prepare insert into %s: %w", table, err)
			}
			if keep {
				if *cache == nil {
					*cache = make(map[int]*sql.Stmt)
				}
				(*cache)[n] = st
			}
		}
		var err error
		res, err = st.ExecContext(ctx, args[:n*width]...)
		if !keep {
			_ = st.Close()
		}
		if err != nil {
			return nil, fmt.Errorf("insert into %s: %w", table, err)
		}
		args = args[n*width:]
	}
	return res, nil
}

// insertLines inserts the lines rows of the messages rows[i] for i in inserts, which got
// the seqs base+1, base+2, ... in order (one lines row a line of text, line_no from 1).
// The lines go out lineMaxBatch at a time as they are cut. These are the statements one
// argument list for the whole call gave, because execBatched cuts a long list into
// statements of lineMaxBatch rows (a power of two times exactBatch) and then the rest. One
// list for the whole call held four boxed values for every line of a session's history on
// its first request: 19 MB of serve's 79 MB live heap in the inuse profile of cmd/bench's
// 32 concurrent 120k sessions.
func (d *DB) insertLines(ctx context.Context, rows []RowWrite, inserts []int, base int64) error {
	args := make([]any, 0, lineMaxBatch*lineParams)
	for k, i := range inserts {
		r := &rows[i]
		seq := base + 1 + int64(k)
		text := r.Text
		for n := int64(1); ; n++ {
			line, rest, more := strings.Cut(text, "\n")
			args = append(args, seq, n, r.Role, line)
			if len(args) == cap(args) {
				if _, err := d.execBatched(ctx, &d.stInsertLines, "lines", lineColumns, lineParams, lineMaxBatch, args); err != nil {
					return err
				}
				clear(args)
				args = args[:0]
			}
			if !more {
				break
			}
			text = rest
		}
	}
	if len(args) == 0 {
		return nil
	}
	_, err := d.execBatched(ctx, &d.stInsertLines, "lines", lineColumns, lineParams, lineMaxBatch, args)
	return err
}

// syncLocked writes the plan inside the open transaction and returns the index entries to
// apply once it commits.
func (d *DB) syncLocked(ctx context.Context, rows []RowWrite, p syncPlan, ts string) (SyncResult, map[string]rowState, error) {
	// Another connection may have committed between the check in SyncRows and the write lock.
	v, err := d.readDataVersion(ctx)
	if err != nil {
		return SyncResult{}, nil, err
	}
	if v != d.dataVersion {
		if err := d.loadIndex(ctx); err != nil {
			return SyncResult{}, nil, err
		}
		if p, err = d.plan(rows); err != nil || p.empty() {
			return SyncResult{}, nil, err
		}
	}

	// seq is INTEGER PRIMARY KEY without AUTOINCREMENT: SQLite gives each new row max(seq)+1, so
	// the call's new rows get base+1, base+2, ... in order (checked after the insert). Knowing
	// them up front lets a new trimmed row point at a cut row inserted after it.
	var base int64
	if len(p.inserts) > 0 {
		if err := d.stMaxSeq.QueryRowContext(ctx).Scan(&base); err != nil {
			return SyncResult{}, nil, fmt.Errorf("read max seq: %w", err)
		}
	}
	changed := make(map[string]rowState, len(p.inserts)+len(p.updates))
	for k, i := range p.inserts {
		changed[rows[i].Fingerprint] = rowState{seq: base + 1 + int64(k), inContext: rows[i].InContext}
	}
	cutSeq := func(fp string) any {
		if st, ok := changed[fp]; ok && fp != "" {
			return st.seq
		}
		if st, ok := d.index[fp]; ok && fp != "" {
			return st.seq
		}
		return nil
	}

	if len(p.inserts) > 0 {
		msgArgs := make([]any, 0, len(p.inserts)*msgParams)
		for _, i := range p.inserts {
			r := &rows[i]
			var trimmedSeq, trimmedAt any
			if !r.InContext {
				trimmedSeq, trimmedAt = cutSeq(r.CutFingerprint), ts
			}
			msgArgs = append(msgArgs, r.Fingerprint, r.Thread, r.Role, r.Kind, nullText(r.Name), r.Text,
				nullText(r.BlobID), r.InContext, trimmedSeq, trimmedAt, ts)
		}
		res, err := d.execBatched(ctx, &d.stInsertMsgs, "messages", msgColumns, msgParams, msgMaxBatch, msgArgs)
		if err != nil {
			return SyncResult{}, nil, err
		}
		last, err := res.LastInsertId()
		if err != nil {
			return SyncResult{}, nil, fmt.Errorf("insert into messages: %w", err)
		}
		if want := base + int64(len(p.inserts)); last != want {
			return SyncResult{}, nil, fmt.Errorf("insert into messages: last seq %d, want %d (seq is not max+1)", last, want)
		}
		if err := d.insertLines(ctx, rows, p.inserts, base); err != nil {
			return SyncResult{}, nil, err
		}
	}

	// Updates go out grouped: the rows back in context, and the trimmed rows per cut row
	// (trimmed_at_seq), each group one UPDATE over a JSON array of seqs, in first-seen order.
	var restore []int64
	trims := map[any][]int64{}
	var cuts []any
	for _, i := range p.updates {
		r := &rows[i]
		st := d.index[r.Fingerprint]
		if r.InContext {
			restore = append(restore, st.seq)
		} else {
			c := cutSeq(r.CutFingerprint)
			if _, ok := trims[c]; !ok {
				cuts = append(cuts, c)
			}
			trims[c] = append(trims[c], st.seq)
		}
		changed[r.Fingerprint] = rowState{seq: st.seq, inContext: r.InContext}
	}
	if len(restore) > 0 {
		if err := updateSeqs(ctx, d.stRestoreRange, d.stRestore, nil, restore); err != nil {
			return SyncResult{}, nil, fmt.Errorf("update in_context: %w", err)
		}
	}
	for _, c := range cuts {
		if err := updateSeqs(ctx, d.stTrimRange, d.stTrim, []any{ts, c}, trims[c]); err != nil {
			return SyncResult{}, nil, fmt.Errorf("update in_context: %w", err)
		}
	}
	return SyncResult{Inserted: len(p.inserts), Updated: len(p.updates)}, changed, nil
}

// minSeqRun is the shortest run of consecutive seqs that updateSeqs updates as a range:
// a range statement is one more cgo round trip, the json_each list costs a lookup per seq.
const minSeqRun = 8

// updateSeqs runs one UPDATE over the rows of seqs (distinct; sorted in place): ranged
// (args, first, last) for each run of at least minSeqRun consecutive seqs, list (args, a
// JSON array) once for the rest. A new cut moves a whole stretch of a thread out of
// context, which a range statement updates in one pass of the table's b-tree instead of
// one seek per row (BenchmarkSyncRowsCut). A run is exactly its seqs, so rows the call
// does not carry (a rewritten history between them) are never touched.
func updateSeqs(ctx context.Context, ranged, list *sql.Stmt, args []any, seqs []int64) error {
	runs, rest := seqRuns(seqs)
	for _, r := range runs {
		if _, err := ranged.ExecContext(ctx, append(args[:len(args):len(args)], r[0], r[1])...); err != nil {
			return err
		}
	}
	if len(rest) > 0 {
		if _, err := list.ExecContext(ctx, append(args[:len(args):len(args)], seqsJSON(rest))...); err != nil {
			return err
		}
	}
	return nil
}

// seqRuns sorts seqs (distinct) and splits them into the runs of at least minSeqRun
// consecutive values, as first and last, and the rest, each in ascending order.
func seqRuns(seqs []int64) (runs [][2]int64, rest []int64) {
	slices.Sort(seqs)
	for i := 0; i < len(seqs); {
		j := i + 1
		for j < len(seqs) && seqs[j] == seqs[j-1]+1 {
			j++
		}
		if j-i >= minSeqRun {
			runs = append(runs, [2]int64{seqs[i], seqs[j-1]})
		} else {
			rest = append(rest, seqs[i:j]...)
		}
		i = j
	}
	return runs, rest
}

// seqsJSON is seqs as a JSON array, the argument of the json_each in stTrim and stRestore.
func seqsJSON(seqs []int64) string {
	b := make([]byte, 0, len(seqs)*6+2)
	b = append(b, '[')
	for i, q := range seqs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, q, 10)
	}
	return string(append(b, ']'))
}

// nullText maps "" to SQL NULL.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}
