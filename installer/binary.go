package installer

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The stable binary (issue 15, Deliver 3; docs/wiring.md): the agents' hooks, MCP entries,
// the OpenCode plugin and the login service name one executable, which must outlive the
// build directory or download folder install ran from.

// guiExe is the windowless twin of smarter-compact.exe that the Windows packages ship beside
// it (the login service runs it).
const guiExe = "smarter-compact-gui.exe"

// packageDirs are the folders a package puts smarter-compact in (deb and rpm: /usr/bin;
// Homebrew and a manual `make install`: /usr/local/bin, /opt/homebrew/bin, Linuxbrew's
// bin). An upgrade replaces the file in place, so its path stays valid.
var packageDirs = []string{"/usr/bin", "/usr/local/bin", "/opt/homebrew/bin", "/home/linuxbrew/.linuxbrew/bin"}

// StableExe is the executable install writes into the agents' configs and the login
// service, for the running executable exe (absolute; symlinks kept, as a package manager's
// link survives an upgrade). It is exe itself, inPlace, when exe is where it will stay: in
// one of packageDirs, inside a macOS .app bundle (…/X.app/Contents/MacOS/), in the MSI's
// folder %LOCALAPPDATA%\Programs\Smarter Compact, or already the per-user path. Otherwise
// it is the per-user path install copies exe to (PlaceBinary):
//
//   - Linux, macOS and other Unix: ~/.local/bin/smarter-compact
//   - Windows: %LOCALAPPDATA%\Programs\Smarter Compact\smarter-compact.exe (the MSI's
//     folder, so a later MSI install replaces the same file)
//
// home is the user's home directory, localAppData %LOCALAPPDATA% (Windows; "" elsewhere).
// goos is runtime.GOOS, a parameter so tests cover every OS. An error means the per-user
// path cannot be named (no home, or no %LOCALAPPDATA% on Windows).
func StableExe(exe, home, goos, localAppData string) (target string, inPlace bool, err error) {
	perUser, err := PerUserExe(home, goos, localAppData)
	if err != nil {
		return "", false, err
	}
	if goos == "windows" {
		if strings.EqualFold(winDir(exe), winDir(perUser)) {
			return exe, true, nil
		}
		return perUser, false, nil
	}
	dir := filepath.Dir(exe)
	for _, p := range packageDirs {
		if dir == p {
			return exe, true, nil
		}
	}
	if strings.Contains(exe, ".app/Contents/MacOS/") {
		return exe, true, nil
	}
	return perUser, exe == perUser, nil
}

// PerUserExe is the per-user path StableExe copies to: ~/.local/bin/smarter-compact, on
// Windows %LOCALAPPDATA%\Programs\Smarter Compact\smarter-compact.exe. An error says which
// variable is missing.
func PerUserExe(home, goos, localAppData string) (string, error) {
	if goos == "windows" {
		if localAppData == "" {
			return "", errors.New("cannot name the per-user folder for the binary: LOCALAPPDATA is not set")
		}
		return localAppData + `\Programs\Smarter Compact\smarter-compact.exe`, nil
	}
	if home == "" {
		return "", errors.New("cannot name the per-user folder for the binary: HOME is not set")
	}
	return filepath.Join(home, ".local", "bin", "smarter-compact"), nil
}

// winDir is the folder of a Windows path, on any OS.
func winDir(p string) string {
	p = strings.ReplaceAll(p, "/", `\`)
	if i := strings.LastIndexByte(p, '\\'); i >= 0 {
		return p[:i]
	}
	return ""
}

// PlaceBinary copies the executable src to target (StableExe), atomically (a temporary file
// in target's folder, renamed over it: a running copy keeps running), mode 0755, the folder
// made 0700 when absent; on Windows smarter-compact-gui.exe beside src goes beside target
// too. A target with src's bytes already is left alone; a symbolic link at target is the
// user's and is left alone too. It returns one line for the user saying what it did (or,
// with dryRun, would do). An error names the file and what to do.
func PlaceBinary(src, target, goos string, dryRun bool) (string, error) {
	if fi, err := os.Lstat(target); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Sprintf("binary: %s is a symbolic link (yours): kept; the agents run it", target), nil
	}
	pairs := [][2]string{{src, target}}
	if goos == "windows" {
		if gui := filepath.Join(filepath.Dir(src), guiExe); isFile(gui) {
			pairs = append(pairs, [2]string{gui, filepath.Join(filepath.Dir(target), guiExe)})
		}
	}
	copied := false
	for _, p := range pairs {
		b, err := os.ReadFile(p[0])
		if err != nil {
			return "", fmt.Errorf("binary: read %s to copy it to %s: %w", p[0], p[1], err)
		}
		if old, err := os.ReadFile(p[1]); err == nil && bytes.Equal(old, b) {
			continue
		}
		copied = true
		if dryRun {
			continue
		}
		if err := WriteFileAtomic(p[1], b, 0o755); err != nil {
			hint := "check that you can write there"
			if goos == "windows" {
				hint = "a running smarter-compact may hold it: stop it ('smarter-compact service stop', or quit it from the tray), then install again"
			}
			return "", fmt.Errorf("binary: copy %s to %s: %w\n%s; nothing was wired", p[0], p[1], err, hint)
		}
	}
	switch {
	case !copied:
		return fmt.Sprintf("binary: %s is this build already; the agents and the login service run it", target), nil
	case dryRun:
		return fmt.Sprintf("binary: would copy %s to %s, which the agents and the login service would run", src, target), nil
	}
	return fmt.Sprintf("binary: copied %s to %s; the agents and the login service run that copy, so %s may move or go", src, target, src), nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// ServiceExe is the executable the login service runs, given the one running now (exe, an
// absolute path for goos). On Windows it is smarter-compact-gui.exe in exe's folder when that
// file exists (no console window at every logon), else exe itself, with a note that says so.
// Elsewhere it is exe. A registration naming the GUI exe is then what install would write,
// so status reads it as current.
func ServiceExe(goos, exe string) (string, string) {
	if goos != "windows" {
		return exe, ""
	}
	i := strings.LastIndexAny(exe, `\/`)
	dir, base := exe[:i+1], exe[i+1:]
	if strings.EqualFold(base, guiExe) {
		return exe, ""
	}
	gui := dir + guiExe
	if fi, err := os.Stat(gui); err == nil && fi.Mode().IsRegular() {
		return gui, ""
	}
	return exe, fmt.Sprintf("no %s beside %s: the logon start runs this console executable, which opens a console window at every logon (install the release zip or MSI, which ship both)", guiExe, exe)
}
