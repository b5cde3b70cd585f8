package installer

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestStableExe: a package's path (and the per-user path itself) stays; anything else goes
// to the per-user path, per OS.
func TestStableExe(t *testing.T) {
	t.Parallel()
	const home, lad = "/home/u", `C:\Users\u\AppData\Local`
	for _, c := range []struct {
		goos, exe, want string
		inPlace         bool
	}{
		{"linux", "/usr/bin/smarter-compact", "/usr/bin/smarter-compact", true},
		{"linux", "/usr/local/bin/smarter-compact", "/usr/local/bin/smarter-compact", true},
		{"darwin", "/opt/homebrew/bin/smarter-compact", "/opt/homebrew/bin/smarter-compact", true},
		{"darwin", "/Applications/Smarter Compact.app/Contents/MacOS/smarter-compact", "/Applications/Smarter Compact.app/Contents/MacOS/smarter-compact", true},
		{"linux", "/home/u/.local/bin/smarter-compact", "/home/u/.local/bin/smarter-compact", true},
		{"linux", "/home/u/src/smarter-compact/smarter-compact", "/home/u/.local/bin/smarter-compact", false},
		{"darwin", "/Users/u/Downloads/smarter-compact", "/home/u/.local/bin/smarter-compact", false},
		{"linux", "/usr/bin/sub/smarter-compact", "/home/u/.local/bin/smarter-compact", false},
		{"windows", lad + `\Programs\Smarter Compact\smarter-compact.exe`, lad + `\Programs\Smarter Compact\smarter-compact.exe`, true},
		{"windows", `C:\Users\u\Downloads\smarter-compact.exe`, lad + `\Programs\Smarter Compact\smarter-compact.exe`, false},
	} {
		if runtime.GOOS == "windows" && c.goos != "windows" {
			continue // the Unix paths are not paths on a Windows host
		}
		got, inPlace, err := StableExe(c.exe, home, c.goos, lad)
		if c.goos != "windows" {
			got = filepath.ToSlash(got)
		}
		if err != nil || got != c.want || inPlace != c.inPlace {
			t.Errorf("StableExe(%s, %s) = %s, %v, %v; want %s, %v", c.goos, c.exe, got, inPlace, err, c.want, c.inPlace)
		}
	}
	if _, _, err := StableExe(`C:\x\smarter-compact.exe`, home, "windows", ""); err == nil || !strings.Contains(err.Error(), "LOCALAPPDATA") {
		t.Errorf("Windows without LOCALAPPDATA: %v", err)
	}
	if _, _, err := StableExe("/tmp/smarter-compact", "", "linux", ""); err == nil || !strings.Contains(err.Error(), "HOME") {
		t.Errorf("no home: %v", err)
	}
}

// TestPlaceBinary: the copy has the source's bytes and mode 0755 in a folder made 0700;
// a second run changes nothing and says so; a dry run writes nothing; a link stays.
func TestPlaceBinary(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "smarter-compact")
	if err := os.WriteFile(src, []byte("build 1"), 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), ".local", "bin", "smarter-compact")
	line, err := PlaceBinary(src, target, runtime.GOOS, true)
	if err != nil || !strings.Contains(line, "would copy") || exists(target) {
		t.Fatalf("dry run: %q, %v; target exists %v", line, err, exists(target))
	}
	line, err = PlaceBinary(src, target, runtime.GOOS, false)
	if err != nil || !strings.Contains(line, "binary: copied "+src+" to "+target) {
		t.Fatalf("copy: %q, %v", line, err)
	}
	if b, _ := os.ReadFile(target); string(b) != "build 1" {
		t.Errorf("target holds %q", b)
	}
	if runtime.GOOS != "windows" {
		if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o755 {
			t.Errorf("target mode %v, want 0755", fi.Mode().Perm())
		}
		if fi, _ := os.Stat(filepath.Dir(target)); fi.Mode().Perm() != 0o700 {
			t.Errorf("made folder mode %v, want 0700", fi.Mode().Perm())
		}
	}
	if line, err := PlaceBinary(src, target, runtime.GOOS, false); err != nil || !strings.Contains(line, "is this build already") {
		t.Errorf("second run: %q, %v", line, err)
	}
	if err := os.WriteFile(src, []byte("build 2"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := PlaceBinary(src, target, runtime.GOOS, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "build 2" {
		t.Errorf("after a rebuild the target holds %q", b)
	}
	if runtime.GOOS == "windows" {
		return
	}
	link := filepath.Join(t.TempDir(), "smarter-compact")
	if err := os.Symlink(src, link); err != nil {
		t.Fatal(err)
	}
	if line, err := PlaceBinary(filepath.Join(t.TempDir(), "absent"), link, runtime.GOOS, false); err != nil || !strings.Contains(line, "symbolic link") {
		t.Errorf("a link at the target: %q, %v", line, err)
	}
}

// TestServiceExe: on Windows the login service runs smarter-compact-gui.exe when it sits
// beside the console exe, and says so when it does not; elsewhere the running executable.
func TestServiceExe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	console := filepath.Join(dir, "smarter-compact.exe")
	gui := filepath.Join(dir, "smarter-compact-gui.exe")
	lone := filepath.Join(t.TempDir(), "smarter-compact.exe")
	for _, p := range []string{console, gui, lone} {
		if err := os.WriteFile(p, []byte("MZ"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		goos, exe, want string
		note            bool
	}{
		{"windows", console, gui, false},
		{"windows", gui, gui, false},
		{"windows", lone, lone, true},
		{"linux", console, console, false},
	} {
		got, note := ServiceExe(c.goos, c.exe)
		if got != c.want || (note != "") != c.note {
			t.Errorf("serviceExe(%s, %s) = %s, note %q; want %s, a note %v", c.goos, c.exe, got, note, c.want, c.note)
		}
		if c.note && !strings.Contains(note, "console window") {
			t.Errorf("the note does not say what happens: %q", note)
		}
	}
}
