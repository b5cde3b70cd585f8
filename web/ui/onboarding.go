package ui

import "strings"

// FirstSteps is the overview's "what to do next" while no session is stored (issue 15,
// Deliver 4): the agents by wiring, each list in display order.
type FirstSteps struct {
	Wired, NotWired, NotInstalled []string
	Service                       string // the dashboard's address, http://127.0.0.1:<port>
}

// WirePage is GET /ui/wire, "Wire my agents" (issue 15, Deliver 4).
type WirePage struct {
	Page
	CSRF    string
	Problem string // the plan could not be made: what to do instead
	Agents  []WireAgent
	// Wirable are the agents install would change: "Wire all" wires them.
	Wirable []string
	Report  *WireReport // what the button just pressed did; nil for none
}

// WireAgent is one agent's card on the wire page.
type WireAgent struct {
	Agent, Name   string // "claude-code", "Claude Code"
	Wiring        string // wired, not wired, not installed, unknown
	Detail        string
	Meaning       string // the wiring in a sentence
	InstallDiff   string
	InstallFiles  []string
	UninstallDiff string
	Notes         []string
	Problem       string
}

// WireReport is what a wire button did: the command's lines and its error.
type WireReport struct {
	Action string // install, uninstall
	Agents string
	Lines  string
	Error  string
}

func joinComma(s []string) string { return strings.Join(s, ", ") }
