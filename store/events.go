package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Event is one events row (contract: Events). Empty strings of the optional text columns
// (Location, Error, Model, ThreadRoot, BreakpointAt) and nil pointers store NULL.
type Event struct {
	At                  time.Time // stored as ISO 8601 UTC, whole seconds; zero means now
	Kind                string    // trim · fail_open · usage
	Version             string    // proxy:<12 hex> or opencode:<version>
	Location, Error     string    // fail_open only: <file>:<line> and the error type
	TokensBefore        *int64    // trim only: estimated tokens before the cut
	TokensAfter         *int64    // trim only: estimated tokens after the cut
	Dropped             *int64    // trim only: messages the cut removed
	Model, ThreadRoot   string    // usage only
	Trimmed             *int64    // usage only: 0 whole, 1 earlier cut, 2 new cut
	InputTokens         *int64    // usage only, provider-reported; nil when not reported
	CacheReadTokens     *int64
	CacheCreationTokens *int64
	OutputTokens        *int64
	Breakpoints         *int64 // usage, Anthropic route only: cache_control markers
	BreakpointAt        string // usage, Anthropic route only: tools, system, m-<k>, comma-separated
}

// AddEvent appends e to the events table in its own transaction. It returns SQLite's error
// (for example "database is locked" after the 1 s busy timeout); the caller logs it.
func (d *DB) AddEvent(e Event) (err error) {
	defer func() { d.noteBroken(err); d.noteReadOnly(err); err = d.noted(err) }()
	if e.Kind == "" {
		return errors.New("add event: empty kind")
	}
	at := e.At
	if at.IsZero() {
		at = time.Now()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.use(); err != nil {
		return err
	}
	if err := d.insertEvent(context.Background(), e, at); err != nil {
		return err
	}
	d.noteCommit()
	return nil
}

// insertEvent inserts e with the time at (d.mu held, d connected).
func (d *DB) insertEvent(ctx context.Context, e Event, at time.Time) error {
	_, err := d.stInsertEvent.ExecContext(ctx,
		formatTime(at), e.Kind, e.Version, nullText(e.Location), nullText(e.Error),
		nullInt(e.TokensBefore), nullInt(e.TokensAfter), nullInt(e.Dropped),
		nullText(e.Model), nullText(e.ThreadRoot), nullInt(e.Trimmed),
		nullInt(e.InputTokens), nullInt(e.CacheReadTokens), nullInt(e.CacheCreationTokens),
		nullInt(e.OutputTokens), nullInt(e.Breakpoints), nullText(e.BreakpointAt))
	if err != nil {
		return fmt.Errorf("add %s event: %w", e.Kind, err)
	}
	return nil
}

func nullInt(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
