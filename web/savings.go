package web

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/savings"
	"github.com/smarter-compact/smarter-compact/web/ui"
)

// The savings figures of the overview and /api/status (issue 15, Deliver 1): the store's
// savings records priced with the current price table.

// prices is the current price table (Options.Prices), the built-in one without it.
func (s *Server) currentPrices() savings.Prices {
	if s.prices != nil {
		if p := s.prices(); p != nil {
			return p
		}
	}
	return savings.DefaultPrices()
}

// savingsSummary prices the last week's savings records.
func (s *Server) savingsSummary(ctx context.Context) (savings.Summary, error) {
	now := s.now()
	groups, err := s.root.Savings(ctx, savings.Since(now))
	if err != nil {
		return savings.Summary{}, err
	}
	return savings.Summarize(groups, s.currentPrices(), now), nil
}

// savingsView formats a summary for the overview.
func savingsView(sum savings.Summary, err error) ui.Savings {
	v := ui.Savings{Note: savings.Note}
	if err != nil {
		v.Problem = "The savings could not be read: " + err.Error()
		return v
	}
	v.Today, v.Week, v.NoPrice = figureView(sum.Today), figureView(sum.Week), sum.NoPrice
	for _, r := range sum.ByAgent {
		v.Rows = append(v.Rows, ui.SavingsRow{Kind: "agent", Key: r.Key, SavingsFigure: figureView(r.Figure)})
	}
	for _, r := range sum.ByModel {
		v.Rows = append(v.Rows, ui.SavingsRow{Kind: "model", Key: r.Key, SavingsFigure: figureView(r.Figure)})
	}
	for _, r := range sum.BySession {
		v.Rows = append(v.Rows, ui.SavingsRow{Kind: "session", Key: r.Key, Href: sessionHref(r.Key), SavingsFigure: figureView(r.Figure)})
	}
	return v
}

// figureView formats a Figure: dollars with two decimals from $0.10 on, four below (a short
// session costs cents), the percentage with one.
func figureView(f savings.Figure) ui.SavingsFigure {
	v := ui.SavingsFigure{
		Saved: USD(f.Saved), Cost: USD(f.Cost), Untrimmed: USD(f.Untrimmed), Percent: "–",
		SavedUSD: exact(f.Saved), CostUSD: exact(f.Cost), UntrimmedUSD: exact(f.Untrimmed),
		Negative: f.Saved < 0,
	}
	if f.Percent != nil {
		v.Percent = strings.Replace(savings.PercentText(*f.Percent), "-", "−", 1) + "\u00a0%"
	}
	v.Requests = ui.Plural(f.Requests, "request", "requests")
	if f.Unpriced > 0 {
		v.Requests += fmt.Sprintf(" (%s without a price)", ui.Commas(f.Unpriced))
	}
	return v
}

// USD is savings.USD with the typographic minus: "$4.20", "$0.0123", "−$0.02".
func USD(v float64) string { return strings.Replace(savings.USD(v), "-", "−", 1) }

func exact(v float64) string { return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', 6, 64) }

// savingsFact is the session page's "Saved (estimate)" line: the session's money over all
// its requests.
func (s *Server) savingsFact(recs []store.SavingsRecord) ui.Fact {
	f, notes := savings.RecordsFigure(recs, s.currentPrices())
	v := figureView(f)
	text := fmt.Sprintf("%s (%s): cost %s, untrimmed %s, %s", v.Saved, v.Percent, v.Cost, v.Untrimmed, v.Requests)
	for _, n := range notes {
		text += "; " + n
	}
	return ui.Fact{Label: "Saved (estimate)", Value: text}
}
