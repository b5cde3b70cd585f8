package ui

// Health is the overview's health banner and counts (issue 15 item 2): the problems active now, each
// with what to do, and every kind's count since the record started. It is built from the
// store's health record, which does not depend on the session databases.
type Health struct {
	Problems  []HealthProblem // active now, newest first
	Kinds     []HealthCount   // every kind, in the record's order
	Since     string          // when the counts started, "2026-12-02 07:10 UTC"
	SaveError string          // the record could not be saved to health.json
}

// HealthProblem is one active source: what failed, its newest text and what to do.
type HealthProblem struct {
	Kind        string // upstream, store_write, fail_open, trim_stuck
	Title       string // "Upstream api.anthropic.com fails"
	Count       string // "12 times since 07:10"
	Last        string // "07:42:10 UTC"
	Text        string
	Hint        string
	Session     string
	SessionHref string
}

// HealthCount is one kind's total.
type HealthCount struct {
	Kind   string
	Label  string // "Upstream errors"
	Count  string
	Active int
	Last   string // newest failure, "" when none
}
