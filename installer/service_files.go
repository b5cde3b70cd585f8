package installer

// The text each OS's manager registers, rendered on any host (so every OS's file is checked
// everywhere), and the parsers that read an executable back out of a registration: the
// systemd user unit, the LaunchAgent plist, the Windows Run value's command line, and the pid
// in `launchctl list` output. ServiceFile (service.go) picks one by ServiceConfig.GOOS.

import (
	"html"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
)

// systemdUnit is our user unit. WantedBy=default.target: the user manager has no
// multi-user.target. Restart=on-failure, not always: a clean exit (quit from the tray) stays
// stopped. No EnvironmentFile: the service reads its own config. ExecStart quotes every
// word, so spaces in the path are fine.
func systemdUnit(c ServiceConfig) string {
	var b strings.Builder
	b.WriteString("# Written by `smarter-compact service install`; `smarter-compact service uninstall` removes it.\n")
	b.WriteString("[Unit]\n")
	b.WriteString("Description=" + systemdSpecifiers(c.Description) + "\n")
	b.WriteString("ConditionFileIsExecutable=" + systemdSpecifiers(c.Exe) + "\n")
	b.WriteString("StartLimitIntervalSec=60\nStartLimitBurst=5\n")
	b.WriteString("\n[Service]\nType=simple\n")
	b.WriteString("ExecStart=" + systemdQuote(c.Exe, true))
	for _, a := range c.Args {
		b.WriteString(" " + systemdQuote(a, true))
	}
	b.WriteString("\nRestart=on-failure\nRestartSec=3\n")
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		b.WriteString("Environment=" + systemdQuote(k+"="+c.Env[k], false) + "\n")
	}
	b.WriteString("\n[Install]\nWantedBy=default.target\n")
	return b.String()
}

// systemdSpecifiers escapes '%', which systemd expands in almost every setting.
func systemdSpecifiers(s string) string { return strings.ReplaceAll(s, "%", "%%") }

// systemdQuote is one word of a command line (exec: also '$', which ExecStart expands) or
// of Environment=: double-quoted, with C escapes for '\' and '"'.
func systemdQuote(s string, exec bool) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%")
	if exec {
		r = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%", "$", "$$")
	}
	return `"` + r.Replace(s) + `"`
}

// launchdPlist is our LaunchAgent. RunAtLoad starts it at login; KeepAlive restarts it
// when it exits with an error but not after a clean exit (quit from the tray), which a
// plain KeepAlive=true would undo at once. LimitLoadToSessionType Aqua loads it only into
// a GUI login session, where the menu-bar tray can run (never for ssh or background
// sessions). When c.Exe is the executable of an .app bundle (…/X.app/Contents/MacOS/x;
// service_darwin.go resolves a link to one first), AssociatedBundleIdentifiers names the
// app (macBundleID), so that Login Items (macOS 13+) can list the agent under the signed app.
func launchdPlist(c ServiceConfig) string {
	x := func(s string) string { return plistEscaper.Replace(s) }
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by smarter-compact service install; smarter-compact service uninstall removes it. -->
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>` + x(c.Name) + `</string>
	<key>ProgramArguments</key>
	<array>
`)
	for _, a := range append([]string{c.Exe}, c.Args...) {
		b.WriteString("\t\t<string>" + x(a) + "</string>\n")
	}
	b.WriteString("\t</array>\n")
	if len(c.Env) > 0 {
		b.WriteString("\t<key>EnvironmentVariables</key>\n\t<dict>\n")
		for _, k := range slices.Sorted(maps.Keys(c.Env)) {
			b.WriteString("\t\t<key>" + x(k) + "</key>\n\t\t<string>" + x(c.Env[k]) + "</string>\n")
		}
		b.WriteString("\t</dict>\n")
	}
	b.WriteString(`	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>ProcessType</key>
	<string>Interactive</string>
	<key>LimitLoadToSessionType</key>
	<string>Aqua</string>
`)
	if _, ok := bundleExecutable(c.Exe); ok {
		b.WriteString("\t<key>AssociatedBundleIdentifiers</key>\n\t<array>\n\t\t<string>" + macBundleID + "</string>\n\t</array>\n")
	}
	if c.LogDir != "" {
		b.WriteString("\t<key>StandardOutPath</key>\n\t<string>" + x(path.Join(c.LogDir, c.Name+".out.log")) + "</string>\n")
		b.WriteString("\t<key>StandardErrorPath</key>\n\t<string>" + x(path.Join(c.LogDir, c.Name+".err.log")) + "</string>\n")
	}
	b.WriteString("</dict>\n</plist>\n")
	return b.String()
}

var plistEscaper = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;", `"`, "&#34;", `'`, "&#39;")

// windowsCommandLine is the Run value: the executable always in quotes (an unquoted path
// with spaces is ambiguous and a known hijack), the arguments quoted as Windows' command
// line parser (CommandLineToArgvW) reads them back.
func windowsCommandLine(exe string, args []string) string {
	var b strings.Builder
	b.WriteString(`"` + exe + `"`)
	for _, a := range args {
		b.WriteString(" " + windowsEscapeArg(a))
	}
	return b.String()
}

// windowsEscapeArg is syscall.EscapeArg of the Windows build, here so that every host can
// render and test the Run value.
func windowsEscapeArg(s string) string {
	if s == "" {
		return `""`
	}
	if !strings.ContainsAny(s, "\"\\ \t") {
		return s
	}
	hasSpace := strings.ContainsAny(s, " \t")
	if !strings.ContainsAny(s, `"\`) {
		return `"` + s + `"`
	}
	var b strings.Builder
	if hasSpace {
		b.WriteByte('"')
	}
	slashes := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		default:
			slashes = 0
		case '\\':
			slashes++
		case '"':
			for ; slashes > 0; slashes-- {
				b.WriteByte('\\')
			}
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	if hasSpace {
		for ; slashes > 0; slashes-- {
			b.WriteByte('\\')
		}
		b.WriteByte('"')
	}
	return b.String()
}

// systemdExec returns the ExecStart= value and its executable, unquoted (our quoting, or
// the \x20 escapes of kardianos/service's default template).
func systemdExec(unit string) (line, exe string) {
	for l := range strings.Lines(unit) {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			line = v
			break
		}
	}
	v := strings.TrimLeft(line, "-@:+!")
	if rest, ok := strings.CutPrefix(v, `"`); ok {
		var b strings.Builder
		for i := 0; i < len(rest); i++ {
			switch c := rest[i]; {
			case c == '\\' && i+1 < len(rest):
				i++
				b.WriteByte(rest[i])
			case c == '"':
				return line, strings.NewReplacer("%%", "%", "$$", "$").Replace(b.String())
			default:
				b.WriteByte(c)
			}
		}
		return line, ""
	}
	word, _, _ := strings.Cut(v, " ")
	return line, strings.NewReplacer(`\x20`, " ", "%%", "%", "$$", "$").Replace(word)
}

// plistProgram is the first ProgramArguments string of a plist.
func plistProgram(plist string) string {
	_, rest, ok := strings.Cut(plist, "<key>ProgramArguments</key>")
	if !ok {
		return ""
	}
	_, rest, ok = strings.Cut(rest, "<string>")
	if !ok {
		return ""
	}
	v, _, ok := strings.Cut(rest, "</string>")
	if !ok {
		return ""
	}
	return html.UnescapeString(v)
}

// windowsProgram is the executable of a Run value's command line.
func windowsProgram(cmd string) string {
	if rest, ok := strings.CutPrefix(cmd, `"`); ok {
		v, _, _ := strings.Cut(rest, `"`)
		return v
	}
	v, _, _ := strings.Cut(cmd, " ")
	return v
}

// launchctlListPID is the "PID" of `launchctl list <label>`'s output (a dict of
// `"PID" = 123;` lines), 0 when there is none (loaded, not running).
func launchctlListPID(out string) int {
	for l := range strings.Lines(out) {
		v, ok := strings.CutPrefix(strings.TrimSpace(l), `"PID" = `)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), ";"))
		if err == nil && n > 0 {
			return n
		}
	}
	return 0
}
