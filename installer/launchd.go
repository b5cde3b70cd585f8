package installer

// The portable half of the macOS LaunchAgent (service_darwin.go runs launchctl): where the
// agent's program lives when the binary is inside an .app bundle, and parsers for what
// launchctl prints, so that both are tested on any host against captured text
// (testdata/launchd/).

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// macBundleID is the CFBundleIdentifier of Smarter Compact.app (packaging/macos/Info.plist.in
// holds the same; .ci/check-darwin compares them). The LaunchAgent's label stays the
// service name ("smarter-compact"), so that installs from before the app bundle are found,
// replaced and removed under the same name.
const macBundleID = "io.github.smarter-compact"

// bundleExecutable reports whether exe (a resolved, absolute macOS path) is the
// executable of an application bundle, <dir>/<Name>.app/Contents/MacOS/<file>, and returns
// the bundle's path. A binary that merely sits somewhere below a bundle (Resources/, a
// nested framework) is not.
func bundleExecutable(exe string) (bundle string, ok bool) {
	macos := path.Dir(exe)
	contents := path.Dir(macos)
	app := path.Dir(contents)
	if path.Base(macos) != "MacOS" || path.Base(contents) != "Contents" ||
		!strings.HasSuffix(app, ".app") || path.Base(app) == ".app" || path.Base(exe) == "" {
		return "", false
	}
	return app, true
}

// bundled points the agent at the executable inside the .app bundle when c.Exe is a
// link to one (Homebrew's cask links /opt/homebrew/bin/smarter-compact to
// /Applications/Smarter Compact.app/Contents/MacOS/smarter-compact): macOS attributes the
// agent to the signed app in Login Items, and the path survives the link's removal. Any
// other link is kept as given (a package manager's stable link beats a versioned target).
//
// service_darwin.go calls it on the running system; it is here so that it is tested with
// real links on every host.
func bundled(c ServiceConfig, def ServiceDef) (ServiceConfig, ServiceDef) {
	resolved, err := filepath.EvalSymlinks(c.Exe)
	if err != nil || resolved == c.Exe {
		return c, def
	}
	if _, ok := bundleExecutable(resolved); !ok {
		return c, def
	}
	c.Exe = resolved
	def.Content = launchdPlist(c)
	return c, def
}

// launchdJob is what `launchctl print gui/<uid>/<label>` says about a loaded job: the
// top-level "key = value" lines of its description (nested blocks such as arguments,
// environment and endpoints are skipped).
type launchdJob struct {
	State    string // "running", "not running", "spawn scheduled", …
	PID      int    // 0 when no process runs
	LastExit string // "(never exited)", "0", "1", "(on signal: 15)", …; "" when absent
	Program  string // the executable launchd starts
	Path     string // the plist the job was loaded from
}

// errLaunchdNoJob: launchctl print found no such job in the domain (not loaded: never
// bootstrapped, booted out, or switched off in Login Items).
var errLaunchdNoJob = errors.New("not loaded")

// parseLaunchctlPrint reads the output of `launchctl print <domain>/<label>` (stdout and
// stderr together). It returns errLaunchdNoJob for launchctl's "Could not find service"
// and an error quoting the first line for anything else it does not recognise.
func parseLaunchctlPrint(out string) (launchdJob, error) {
	var job launchdJob
	if strings.Contains(out, "Could not find service") {
		return job, errLaunchdNoJob
	}
	depth, seen := 0, false
	for line := range strings.Lines(out) {
		l := strings.TrimSpace(line)
		switch {
		case l == "":
			continue
		case l == "}":
			depth--
			continue
		case strings.HasSuffix(l, "{"):
			// "gui/501/smarter-compact = {" opens the job; any other block nests.
			if depth == 0 {
				seen = true
			}
			depth++
			continue
		}
		if depth != 1 {
			continue
		}
		k, v, ok := strings.Cut(l, " = ")
		if !ok {
			continue
		}
		switch k {
		case "state":
			job.State = v
		case "pid":
			job.PID, _ = strconv.Atoi(v)
		case "last exit code":
			job.LastExit = v
		case "program":
			job.Program = v
		case "path":
			job.Path = v
		}
	}
	if !seen || job.State == "" {
		first, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
		return job, fmt.Errorf("launchctl print: unexpected output %q", first)
	}
	return job, nil
}

// String is the job as `service status` shows it: "running (pid 812)", "not running
// (last exit code 1)".
func (j launchdJob) String() string {
	s := j.State
	switch {
	case j.PID > 0:
		s += " (pid " + strconv.Itoa(j.PID) + ")"
	case j.LastExit != "" && j.LastExit != "(never exited)":
		s += " (last exit code " + j.LastExit + ")"
	}
	return s
}

// parseLaunchdDisabled reads `launchctl print-disabled gui/<uid>` and reports whether
// label is switched off. Lines look like `"<label>" => disabled` or `=> enabled` (macOS
// 13 and later) or `=> true` / `=> false` (earlier releases; true means disabled). A label
// with no line has no override, so it is not disabled. Output without the
// "disabled services = {" block, or an unknown value for label, is an error.
func parseLaunchdDisabled(out, label string) (bool, error) {
	open, off := false, false
	for line := range strings.Lines(out) {
		l := strings.TrimSpace(line)
		if strings.HasSuffix(l, "disabled services = {") {
			open = true
			continue
		}
		if !open {
			continue
		}
		if l == "}" {
			return off, nil // a truncated block is not believed
		}
		k, v, ok := strings.Cut(l, " => ")
		if !ok || k != strconv.Quote(label) {
			continue
		}
		switch v {
		case "disabled", "true":
			off = true
			continue
		case "enabled", "false":
			off = false
			continue
		}
		return false, fmt.Errorf("launchctl print-disabled: %s has the unknown value %q", label, v)
	}
	if open {
		return false, errors.New("launchctl print-disabled: the disabled services block is not closed")
	}
	return false, errors.New("launchctl print-disabled: no \"disabled services\" block in its output")
}
