package app

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/savings"
)

// The savings part of `status` (issue 15, Deliver 1): the plain summary it leads with.

// readSavings prices the last week's savings records of root.
func readSavings(ctx context.Context, root *store.Root, prices savings.Prices, now time.Time) (savings.Summary, error) {
	groups, err := root.Savings(ctx, savings.Since(now))
	if err != nil {
		return savings.Summary{}, err
	}
	return savings.Summarize(groups, prices, now), nil
}

// writeSavingsHeadline prints the line `status` leads with, "Saved today (estimate): $0.42
// (58.0 %) of $0.72 untrimmed, …; last 7 days: …", and the models without a price.
func writeSavingsHeadline(w io.Writer, s *savings.Summary) {
	fmt.Fprintf(w, "Saved today (estimate): %s; last 7 days: %s\n", s.Today.Line(), s.Week.Line())
	for _, n := range s.NoPrice {
		fmt.Fprintf(w, "  %s\n", n)
	}
}

// writeSavings prints the week by agent and by model (status --verbose).
func writeSavings(w io.Writer, s *savings.Summary) {
	if len(s.ByAgent)+len(s.ByModel) == 0 {
		return
	}
	fmt.Fprintln(w, "Saved in the last 7 days (estimate):")
	for _, r := range s.ByAgent {
		fmt.Fprintf(w, "  agent %-12s %s\n", r.Key, r.Figure.Line())
	}
	for _, r := range s.ByModel {
		fmt.Fprintf(w, "  model %-12s %s\n", r.Key, r.Figure.Line())
	}
	fmt.Fprintln(w)
}
