package installer

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func launchdSample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "launchd", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBundleExecutable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		exe, bundle string
	}{
		{"/Applications/Smarter Compact.app/Contents/MacOS/smarter-compact", "/Applications/Smarter Compact.app"},
		{"/Users/u/Applications/X.app/Contents/MacOS/x", "/Users/u/Applications/X.app"},
		{"/opt/homebrew/bin/smarter-compact", ""},
		{"/Applications/X.app/Contents/Resources/smarter-compact", ""},
		{"/Applications/X.app/Contents/MacOS/sub/smarter-compact", ""},
		{"/Applications/.app/Contents/MacOS/smarter-compact", ""},
		{"/Applications/X.apps/Contents/MacOS/smarter-compact", ""},
	} {
		got, ok := bundleExecutable(c.exe)
		if got != c.bundle || ok != (c.bundle != "") {
			t.Errorf("bundleExecutable(%q) = %q, %v; want %q", c.exe, got, ok, c.bundle)
		}
	}
}

func TestParseLaunchctlPrint(t *testing.T) {
	t.Parallel()
	job, err := parseLaunchctlPrint(launchdSample(t, "print_running.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := launchdJob{
		State: "running", PID: 812, LastExit: "(never exited)",
		Program: "/Applications/Smarter Compact.app/Contents/MacOS/smarter-compact",
		Path:    "/Users/u/Library/LaunchAgents/smarter-compact.plist",
	}
	if job != want {
		t.Errorf("running: %+v\nwant %+v", job, want)
	}
	if s := job.String(); s != "running (pid 812)" {
		t.Errorf("String() = %q", s)
	}

	job, err = parseLaunchctlPrint(launchdSample(t, "print_exited.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if job.State != "not running" || job.PID != 0 || job.LastExit != "1" {
		t.Errorf("exited: %+v", job)
	}
	if s := job.String(); s != "not running (last exit code 1)" {
		t.Errorf("String() = %q", s)
	}

	if _, err := parseLaunchctlPrint(launchdSample(t, "print_not_loaded.txt")); !errors.Is(err, errLaunchdNoJob) {
		t.Errorf("not loaded: err = %v, want errLaunchdNoJob", err)
	}
	for _, bad := range []string{"", "Usage: launchctl print <service-target>\n", "gui/501/x = {\n\tpid = 3\n}\n"} {
		if _, err := parseLaunchctlPrint(bad); err == nil || errors.Is(err, errLaunchdNoJob) {
			t.Errorf("parseLaunchctlPrint(%q): err = %v, want an unexpected-output error", bad, err)
		}
	}
	// A nested block's "state" (an endpoint's) is not the job's.
	nested := "gui/501/x = {\n\tendpoints = {\n\t\tstate = active\n\t}\n\tstate = waiting\n}\n"
	if job, err := parseLaunchctlPrint(nested); err != nil || job.State != "waiting" {
		t.Errorf("nested: %+v, %v", job, err)
	}
}

func TestParseLaunchdDisabled(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file string
		off  bool
	}{
		{"print_disabled.txt", true},
		{"print_disabled_enabled.txt", false},
		{"print_disabled_legacy.txt", true},
		{"print_disabled_absent.txt", false},
	} {
		off, err := parseLaunchdDisabled(launchdSample(t, c.file), "smarter-compact")
		if err != nil || off != c.off {
			t.Errorf("%s: off %v, err %v; want off %v", c.file, off, err, c.off)
		}
	}
	// Another label's override says nothing about ours; a prefix is another label.
	if off, err := parseLaunchdDisabled("disabled services = {\n\t\"smarter-compact.old\" => disabled\n}\n", "smarter-compact"); err != nil || off {
		t.Errorf("prefix label: off %v, err %v", off, err)
	}
	for _, bad := range []string{
		"",
		"disabled services = {\n\t\"smarter-compact\" => disabled\n",
		"disabled services = {\n\t\"smarter-compact\" => maybe\n}\n",
	} {
		if _, err := parseLaunchdDisabled(bad, "smarter-compact"); err == nil {
			t.Errorf("parseLaunchdDisabled(%q): no error", bad)
		}
	}
}

// TestLaunchdPlistBundle: the agent for a binary inside the bundle names that binary, is
// limited to the Aqua session and names the app; plutil-free validation with python3's
// plistlib when python3 is installed (it parses the plist as launchd's reader would).
func TestLaunchdPlistBundle(t *testing.T) {
	t.Parallel()
	exe := "/Applications/Smarter Compact.app/Contents/MacOS/smarter-compact"
	def, err := ServiceFile(testServiceConfig("darwin", "/Users/u", exe, 4100))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<key>ProgramArguments</key>\n\t<array>\n\t\t<string>" + exe + "</string>",
		"<key>LimitLoadToSessionType</key>\n\t<string>Aqua</string>",
		"<key>AssociatedBundleIdentifiers</key>\n\t<array>\n\t\t<string>" + macBundleID + "</string>",
	} {
		if !strings.Contains(def.Content, want) {
			t.Errorf("plist lacks %q:\n%s", want, def.Content)
		}
	}
	plain, err := ServiceFile(testServiceConfig("darwin", "/Users/u", "/usr/local/bin/smarter-compact", 4100))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.Content, "AssociatedBundleIdentifiers") || !strings.Contains(plain.Content, "<string>Aqua</string>") {
		t.Errorf("a binary outside a bundle: want Aqua and no AssociatedBundleIdentifiers:\n%s", plain.Content)
	}

	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the plist was not parsed with plistlib (apt-get install python3)")
	}
	cmd := exec.Command(py, "-c", `import plistlib, sys
p = plistlib.loads(sys.stdin.buffer.read())
assert p["LimitLoadToSessionType"] == "Aqua", p
assert p["ProgramArguments"][0].endswith(".app/Contents/MacOS/smarter-compact"), p
assert p["AssociatedBundleIdentifiers"] == [sys.argv[1]], p
print("plistlib: ok")`, macBundleID)
	cmd.Stdin = strings.NewReader(def.Content)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("plistlib rejected the LaunchAgent: %v\n%s\n%s", err, out, def.Content)
	}
}

// TestBundledFollowsLinkIntoApp: a link to the bundle's executable (the cask's
// /opt/homebrew/bin/smarter-compact) is replaced by the executable inside the bundle; a link
// elsewhere and the bundle's own path stay as given. Real files and links in a temp dir.
func TestBundledFollowsLinkIntoApp(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("cannot run on Windows: the test's temp files stand for macOS paths, and a Windows path is not an absolute macOS one")
	}
	dir := t.TempDir()
	inApp := filepath.Join(dir, "Applications", "Smarter Compact.app", "Contents", "MacOS", "smarter-compact")
	cellar := filepath.Join(dir, "Cellar", "smarter-compact", "1.2.3", "bin", "smarter-compact")
	for _, f := range []string{inApp, cellar} {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	toApp, toCellar := filepath.Join(bin, "smarter-compact"), filepath.Join(bin, "sc-formula")
	if err := os.Symlink(inApp, toApp); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cellar, toCellar); err != nil {
		t.Fatal(err)
	}
	render := func(exe string) (ServiceConfig, ServiceDef) {
		c, err := testServiceConfig("darwin", "/Users/u", exe, 4100).normalize()
		if err != nil {
			t.Fatal(err)
		}
		def, err := ServiceFile(c)
		if err != nil {
			t.Fatal(err)
		}
		return c, def
	}
	for _, tc := range []struct{ exe, want string }{
		{toApp, inApp},
		{inApp, inApp},
		{toCellar, toCellar},
		{filepath.Join(dir, "missing"), filepath.Join(dir, "missing")},
	} {
		c, def := bundled(render(tc.exe))
		_, wantDef := render(tc.want)
		if c.Exe != tc.want || def.Content != wantDef.Content {
			t.Errorf("bundled(%s): Exe %s, want %s; plist matches: %v", tc.exe, c.Exe, tc.want, def.Content == wantDef.Content)
		}
	}
	if _, def := bundled(render(toApp)); !strings.Contains(def.Content, "<string>"+inApp+"</string>") || !strings.Contains(def.Content, "AssociatedBundleIdentifiers") {
		t.Errorf("the plist for the link does not name the app's executable:\n%s", def.Content)
	}
}
