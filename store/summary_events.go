package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Bounds of the status window in hours (seed 001, "Tools agents use": context_status hours).
const (
	StatusMinHours     = 1
	StatusMaxHours     = 720
	StatusDefaultHours = 24
)

// Caps of the lists a Status carries.
const (
	statusLastErrors = 5  // newest fail-opens
	statusLayouts    = 5  // most common breakpoint layouts
	statusSkipped    = 10 // skipped databases listed with their reason
)

// statusDBTimeout bounds the read of one session database.
const statusDBTimeout = 5 * time.Second

// statusCheckoutNote says why checkout_proxy_version and proxy_stale are null: the seed
// compares the newest proxy: version with the hash of a proxy/ checkout, and a Go build has
// none (its proxy writes proxy:<first 12 hex of SHA-256 of the executable>).
const statusCheckoutNote = "checkout_proxy_version and proxy_stale are null: this build has no proxy/ checkout to hash. " +
	"The service writes proxy:<first 12 hex of SHA-256 of its executable>, so a latest.proxy that changes after an upgrade shows the service runs the new binary; restart the service if it does not"

// Status is the events summary of every session database over a window (seed 001, `context
// status` and context_status; seed 002, Events). JSON keys are the seed's.
type Status struct {
	Hours int    `json:"hours"`
	Since string `json:"since"` // ISO 8601 UTC: events at or after this count
	// Sessions counts the session databases read; Skipped those that could not be (locked,
	// newer schema, not a database), the first ten of them in SkippedSessions.
	Sessions        int              `json:"sessions"`
	Skipped         int              `json:"skipped"`
	SkippedSessions []SkippedSession `json:"skippedSessions,omitempty"`

	Trims       int   `json:"trims"`
	TokensSaved int64 `json:"tokensSaved"` // Σ tokens_before − tokens_after of trims (estimates)
	// MessagesDropped is, per session, the largest dropped count of its trims in the
	// window, summed over sessions. A trim's count includes what earlier cuts of the same
	// conversation dropped, so a sum over trims would count a message once per later trim.
	MessagesDropped int64             `json:"messagesDropped"`
	FailOpens       int               `json:"failOpens"`
	LastErrors      []FailOpen        `json:"lastErrors"` // newest five fail-opens, newest first
	Latest          map[string]string `json:"latest"`     // writer kind (proxy, opencode) → its newest version string

	CheckoutProxyVersion *string `json:"checkout_proxy_version"` // always nil (statusCheckoutNote)
	ProxyStale           *bool   `json:"proxy_stale"`            // always nil (statusCheckoutNote)
	Note                 string  `json:"note"`

	Usage UsageStatus `json:"usage"`
}

// SkippedSession is a session database Status could not read, and why.
type SkippedSession struct {
	Session string `json:"session"`
	Reason  string `json:"reason"`
}

// FailOpen is one fail_open event: where the rewrite raised and the exception type.
type FailOpen struct {
	At       string `json:"at"`
	Session  string `json:"session"`
	Location string `json:"location"`
	Error    string `json:"error"`
}

// UsageStatus summarizes the usage events (one per model call). Token sums add the counts the
// provider reported; a NULL count adds nothing.
type UsageStatus struct {
	Requests        int   `json:"requests"`
	WithCacheCounts int   `json:"withCacheCounts"` // requests that reported cache read or creation tokens
	InputTokens     int64 `json:"inputTokens"`     // uncached input
	CacheReadTokens int64 `json:"cacheReadTokens"`
	CacheCreation   int64 `json:"cacheCreationTokens"`
	OutputTokens    int64 `json:"outputTokens"`
	// HitRatio is cache read / (cache read + creation + uncached input) over the requests
	// that reported cache counts; nil without any.
	HitRatio *float64 `json:"hitRatio"`
	// NewCut is cache creation on requests that made a new cut (trimmed = 2), Other on the rest.
	NewCut CacheCreation `json:"newCut"`
	Other  CacheCreation `json:"other"`
	// Breakpoints maps a cache_control marker count to the requests that carried it;
	// BreakpointLayouts the five most common breakpoint_at layouts to theirs (Anthropic route
	// only). BreakpointLayoutsOmitted counts the requests of the other layouts.
	Breakpoints              map[string]int `json:"breakpoints"`
	BreakpointLayouts        map[string]int `json:"breakpointLayouts"`
	BreakpointLayoutsOmitted int            `json:"breakpointLayoutsOmitted,omitempty"`
}

// CacheCreation is the cache-creation tokens of one group of usage requests: Requests are the
// ones that reported a creation count, Average their mean (nil without any).
type CacheCreation struct {
	Requests            int      `json:"requests"`
	CacheCreationTokens int64    `json:"cacheCreationTokens"`
	Average             *float64 `json:"average"`
}

// statusEvent is one events row as Status reads it.
type statusEvent struct {
	at, kind, version, location, errType string
	tokensBefore, tokensAfter, dropped   *int64
	trimmed                              *int64
	input, cacheRead, cacheCreation      *int64
	output, breakpoints                  *int64
	breakpointAt                         string
}

// Status summarizes the events of every sessions/*.db with at in the last hours (1–720)
// before now. Each database is opened the way OpenReader opens it (read-only, with the
// authorizer, leaving retention's mtimes alone); version 1 databases have no events and
// version 2 no usage columns. A database that cannot be read (locked, newer schema, not a
// database) is skipped and counted. Each session's events are cached with the size and mtime
// of its files (see Sessions) and the window start, so a later window start reuses them. The
// error is for an unreadable sessions/ folder or a cancelled ctx.
func (r *Root) Status(ctx context.Context, now time.Time, hours int) (Status, error) {
	if hours < StatusMinHours || hours > StatusMaxHours {
		return Status{}, fmt.Errorf("status: hours must be an integer from %d to %d, not %d", StatusMinHours, StatusMaxHours, hours)
	}
	since := now.Add(-time.Duration(hours) * time.Hour)
	st := Status{
		Hours:      hours,
		Since:      formatTime(since),
		LastErrors: []FailOpen{},
		Latest:     map[string]string{},
		Note:       statusCheckoutNote,
		Usage:      UsageStatus{Breakpoints: map[string]int{}, BreakpointLayouts: map[string]int{}},
	}
	files, err := r.listSessionFiles()
	if err != nil {
		return Status{}, fmt.Errorf("status: %w", err)
	}
	agg := newStatusAgg(&st)
	for i := range files {
		if err := ctx.Err(); err != nil {
			return Status{}, err
		}
		sid := files[i].sid
		if checkSID(sid) != nil {
			agg.skip(sid, "the file name is not a session id")
			continue
		}
		events, err := r.cachedStatusEvents(ctx, &files[i], st.Since)
		switch {
		case errors.Is(err, ErrNoSchema):
			st.Sessions++ // created, nothing committed yet
		case err != nil:
			if ctx.Err() != nil {
				return Status{}, ctx.Err()
			}
			agg.skip(sid, statusProblem(err))
		default:
			st.Sessions++
			for i := range events {
				agg.add(sid, &events[i])
			}
		}
	}
	agg.finish()
	r.dash.prune(files)
	return st, nil
}

// statusProblem is why a database was skipped, in words (the status and dashboard wording
// of a ReadError's kind).
func statusProblem(err error) string {
	var kind ReadFailure
	if re := AsReadError(err); re != nil {
		kind = re.Kind
	}
	switch kind {
	case ReadNewerSchema:
		return "written by a newer smarter-compact (newer schema)"
	case ReadMissing:
		return "deleted while reading (retention?)"
	case ReadLocked:
		return "locked by another process"
	case ReadNotADatabase, ReadCorrupt:
		return "not a readable SQLite database"
	}
	return err.Error()
}

// eventColumns joins names into a SELECT column list for the events table of a session
// database of schema version v: on version 2 the columns version 3 added (schema.go) read as
// NULL. ok is false below version 2, which has no events table.
func eventColumns(v int, names ...string) (cols string, ok bool) {
	if v < 2 {
		return "", false
	}
	if v == 2 {
		names = slices.Clone(names)
		for i, n := range names {
			if addedInV3[n] {
				names[i] = "NULL"
			}
		}
	}
	return strings.Join(names, ", "), true
}

// addedInV3 are the events columns schema version 3 added.
var addedInV3 = map[string]bool{"model": true, "thread_root": true, "trimmed": true, "input_tokens": true,
	"cache_read_tokens": true, "cache_creation_tokens": true, "output_tokens": true, "breakpoints": true, "breakpoint_at": true}

// statusEvents reads the session's events at or after since through a Reader. An error
// reading the database is a *ReadError.
func (r *Root) statusEvents(ctx context.Context, sid, since string) (_ []statusEvent, err error) {
	defer func() { err = readError(r.sessionFile(sid, ".db"), err) }()
	rd, err := r.OpenReader(sid)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	names := []string{"at", "kind", "version", "location", "error", "tokens_before", "tokens_after", "dropped",
		"trimmed", "input_tokens", "cache_read_tokens", "cache_creation_tokens", "output_tokens", "breakpoints", "breakpoint_at"}
	query := func(cols string) (string, []any) {
		return "SELECT " + cols + " FROM events WHERE at >= ?", []any{since}
	}
	return queryEvents(ctx, rd, names, query, func(rows *sql.Rows) (statusEvent, error) {
		var e statusEvent
		var version, location, errType, breakpointAt *string
		err := rows.Scan(&e.at, &e.kind, &version, &location, &errType, &e.tokensBefore, &e.tokensAfter, &e.dropped,
			&e.trimmed, &e.input, &e.cacheRead, &e.cacheCreation, &e.output, &e.breakpoints, &breakpointAt)
		e.version, e.location, e.errType, e.breakpointAt = deref(version), deref(location), deref(errType), deref(breakpointAt)
		return e, err
	})
}

// queryEvents reads the events table of rd's session database within statusDBTimeout, one T
// a row by scan. query is given the SELECT column list of names for rd's schema version
// (eventColumns) and returns the statement and its arguments. A database without an events
// table (schema 1) has no events: nil and no error.
func queryEvents[T any](ctx context.Context, rd *Reader, names []string, query func(cols string) (string, []any), scan func(*sql.Rows) (T, error)) ([]T, error) {
	cols, ok := eventColumns(rd.SchemaVersion(), names...)
	if !ok {
		return nil, nil
	}
	db, err := rd.pool()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, statusDBTimeout)
	defer cancel()
	stmt, args := query(cols)
	rows, err := db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		e, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// statusAgg accumulates events into a Status.
type statusAgg struct {
	st        *Status
	failOpens []FailOpen
	latestAt  map[string]string // writer kind → at of Latest[kind]
	hitInput  int64             // uncached input of requests with cache counts
	layouts   map[string]int
	dropped   map[string]int64 // session → largest dropped count of its trims
}

func newStatusAgg(st *Status) *statusAgg {
	return &statusAgg{st: st, latestAt: map[string]string{}, layouts: map[string]int{}, dropped: map[string]int64{}}
}

func (a *statusAgg) skip(sid, reason string) {
	a.st.Skipped++
	if len(a.st.SkippedSessions) < statusSkipped {
		a.st.SkippedSessions = append(a.st.SkippedSessions, SkippedSession{Session: sid, Reason: reason})
	}
}

func (a *statusAgg) add(sid string, e *statusEvent) {
	st := a.st
	if e.version != "" {
		writer, _, _ := strings.Cut(e.version, ":")
		if prev, ok := a.latestAt[writer]; !ok || e.at > prev || (e.at == prev && e.version > st.Latest[writer]) {
			a.latestAt[writer] = e.at
			st.Latest[writer] = e.version
		}
	}
	switch e.kind {
	case "trim":
		st.Trims++
		if e.tokensBefore != nil && e.tokensAfter != nil {
			st.TokensSaved += savedTokens(*e.tokensBefore, *e.tokensAfter)
		}
		if e.dropped != nil && *e.dropped > a.dropped[sid] {
			a.dropped[sid] = *e.dropped
		}
	case "fail_open":
		st.FailOpens++
		a.failOpens = append(a.failOpens, FailOpen{At: e.at, Session: sid, Location: e.location, Error: e.errType})
	case "usage":
		a.addUsage(e)
	}
}

func (a *statusAgg) addUsage(e *statusEvent) {
	u := &a.st.Usage
	u.Requests++
	val := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	u.InputTokens += val(e.input)
	u.CacheReadTokens += val(e.cacheRead)
	u.CacheCreation += val(e.cacheCreation)
	u.OutputTokens += val(e.output)
	if e.cacheRead != nil || e.cacheCreation != nil {
		u.WithCacheCounts++
		a.hitInput += val(e.input)
	}
	if e.cacheCreation != nil {
		group := &u.Other
		if e.trimmed != nil && *e.trimmed == 2 {
			group = &u.NewCut
		}
		group.Requests++
		group.CacheCreationTokens += *e.cacheCreation
	}
	if e.breakpoints != nil {
		u.Breakpoints[strconv.FormatInt(*e.breakpoints, 10)]++
	}
	if e.breakpointAt != "" {
		a.layouts[e.breakpointAt]++
	}
}

// finish sorts and caps the lists and computes the ratios.
func (a *statusAgg) finish() {
	st := a.st
	for _, n := range a.dropped {
		st.MessagesDropped += n
	}
	slices.SortFunc(a.failOpens, func(x, y FailOpen) int {
		return cmp.Or(strings.Compare(y.At, x.At), strings.Compare(x.Session, y.Session))
	})
	st.LastErrors = append(st.LastErrors, a.failOpens[:min(len(a.failOpens), statusLastErrors)]...)

	u := &st.Usage
	if u.WithCacheCounts > 0 {
		// Cache counts imply WithCacheCounts, so only the input sum needs its own subset.
		if den := u.CacheReadTokens + u.CacheCreation + a.hitInput; den > 0 {
			u.HitRatio = ratio(float64(u.CacheReadTokens) / float64(den))
		}
	}
	for _, g := range []*CacheCreation{&u.NewCut, &u.Other} {
		if g.Requests > 0 {
			g.Average = ratio(float64(g.CacheCreationTokens) / float64(g.Requests))
		}
	}
	type layout struct {
		at string
		n  int
	}
	ls := make([]layout, 0, len(a.layouts))
	for at, n := range a.layouts {
		ls = append(ls, layout{at, n})
	}
	slices.SortFunc(ls, func(x, y layout) int { return cmp.Or(y.n-x.n, strings.Compare(x.at, y.at)) })
	for i, l := range ls {
		if i < statusLayouts {
			u.BreakpointLayouts[l.at] = l.n
		} else {
			u.BreakpointLayoutsOmitted += l.n
		}
	}
}

// ratio rounds to four decimals, enough for a percentage with two.
func ratio(f float64) *float64 {
	r := math.Round(f*1e4) / 1e4
	return &r
}

// savedTokens is a trim's tokens saved, clamped to 0..before: events written before the
// estimate had its floor could carry a negative tokens_after, which showed more tokens saved
// than the request had. savedTokensSQL is the same in SQL.
func savedTokens(before, after int64) int64 { return max(0, min(before, before-after)) }

const savedTokensSQL = "max(0, min(tokens_before, tokens_before - tokens_after))"
