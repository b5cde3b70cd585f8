package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// The rows and events of one session as the dashboard's session page shows them; read through
// OpenReader, never creating a file.

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
	names := []string{"id", "at", "kind", "location", "error", "tokens_before", "tokens_after", "dropped",
		"model", "trimmed", "input_tokens", "cache_read_tokens", "cache_creation_tokens", "output_tokens", "breakpoints"}
	query := func(cols string) (string, []any) {
		if limit > 0 {
			return "SELECT * FROM (SELECT " + cols + " FROM events ORDER BY id DESC LIMIT ?) ORDER BY 1", []any{limit}
		}
		return "SELECT " + cols + " FROM events ORDER BY id", nil
	}
	out, err := queryEvents(ctx, rd, names, query, func(q *sql.Rows) (EventInfo, error) {
		var e EventInfo
		var at string
		var location, errType, model *string
		var ints [9]*int64
		if err := q.Scan(&e.ID, &at, &e.Kind, &location, &errType, &ints[0], &ints[1], &ints[2], &model,
			&ints[3], &ints[4], &ints[5], &ints[6], &ints[7], &ints[8]); err != nil {
			return e, err
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
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("session events of %s: %w", sid, err)
	}
	return out, nil
}
