package ui

// Savings is the overview's money panel (issue 15, Deliver 1): today and this week, and the
// week by agent, model and session. Every value is formatted by package web; USD holds the
// exact dollars for tests and tooltips.
type Savings struct {
	Problem string // the figures could not be read
	Note    string // what the estimate is
	Today   SavingsFigure
	Week    SavingsFigure
	Rows    []SavingsRow
	NoPrice []string // "no price for model X: …"
}

// SavingsFigure is one window's money.
type SavingsFigure struct {
	Saved, Percent, Cost, Untrimmed string // "$0.42", "58.0 %", …
	SavedUSD, CostUSD, UntrimmedUSD string // exact: "0.420000"
	Requests                        string // "12 requests (3 without a price)"
	Negative                        bool   // a new cut's cache rewrite cost more than it saved
}

// SavingsRow is one agent, model or session of the week.
type SavingsRow struct {
	Kind, Key, Href string // Kind: agent, model, session; Href only for sessions
	SavingsFigure
}
