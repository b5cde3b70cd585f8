package installer

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// The install and uninstall commands' report, as the user reads it.

// Print writes what `smarter-compact <cmd>` (install or uninstall; dryRun: --dry-run) did,
// one block per agent, to w, and returns an error per failed agent, each with what to do.
func (rep Report) Print(w io.Writer, cmd string, dryRun bool) []error {
	var failed []error
	would := func(done, planned string) string {
		if dryRun {
			return planned
		}
		return done
	}
	for _, a := range rep.Agents {
		switch {
		case a.Err != nil:
			// The cause is printed once, with the returned error (stderr).
			fmt.Fprintf(w, "%s: failed, nothing written for it (why: below)\n", a.Agent)
			failed = append(failed, fmt.Errorf("%s: %w\nfix the file named above (or move it aside), then run: smarter-compact %s --agents %s", a.Agent, a.Err, cmd, a.Agent))
			continue
		case a.Skipped != "":
			fmt.Fprintf(w, "%s: %s\n", a.Agent, strings.TrimPrefix(a.Skipped, a.Agent+": "))
			continue
		}
		fmt.Fprintf(w, "%s: %s\n", a.Agent, reportHeadline(a, cmd, would))
		for _, file := range a.Files {
			fmt.Fprintf(w, "  %s\n", reportFileLine(a, file, cmd, dryRun, would))
		}
		for _, n := range a.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		if dryRun && a.Diff != "" {
			io.WriteString(w, a.Diff)
			if !strings.HasSuffix(a.Diff, "\n") {
				io.WriteString(w, "\n")
			}
		}
	}
	return failed
}

// reportHeadline is what happened to a wired or unwired agent, the line after its name.
func reportHeadline(a AgentReport, cmd string, would func(done, planned string) string) string {
	switch {
	case cmd == "install" && len(a.Files) == 0:
		return "already wired, nothing to change"
	case cmd == "install":
		return would("wired", "would wire")
	case a.Tier == 1:
		return would("unwired: removed what install added", "would remove what install added")
	case a.Tier == 2:
		return would("no usable install diff: restored the snapshots taken at install", "no usable install diff: would restore the snapshots taken at install")
	case a.Tier == 3:
		return would("no install record: removed the smarter-compact wiring found in the files", "no install record: would remove the smarter-compact wiring found in the files")
	default:
		return "nothing to undo"
	}
}

// reportFileLine is what happened to one of the agent's files.
func reportFileLine(a AgentReport, file, cmd string, dryRun bool, would func(done, planned string) string) string {
	switch {
	case cmd == "install":
		return would("wrote", "would write") + " " + file
	case dryRun:
		return "would put back " + file
	case lexists(file) && a.Tier == 3:
		return "edited " + file
	case lexists(file):
		return "restored " + file
	default:
		return "removed " + file + " (install had created it)"
	}
}

// Wired reports whether an install report has an agent that is wired now.
func (rep Report) Wired() bool {
	for _, a := range rep.Agents {
		if a.Err == nil && a.Skipped == "" {
			return true
		}
	}
	return false
}

// lexists reports whether path exists, a dangling symlink included (os.Lstat).
func lexists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
