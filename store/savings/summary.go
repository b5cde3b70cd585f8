package savings

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

// WeekDays is the window of "this week": the last seven UTC days, today included.
const WeekDays = 7

// Note labels every figure: it is an estimate (docs/savings.md).
const Note = "Estimate: the cost is the provider's reported usage at list prices; the untrimmed cost prices the tokens trimming and compression removed (estimated) as they would have been billed, prompt-cache effects included. Prices: the built-in list prices and config.toml [prices]."

// Figure is money over a set of requests: Cost at list prices of what was sent, Untrimmed
// the estimate of the same requests untrimmed, Saved their difference (negative when a new
// cut's cache rewrite cost more than it saved) and Percent Saved / Untrimmed × 100 (nil
// without a priced request). Requests counts the priced requests; Unpriced those whose model
// has no price, which add nothing to the money.
type Figure struct {
	Cost      float64  `json:"cost"`
	Untrimmed float64  `json:"untrimmedCost"`
	Saved     float64  `json:"saved"`
	Percent   *float64 `json:"percent"`
	Requests  int64    `json:"requests"`
	Unpriced  int64    `json:"unpricedRequests"`
	// SentTokens and UntrimmedTokens are the priced requests' prompt tokens (input + cache
	// read + cache creation), as sent and as estimated without trimming.
	SentTokens      int64 `json:"sentTokens"`
	UntrimmedTokens int64 `json:"untrimmedTokens"`
}

// Row is one session, agent or model's Figure over the week.
type Row struct {
	Key    string `json:"key"`              // session id, agent or model
	Agent  string `json:"agent,omitempty"`  // BySession only
	Family string `json:"family,omitempty"` // ByModel only: the price prefix matched; "" no price
	Figure
}

// Summary is the savings figures the overview, `status`, the tray and /api/status show
// (issue 15, Deliver 1). JSON keys are camelCase like the rest of /api/status.
type Summary struct {
	Currency string `json:"currency"` // USD
	Estimate bool   `json:"estimate"` // always true: see Note
	Note     string `json:"note"`
	Today    Figure `json:"today"` // the UTC day of now
	Week     Figure `json:"week"`  // the last WeekDays UTC days
	// BySession, ByAgent and ByModel break the week down, most saved first.
	BySession []Row `json:"bySession"`
	ByAgent   []Row `json:"byAgent"`
	ByModel   []Row `json:"byModel"`
	// NoPrice says, per model without a price, NoPriceError's text.
	NoPrice []string `json:"noPrice"`
}

// Since is the start of the week window Summarize reads: pass it to store.Root.Savings.
func Since(now time.Time) time.Time { return now.UTC().AddDate(0, 0, -(WeekDays - 1)) }

// Summarize prices groups (store.Root.Savings since Since(now)) with prices.
func Summarize(groups []store.SavingsGroup, prices Prices, now time.Time) Summary {
	s := Summary{Currency: "USD", Estimate: true, Note: Note, BySession: []Row{}, ByAgent: []Row{}, ByModel: []Row{}, NoPrice: []string{}}
	today := now.UTC().Format(time.DateOnly)
	from := Since(now).Format(time.DateOnly)
	sessions, agents, models := map[string]*Row{}, map[string]*Row{}, map[string]*Row{}
	row := func(m map[string]*Row, key string) *Row {
		r := m[key]
		if r == nil {
			r = &Row{Key: key}
			m[key] = r
		}
		return r
	}
	noPrice := map[string]bool{}
	for i := range groups {
		g := &groups[i]
		if g.Date < from || g.Date > today {
			continue
		}
		price, family, ok := prices.Lookup(g.Model)
		var add func(f *Figure)
		if ok {
			sent, untrimmed := tokens(g.Sent), tokens(g.Untrimmed)
			cost, un := price.Cost(sent), price.Cost(untrimmed)
			sentT, unT := sent.Input+sent.CacheRead+sent.CacheWrite, untrimmed.Input+untrimmed.CacheRead+untrimmed.CacheWrite
			add = func(f *Figure) {
				f.Cost += cost
				f.Untrimmed += un
				f.Requests += g.Requests
				f.SentTokens += sentT
				f.UntrimmedTokens += unT
			}
		} else {
			noPrice[g.Model] = true
			add = func(f *Figure) { f.Unpriced += g.Requests }
		}
		if g.Date == today {
			add(&s.Today)
		}
		add(&s.Week)
		sr := row(sessions, g.Session)
		sr.Agent = g.Agent
		add(&sr.Figure)
		agent := g.Agent
		if agent == "" {
			agent = "unknown"
		}
		add(&row(agents, agent).Figure)
		mr := row(models, g.Model)
		mr.Family = family
		add(&mr.Figure)
	}
	s.Today.finish()
	s.Week.finish()
	s.BySession, s.ByAgent, s.ByModel = rows(sessions), rows(agents), rows(models)
	for _, m := range slices.Sorted(maps.Keys(noPrice)) {
		s.NoPrice = append(s.NoPrice, NoPriceError(m))
	}
	return s
}

// RecordsFigure prices records (one session's, store.Root.SessionSavings) over all their
// days; the notes name the models without a price.
func RecordsFigure(recs []store.SavingsRecord, prices Prices) (Figure, []string) {
	var f Figure
	var missing []string
	for i := range recs {
		r := &recs[i]
		price, _, ok := prices.Lookup(r.Model)
		if !ok {
			f.Unpriced++
			if !slices.Contains(missing, r.Model) {
				missing = append(missing, r.Model)
			}
			continue
		}
		sent := Tokens{r.InputTokens, r.CacheReadTokens, r.CacheCreationTokens, r.OutputTokens}
		untrimmed := Tokens{r.UntrimmedInputTokens, r.UntrimmedCacheReadTokens, r.UntrimmedCacheCreationTokens, r.OutputTokens}
		f.Cost += price.Cost(sent)
		f.Untrimmed += price.Cost(untrimmed)
		f.Requests++
		f.SentTokens += r.SentPromptTokens()
		f.UntrimmedTokens += r.UntrimmedPromptTokens()
	}
	f.finish()
	slices.Sort(missing)
	notes := make([]string, len(missing))
	for i, m := range missing {
		notes[i] = NoPriceError(m)
	}
	return f, notes
}

func tokens(c store.SavingsCounts) Tokens {
	return Tokens{Input: c.Input, CacheRead: c.CacheRead, CacheWrite: c.CacheCreation, Output: c.Output}
}

// finish rounds the money to a millionth of a dollar and computes Saved and Percent.
func (f *Figure) finish() {
	round := func(v float64) float64 { return math.Round(v*1e6) / 1e6 }
	f.Saved = round(f.Untrimmed - f.Cost)
	if f.Untrimmed > 0 {
		p := math.Round((f.Untrimmed-f.Cost)/f.Untrimmed*1e4) / 1e2
		f.Percent = &p
	}
	f.Cost, f.Untrimmed = round(f.Cost), round(f.Untrimmed)
}

func rows(m map[string]*Row) []Row {
	out := make([]Row, 0, len(m))
	for _, r := range m {
		r.finish()
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Row) int {
		return cmp.Or(cmp.Compare(b.Saved, a.Saved), strings.Compare(a.Key, b.Key))
	})
	return out
}

// Line is f as one line of plain text for `status`: "$0.42 (58.0 %) of $0.72 untrimmed, 12
// requests", with ", 2 without a price" when some requests had none, and "no requests"
// when there were none. The dashboard shows the same parts (USD, PercentText) in its cards.
func (f Figure) Line() string {
	if f.Requests == 0 && f.Unpriced == 0 {
		return "no requests"
	}
	pct := "–"
	if f.Percent != nil {
		pct = PercentText(*f.Percent) + " %"
	}
	reqs := "requests"
	if f.Requests == 1 {
		reqs = "request"
	}
	line := fmt.Sprintf("%s (%s) of %s untrimmed, %d %s", USD(f.Saved), pct, USD(f.Untrimmed), f.Requests, reqs)
	if f.Unpriced > 0 {
		line += fmt.Sprintf(", %d without a price", f.Unpriced)
	}
	return line
}

// PercentText formats a Figure's Percent with one decimal and an ASCII minus, no unit:
// "58.0", "-3.2".
func PercentText(p float64) string { return strconv.FormatFloat(p, 'f', 1, 64) }

// USD formats v dollars for a person, with an ASCII minus: "$4.20", "$0.0123", "-$0.02"
// (two decimals from $0.10 on, four below).
func USD(v float64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	if v >= 0.1 || v == 0 {
		return sign + "$" + strconv.FormatFloat(v, 'f', 2, 64)
	}
	return sign + "$" + strconv.FormatFloat(v, 'f', 4, 64)
}
