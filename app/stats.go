package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/store"
)

// stats is the `stats [--json]` command (the seed's `context stats`; issue 17): the recall
// tools' calls from tool-calls.jsonl per tool and session, how many came after a trim, the
// share of trimmed sessions whose agent searched, and the message and blob inventory. It
// reads the store only; the service need not run.
func stats(ctx context.Context, args []string, sys system) error {
	fs := flag.NewFlagSet("stats", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON (tools keyed by tool name, per session and overall)")
	if err := parseFlags(fs, args, sys.stdout); err != nil {
		return err
	}
	return withStore(sys, func(root *store.Root) error {
		st, err := root.Stats(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return installer.WriteJSON(sys.stdout, st)
		}
		writeStats(sys.stdout, &st)
		return nil
	})
}

// counted is n and its noun: "1 call", "2 calls".
func counted(n int, one, many string) string { return fmt.Sprintf("%d %s", n, plural(n, one, many)) }

// writeStats prints the human summary: overall first, then one block per session.
func writeStats(w io.Writer, st *store.Stats) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("Recall tools: %s, %d after a trim, %s", counted(st.Calls, "call", "calls"), st.AfterTrim, counted(st.Errors, "error", "errors"))
	for _, t := range store.ToolNames(st.Tools) {
		p("  %-22s %s, %d %s", t, counted(st.Tools[t], "call", "calls"), st.Hits[t], store.ToolHitUnit(t))
	}
	share := "no trimmed sessions yet"
	if st.SearchedShare != nil {
		share = fmt.Sprintf("%d of %d searched after a trim (%.0f%%)", st.Searched, st.TrimmedSessions, *st.SearchedShare*100)
	}
	p("Trimmed sessions: %s", share)
	p("Messages: %d stored, %d in context, %d trimmed", st.Messages.Total, st.Messages.InContext, st.Messages.Trimmed)
	p("Blobs: %s, %d bytes", counted(st.Blobs.Count, "file", "files"), st.Blobs.Bytes)
	if st.BadLines > 0 {
		p("(%s of tool-calls.jsonl could not be read)", counted(st.BadLines, "line", "lines"))
	}
	if len(st.Sessions) == 0 {
		return
	}
	p("")
	p("Sessions, newest first:")
	for _, s := range st.Sessions {
		agent := s.Agent
		if agent == "" {
			agent = "unknown agent"
		}
		trims := "no trims"
		if s.Trims > 0 {
			trims = fmt.Sprintf("%s, the first at %s", counted(int(s.Trims), "trim", "trims"), s.FirstTrim)
		}
		p("  %s (%s): %s", s.SessionID, agent, trims)
		if s.Problem != "" {
			p("    cannot read: %s", s.Problem)
		}
		var tools []string
		for _, t := range store.ToolNames(s.Tools) {
			tools = append(tools, fmt.Sprintf("%s %d (%d %s)", t, s.Tools[t], s.Hits[t], store.ToolHitUnit(t)))
		}
		if len(tools) == 0 {
			tools = []string{"none"}
		}
		searched := ""
		if s.Trims > 0 {
			searched = "; searched after a trim: no"
			if s.Searched {
				searched = "; searched after a trim: yes"
			}
		}
		p("    tools: %s; %d after a trim%s", strings.Join(tools, ", "), s.AfterTrim, searched)
		p("    messages: %d stored, %d in context, %d trimmed; blobs: %d", s.Messages.Total, s.Messages.InContext, s.Messages.Trimmed, s.Blobs.Count)
	}
}
