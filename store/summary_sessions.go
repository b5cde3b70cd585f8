package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// The read side the dashboard uses (DESIGN.md §9): here the list of sessions with their
// sizes and summaries; one session's rows and events in session_rows.go, daily totals in
// summary_daily.go, the status window in summary_events.go, the stamps and cache they share
// in summary_cache.go. Everything reads through OpenReader (read-only, authorizer,
// retention's mtimes left alone) and never creates a file.

// SessionInfo is one row of the dashboard's session list.
type SessionInfo struct {
	SessionID string
	// Agent comes from the registration (sessions/<sid>.json) or, without one, from the
	// proxy's trim state (the agent of the route the session's requests came on); "" unknown.
	Agent string
	Cwd   string // from the registration; "" when the session was not registered
	// FirstPrompt is the start of the session's first user text row that the user typed
	// (rows that start with "<", the agents' injected context such as <system-reminder> or
	// <environment_context>, are passed over), at most FirstPromptChars characters with
	// runs of white space as one space; "" when there is none.
	FirstPrompt string
	// LastActivity is the newest mtime of the session's files (.db, .db-wal, .trim.json,
	// .savings.jsonl).
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
			FirstPrompt:      sum.firstPrompt,
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

// sessionSummary is what Sessions and Daily read of one session at one stamp.
type sessionSummary struct {
	agent, cwd, firstPrompt                               string
	rows, inContext, trimmed, trims, requests, lastPrompt int64
	problem                                               string
	days                                                  map[string]Day // by Date; the Date field is unset
}

// FirstPromptChars bounds SessionInfo.FirstPrompt, in characters.
const FirstPromptChars = 200

// promptStart is text with runs of white space as one space, cut to FirstPromptChars
// characters (an ellipsis marks a cut).
func promptStart(text string) string {
	words := strings.Fields(text)
	out := strings.Join(words, " ")
	if r := []rune(out); len(r) > FirstPromptChars {
		return string(r[:FirstPromptChars-1]) + "…"
	}
	return out
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

// sessionAgent is the session's agent and cwd from its registration, or without an agent
// there, the agent of its trim state (the route its requests came on); "" when unknown.
func (r *Root) sessionAgent(sid string) (agent, cwd string) {
	if reg, err := r.Registration(sid); err == nil && reg != nil {
		agent, cwd = reg.Agent, reg.Cwd
	}
	if agent == "" {
		if b, err := r.LoadTrimState(sid); err == nil && len(b) > 0 {
			var st struct {
				Agent string `json:"agent"`
			}
			if json.Unmarshal(b, &st) == nil && st.Agent != "unknown" {
				agent = st.Agent
			}
		}
	}
	return agent, cwd
}

// readSummary reads the session's summary. With err set (the database could not be read)
// sum has problem set and the counts zero.
func (r *Root) readSummary(ctx context.Context, sid string) (sum sessionSummary, err error) {
	if checkSID(sid) != nil {
		sum.problem = "the file name is not a session id; rename or delete sessions/" + sid + ".db"
		return sum, nil
	}
	sum.agent, sum.cwd = r.sessionAgent(sid)
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
	// Four bytes a character at most, and room for the white space that collapses.
	var first string
	err = db.QueryRowContext(ctx, "SELECT substr(text, 1, ?) FROM messages WHERE role = 'user' AND kind = 'text' "+
		"AND ltrim(text, ' '||char(9, 10, 13)) NOT LIKE '<%' AND trim(text, ' '||char(9, 10, 13)) != '' ORDER BY seq LIMIT 1", 4*FirstPromptChars).Scan(&first)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return sum, err
	default:
		sum.firstPrompt = promptStart(first)
	}
	v := rd.SchemaVersion()
	if v < 2 {
		return sum, nil // no events table
	}
	q, err := db.QueryContext(ctx, "SELECT substr(at, 1, 10), sum(kind = 'trim'), "+
		"sum(CASE WHEN kind = 'trim' THEN coalesce("+savedTokensSQL+", 0) ELSE 0 END), "+
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
