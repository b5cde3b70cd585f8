package store

import (
	"context"
	"fmt"
	"time"
)

// Daily totals across sessions (DESIGN.md §9), from the cached session summaries.

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
