package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// This file is the read side the dashboard uses (DESIGN.md §9): a list of sessions with
// their sizes, one session's rows and events, and daily totals across sessions. Everything
// here reads through OpenReader (read-only, authorizer, retention's mtimes left alone) and
// never creates a file.

// SessionInfo is one row of the dashboard's session list.
type SessionInfo struct {
	SessionID string
	// Agent comes from the registration (sessions/<sid>.json) or, without one, from the
	// proxy's trim state (the agent of the route the session's requests came on); "" unknown.
	Agent string
	Cwd   string // from the registration; "" when the session was not registered
	// LastActivity is the newest mtime of the session's files (.db, .db-wal, .trim.json).
	LastActivity time.Time
	Bytes        int64 // .db + .db-wal + .trim.json sizes on disk
	Rows         int64 // messages rows
	InContext    int64 // rows with in_context = 1
	Trimmed      int64 // rows with in_context = 0
	Trims        int64 // trim events
	Requests     int64 // usage events
	// LastPromptTokens is input + cache read + cache creation of the newest usage event
	// that reported them; 0 when none did.
	LastPromptTokens int64
	// Problem is set when the database could not be read (locked, newer schema, not a
	// database): the other counts are then zero.
	Problem string
}

// Sessions lists every sessions/*.db, newest activity first. A database that cannot be read
// is listed with Problem set, not dropped. Summaries are cached per session and recomputed
// only when one of its files (.db, .db-wal, .trim.json, .json) changed size or mtime, so a
// list of hundreds of sessions costs a stat per file once warm; a session whose files changed
// within the last dashRacyWindow (2 s) is read again on every call. A sessions/*.db whose
// name is not a session id is listed with Problem set. The error is for an unreadable
// sessions/ folder or a cancelled ctx.
func (r *Root) Sessions(ctx context.Context) ([]SessionInfo, error) {
	files, err := r.listSessionFiles()
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	sums, err := r.summaries(ctx, files)
	if err != nil {
		return nil, err
	}
	out := make([]SessionInfo, 0, len(files))
	for i := range files {
		f, sum := &files[i], &sums[i]
		out = append(out, SessionInfo{
			SessionID:        f.sid,
			Agent:            sum.agent,
			Cwd:              sum.cwd,
			LastActivity:     f.lastActivity(),
			Bytes:            f.bytes(),
			Rows:             sum.rows,
			InContext:        sum.inContext,
			Trimmed:          sum.trimmed,
			Trims:            sum.trims,
			Requests:         sum.requests,
			LastPromptTokens: sum.lastPrompt,
			Problem:          sum.problem,
		})
	}
	r.dash.prune(files)
	slices.SortFunc(out, func(a, b SessionInfo) int {
		return cmp.Or(b.LastActivity.Compare(a.LastActivity), strings.Compare(a.SessionID, b.SessionID))
	})
	return out, nil
}

// RowInfo is one messages row as the session page shows it.
type RowInfo struct {
	Seq          int64
	Thread       string
	Role, Kind   string
	Name         string
	Text         string // the row text, cut to the first maxChars runes given to Rows
	Chars        int    // the full text length in runes
	BlobID       string // the blob holding the full tool result, "" when none
	InContext    bool
	TrimmedAtSeq int64 // the seq the cut that trimmed this row was made at; 0 when in context or not recorded
	TrimmedAt    string
	CreatedAt    string
}

// Rows returns up to limit rows of the session with seq > afterSeq in seq order (keyset
// paging: pass the last Seq to get the next page), each text cut to maxChars runes, and the
// total row count. It wraps fs.ErrNotExist for a missing session.
//
// limit must be at least 1; maxChars of 0 or less keeps whole texts. A session created but
// with nothing committed yet has no rows. Texts are read whole and cut here, so Chars counts
// runes the way Go does (an invalid byte is one) whatever the text holds.
func (r *Root) Rows(ctx context.Context, sid string, afterSeq int64, limit, maxChars int) (rows []RowInfo, total int64, err error) {
	if limit < 1 {
		return nil, 0, fmt.Errorf("session rows: limit must be at least 1, not %d", limit)
	}
	rd, err := r.OpenReader(sid)
	if errors.Is(err, ErrNoSchema) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("session rows: %w", err)
	}
	defer rd.Close()
	db, err := rd.pool()
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, statusDBTimeout)
	defer cancel()
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM messages").Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("session rows of %s: %w", sid, err)
	}
	q, err := db.QueryContext(ctx, "SELECT seq, thread, role, kind, name, text, blob_id, in_context, trimmed_at_seq, trimmed_at, created_at "+
		"FROM messages WHERE seq > ? ORDER BY seq LIMIT ?", afterSeq, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("session rows of %s: %w", sid, err)
	}
	defer q.Close()
	for q.Next() {
		var ri RowInfo
		var name, blobID, trimmedAt *string
		var trimmedAtSeq *int64
		if err := q.Scan(&ri.Seq, &ri.Thread, &ri.Role, &ri.Kind, &name, &ri.Text, &blobID, &ri.InContext,
			&trimmedAtSeq, &trimmedAt, &ri.CreatedAt); err != nil {
			return nil, 0, fmt.Errorf("session rows of %s: %w", sid, err)
		}
		ri.Name, ri.BlobID, ri.TrimmedAt = deref(name), deref(blobID), deref(trimmedAt)
		if trimmedAtSeq != nil {
			ri.TrimmedAtSeq = *trimmedAtSeq
		}
		ri.Text, ri.Chars = cutRunes(ri.Text, maxChars)
		rows = append(rows, ri)
	}
	if err := q.Err(); err != nil {
		return nil, 0, fmt.Errorf("session rows of %s: %w", sid, err)
	}
	return rows, total, q.Close()
}

// cutRunes returns the first n runes of s (all of it when n <= 0) and the rune count of s.
func cutRunes(s string, n int) (string, int) {
	if n <= 0 || len(s) <= n { // n runes take at least n bytes
		return s, utf8.RuneCountInString(s)
	}
	chars, end := 0, len(s)
	for i := range s {
		if chars == n {
			end = i
		}
		chars++
	}
	if chars <= n {
		return s, chars
	}
	return s[:end], chars
}

// EventInfo is one events row (contract: Events) as the session page and charts use it.
// Every integer but ID is -1 where the row holds NULL (the columns of other kinds, counts
// the provider did not report, a schema-2 database's usage columns).
type EventInfo struct {
	ID                                      int64
	At                                      time.Time
	Kind                                    string // trim, fail_open, usage
	Location, Error                         string
	TokensBefore, TokensAfter, Dropped      int64 // trim; estimates, in tokens
	Model                                   string
	Trimmed                                 int64 // usage: 0 whole, 1 earlier cut, 2 new cut; -1 unknown
	Input, CacheRead, CacheCreation, Output int64 // usage; -1 when not reported
	Breakpoints                             int64 // -1 when not reported
}

// PromptTokens is input + cache read + cache creation of a usage event, or -1 when the
// provider reported none of them.
func (e EventInfo) PromptTokens() int64 {
	if e.Input < 0 && e.CacheRead < 0 && e.CacheCreation < 0 {
		return -1
	}
	return max(e.Input, 0) + max(e.CacheRead, 0) + max(e.CacheCreation, 0)
}

// Events returns the session's events in id order, at most limit of the newest (0: all).
// A schema-1 database has none. It wraps fs.ErrNotExist for a missing session.
// A session created but with nothing committed yet has none either; limit below 0 is an error.
func (r *Root) Events(ctx context.Context, sid string, limit int) ([]EventInfo, error) {
	if limit < 0 {
		return nil, fmt.Errorf("session events: limit must be 0 (all) or more, not %d", limit)
	}
	rd, err := r.OpenReader(sid)
	if errors.Is(err, ErrNoSchema) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session events: %w", err)
	}
	defer rd.Close()
	cols, ok := eventColumns(rd.SchemaVersion(), "id", "at", "kind", "location", "error", "tokens_before", "tokens_after", "dropped",
		"model", "trimmed", "input_tokens", "cache_read_tokens", "cache_creation_tokens", "output_tokens", "breakpoints")
	if !ok {
		return nil, nil // no events table
	}
	db, err := rd.pool()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, statusDBTimeout)
	defer cancel()
	query := "SELECT " + cols + " FROM events ORDER BY id"
	var args []any
	if limit > 0 {
		query = "SELECT * FROM (SELECT " + cols + " FROM events ORDER BY id DESC LIMIT ?) ORDER BY 1"
		args = append(args, limit)
	}
	q, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("session events of %s: %w", sid, err)
	}
	defer q.Close()
	var out []EventInfo
	for q.Next() {
		var e EventInfo
		var at string
		var location, errType, model *string
		var ints [9]*int64
		if err := q.Scan(&e.ID, &at, &e.Kind, &location, &errType, &ints[0], &ints[1], &ints[2], &model,
			&ints[3], &ints[4], &ints[5], &ints[6], &ints[7], &ints[8]); err != nil {
			return nil, fmt.Errorf("session events of %s: %w", sid, err)
		}
		e.At, _ = time.Parse(time.RFC3339, at) // the writer's ISO 8601 UTC; anything else stays zero
		e.Location, e.Error, e.Model = deref(location), deref(errType), deref(model)
		for i, p := range []*int64{&e.TokensBefore, &e.TokensAfter, &e.Dropped, &e.Trimmed,
			&e.Input, &e.CacheRead, &e.CacheCreation, &e.Output, &e.Breakpoints} {
			*p = -1
			if ints[i] != nil {
				*p = *ints[i]
			}
		}
		out = append(out, e)
	}
	if err := q.Err(); err != nil {
		return nil, fmt.Errorf("session events of %s: %w", sid, err)
	}
	return out, q.Close()
}

// Day is one calendar day (UTC) of totals across sessions.
type Day struct {
	Date        string // 2026-11-29
	Trims       int64
	TokensSaved int64 // Σ tokens_before − tokens_after of the day's trims
	Requests    int64 // usage events
	FailOpens   int64
}

// Daily returns the last days calendar days (UTC) up to and including now's, oldest first,
// one Day each (zeros included), across every session. Unreadable databases are skipped.
// Cached like Sessions.
// days must be 1 to DailyMaxDays.
func (r *Root) Daily(ctx context.Context, now time.Time, days int) ([]Day, error) {
	if days < 1 || days > DailyMaxDays {
		return nil, fmt.Errorf("daily totals: days must be an integer from 1 to %d, not %d", DailyMaxDays, days)
	}
	files, err := r.listSessionFiles()
	if err != nil {
		return nil, fmt.Errorf("daily totals: %w", err)
	}
	out := make([]Day, days)
	index := make(map[string]int, days)
	today := now.UTC()
	for i := range out {
		d := today.AddDate(0, 0, i-(days-1)).Format(time.DateOnly)
		out[i].Date = d
		index[d] = i
	}
	sums, err := r.summaries(ctx, files)
	if err != nil {
		return nil, err
	}
	for _, sum := range sums {
		for date, d := range sum.days {
			if i, ok := index[date]; ok {
				o := &out[i]
				o.Trims += d.Trims
				o.TokensSaved += d.TokensSaved
				o.Requests += d.Requests
				o.FailOpens += d.FailOpens
			}
		}
	}
	r.dash.prune(files)
	return out, nil
}

// DailyMaxDays bounds Daily's days.
const DailyMaxDays = 366

// dashRacyWindow: a file changed this recently before it was stat'ed may change again
// without its mtime moving (a coarse file system clock, a WAL rewritten in place at the same
// size), so what was read from it is not reused; it is read again on the next call.
const dashRacyWindow = 2 * time.Second

// fileStamp is a file's size and mtime (Unix nanoseconds); size -1 when it is missing.
type fileStamp struct{ size, mtime int64 }

var noFile = fileStamp{size: -1}

// stampEntry stamps a directory entry (nil: missing); a link or other non-regular entry
// is stat'ed through.
func stampEntry(dir string, e fs.DirEntry) fileStamp {
	if e == nil {
		return noFile
	}
	var fi fs.FileInfo
	var err error
	if e.Type().IsRegular() {
		fi, err = e.Info()
	} else {
		fi, err = os.Stat(filepath.Join(dir, e.Name()))
	}
	if err != nil {
		return noFile
	}
	return stampOf(fi)
}

// sessionStamp is one state of a session's files: what was read at a stamp holds while
// none of them changes size or mtime. reg (the registration) gives Agent and Cwd.
type sessionStamp struct{ db, wal, trim, reg fileStamp }

// sessionFiles is one sessions/<sid>.db as listed now.
type sessionFiles struct {
	sid   string
	stamp sessionStamp
	// settled: every file was last changed at least dashRacyWindow before the stat, so a
	// later change shows in the stamp; only then is what was read cached.
	settled bool
}

// lastActivity is the newest mtime of .db, .db-wal and .trim.json.
func (f *sessionFiles) lastActivity() time.Time {
	var n int64
	for _, s := range []fileStamp{f.stamp.db, f.stamp.wal, f.stamp.trim} {
		if s.size >= 0 && s.mtime > n {
			n = s.mtime
		}
	}
	return time.Unix(0, n)
}

// bytes is the size of .db, .db-wal and .trim.json.
func (f *sessionFiles) bytes() int64 {
	var n int64
	for _, s := range []fileStamp{f.stamp.db, f.stamp.wal, f.stamp.trim} {
		n += max(s.size, 0)
	}
	return n
}

// listSessionFiles stats the files of every sessions/*.db (dot files and other names left
// out), in name order. A sid that checkSID refuses is listed too; its readers report it.
// Only files the listing holds are stat'ed: a stat per file, none for a missing one.
func (r *Root) listSessionFiles() ([]sessionFiles, error) {
	dir := filepath.Join(r.dir, "sessions")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	settledBefore := time.Now().Add(-dashRacyWindow).UnixNano()
	byName := make(map[string]fs.DirEntry, len(entries))
	for _, e := range entries {
		byName[e.Name()] = e
	}
	out := make([]sessionFiles, 0, len(entries)/2)
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".db") || !e.Type().IsRegular() {
			continue
		}
		f := sessionFiles{sid: strings.TrimSuffix(name, ".db")}
		f.stamp = sessionStamp{
			db:   stampEntry(dir, e),
			wal:  stampEntry(dir, byName[name+"-wal"]),
			trim: stampEntry(dir, byName[f.sid+".trim.json"]),
			reg:  stampEntry(dir, byName[f.sid+".json"]),
		}
		if f.stamp.db.size < 0 {
			continue // deleted since the listing
		}
		f.settled = true
		for _, s := range []fileStamp{f.stamp.db, f.stamp.wal, f.stamp.trim, f.stamp.reg} {
			if s.size >= 0 && s.mtime > settledBefore {
				f.settled = false
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// dashCache holds what the dashboard reads of each session (Sessions and Daily: a summary;
// Status: its events since a window start), each with the stamp it was read at. The zero
// value is ready; it is safe for concurrent use.
type dashCache struct {
	mu        sync.Mutex
	summaries map[string]*summaryEntry
	events    map[string]*eventsEntry
}

type summaryEntry struct {
	stamp sessionStamp
	sum   sessionSummary
}

type eventsEntry struct {
	stamp  sessionStamp
	since  string        // events holds every event at or after since
	events []statusEvent // read-only once cached
	err    error         // a lasting reason the database cannot be read (cacheableErr)
}

// prune drops the entries of sessions not in files (deleted since).
func (c *dashCache) prune(files []sessionFiles) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.summaries)+len(c.events) == 0 {
		return
	}
	live := make(map[string]bool, len(files))
	for i := range files {
		live[files[i].sid] = true
	}
	for sid := range c.summaries {
		if !live[sid] {
			delete(c.summaries, sid)
		}
	}
	for sid := range c.events {
		if !live[sid] {
			delete(c.events, sid)
		}
	}
}

// cacheableErr reports an error that lasts until the file changes (so its stamp does): a
// newer schema or a file that is not a database. A lock, a timeout or a vanished file may
// clear on their own and are read again.
func cacheableErr(err error) bool {
	re := AsReadError(err)
	return re != nil && !re.Transient()
}

// sessionSummary is what Sessions and Daily read of one session at one stamp.
type sessionSummary struct {
	agent, cwd                                            string
	rows, inContext, trimmed, trims, requests, lastPrompt int64
	problem                                               string
	days                                                  map[string]Day // by Date; the Date field is unset
}

// dashReaders bounds the session databases read at once on a cold cache.
const dashReaders = 4

// summaries returns the summary of each of files, in order, reading the ones the cache
// lacks dashReaders at a time. The error is ctx's.
func (r *Root) summaries(ctx context.Context, files []sessionFiles) ([]sessionSummary, error) {
	out := make([]sessionSummary, len(files))
	var miss []int
	r.dash.mu.Lock()
	for i := range files {
		if e := r.dash.summaries[files[i].sid]; e != nil && e.stamp == files[i].stamp {
			out[i] = e.sum
		} else {
			miss = append(miss, i)
		}
	}
	r.dash.mu.Unlock()
	if len(miss) == 0 {
		return out, ctx.Err()
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(dashReaders, len(miss)) {
		wg.Go(func() {
			for i := range next {
				out[i], _ = r.summary(ctx, &files[i]) // ctx's error is checked below
			}
		})
	}
	for _, i := range miss {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return out, ctx.Err()
}

// summary returns the session's summary, from the cache when its stamp still holds. The
// error is ctx's only; a database that cannot be read gives a summary with problem set.
func (r *Root) summary(ctx context.Context, f *sessionFiles) (sessionSummary, error) {
	if err := ctx.Err(); err != nil {
		return sessionSummary{}, err
	}
	c := &r.dash
	c.mu.Lock()
	e := c.summaries[f.sid]
	c.mu.Unlock()
	if e != nil && e.stamp == f.stamp {
		return e.sum, nil
	}
	sum, err := r.readSummary(ctx, f.sid)
	if err != nil && ctx.Err() != nil {
		return sessionSummary{}, ctx.Err()
	}
	if f.settled && (err == nil || cacheableErr(err)) {
		c.mu.Lock()
		if c.summaries == nil {
			c.summaries = map[string]*summaryEntry{}
		}
		c.summaries[f.sid] = &summaryEntry{stamp: f.stamp, sum: sum}
		c.mu.Unlock()
	}
	return sum, nil
}

// readSummary reads the session's summary. With err set (the database could not be read)
// sum has problem set and the counts zero.
func (r *Root) readSummary(ctx context.Context, sid string) (sum sessionSummary, err error) {
	if checkSID(sid) != nil {
		sum.problem = "the file name is not a session id; rename or delete sessions/" + sid + ".db"
		return sum, nil
	}
	if reg, err := r.Registration(sid); err == nil && reg != nil {
		sum.agent, sum.cwd = reg.Agent, reg.Cwd
	}
	if sum.agent == "" {
		if b, err := r.LoadTrimState(sid); err == nil && len(b) > 0 {
			var st struct {
				Agent string `json:"agent"`
			}
			if json.Unmarshal(b, &st) == nil && st.Agent != "unknown" {
				sum.agent = st.Agent
			}
		}
	}
	defer func() {
		if err != nil {
			err = readError(r.sessionFile(sid, ".db"), err)
			sum = sessionSummary{agent: sum.agent, cwd: sum.cwd, problem: statusProblem(err)}
		}
	}()
	rd, err := r.OpenReader(sid)
	if errors.Is(err, ErrNoSchema) {
		return sum, nil // created, nothing committed yet
	}
	if err != nil {
		return sum, err
	}
	defer rd.Close()
	db, err := rd.pool()
	if err != nil {
		return sum, err
	}
	ctx, cancel := context.WithTimeout(ctx, statusDBTimeout)
	defer cancel()
	if err := db.QueryRowContext(ctx, "SELECT count(*), coalesce(sum(in_context = 1), 0), coalesce(sum(in_context = 0), 0) FROM messages").
		Scan(&sum.rows, &sum.inContext, &sum.trimmed); err != nil {
		return sum, err
	}
	v := rd.SchemaVersion()
	if v < 2 {
		return sum, nil // no events table
	}
	q, err := db.QueryContext(ctx, "SELECT substr(at, 1, 10), sum(kind = 'trim'), "+
		"sum(CASE WHEN kind = 'trim' THEN coalesce(tokens_before - tokens_after, 0) ELSE 0 END), "+
		"sum(kind = 'usage'), sum(kind = 'fail_open') FROM events GROUP BY 1")
	if err != nil {
		return sum, err
	}
	defer q.Close()
	for q.Next() {
		var date string
		var d Day
		if err := q.Scan(&date, &d.Trims, &d.TokensSaved, &d.Requests, &d.FailOpens); err != nil {
			return sum, err
		}
		if sum.days == nil {
			sum.days = map[string]Day{}
		}
		sum.days[date] = d
		sum.trims += d.Trims
		sum.requests += d.Requests
	}
	if err := q.Err(); err != nil {
		return sum, err
	}
	if err := q.Close(); err != nil {
		return sum, err
	}
	if v < 3 {
		return sum, nil // no usage columns
	}
	var input, read, creation *int64
	err = db.QueryRowContext(ctx, "SELECT input_tokens, cache_read_tokens, cache_creation_tokens FROM events "+
		"WHERE kind = 'usage' AND coalesce(input_tokens, cache_read_tokens, cache_creation_tokens) IS NOT NULL "+
		"ORDER BY id DESC LIMIT 1").Scan(&input, &read, &creation)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return sum, err
	default:
		for _, p := range []*int64{input, read, creation} {
			if p != nil {
				sum.lastPrompt += *p
			}
		}
	}
	return sum, nil
}

// cachedStatusEvents is statusEvents through the cache: events read for an earlier since
// serve any later one (the window moves forward with now), filtered here.
func (r *Root) cachedStatusEvents(ctx context.Context, f *sessionFiles, since string) ([]statusEvent, error) {
	c := &r.dash
	c.mu.Lock()
	e := c.events[f.sid]
	c.mu.Unlock()
	if e != nil && e.stamp == f.stamp && since >= e.since {
		if e.err != nil {
			return nil, e.err
		}
		var out []statusEvent
		for i := range e.events {
			if e.events[i].at >= since {
				out = append(out, e.events[i])
			}
		}
		return out, nil
	}
	events, err := r.statusEvents(ctx, f.sid, since)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if f.settled && (err == nil || cacheableErr(err)) {
		c.mu.Lock()
		if c.events == nil {
			c.events = map[string]*eventsEntry{}
		}
		c.events[f.sid] = &eventsEntry{stamp: f.stamp, since: since, events: slices.Clip(events), err: err}
		c.mu.Unlock()
	}
	return events, err
}
