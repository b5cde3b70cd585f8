package store

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Finding is one line of `smarter-compact doctor` about the store: Status is "ok", "fail"
// or "warn" (the outcomes of the installer's findings; fail makes doctor exit 1), Message
// says what was found, and Fix, for anything but ok, what to do.
type Finding struct {
	Status, Message, Fix string
}

// Outcomes of a Finding.
const (
	checkOK   = "ok"
	checkFail = "fail"
	checkWarn = "warn"
)

// CheckDir is doctor's "store" line for the context store's folder dir (Dir): it exists or
// can be made, is writable, and nothing in it is open to group or others (folders 700,
// files 600; Open tightens the folders, the session files are tightened when opened). A
// missing FTS5 is CheckFTS5's to report, not this one's.
func CheckDir(dir string) Finding {
	var c Finding
	if !filepath.IsAbs(dir) {
		c.Status, c.Message = checkFail, fmt.Sprintf("context store directory %q is not an absolute path", dir)
		c.Fix = "set " + StateDirEnv + " to an absolute path (or HOME)"
		return c
	}
	root, err := Open(dir)
	if err == nil {
		root.Close()
	} else if !strings.Contains(err.Error(), "fts5") { // the fts5 check reports that one
		c.Status, c.Message = checkFail, err.Error()
		c.Fix = fmt.Sprintf("make %s a folder you own (mkdir -p, chmod 700), or set %s to one", dir, StateDirEnv)
		return c
	}
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		c.Status, c.Message = checkFail, fmt.Sprintf("%s is not writable: %v", dir, err)
		c.Fix = fmt.Sprintf("give yourself write access (chmod u+rwx %s), or set %s to a folder you own", dir, StateDirEnv)
		return c
	}
	f.Close()
	os.Remove(f.Name())
	if runtime.GOOS == "windows" {
		c.Status, c.Message = checkOK, dir+" is writable (Windows: your profile's permissions apply, not modes)"
		return c
	}
	loose := OpenToOthers(dir)
	if len(loose) > 0 {
		shown := loose[:min(3, len(loose))]
		c.Status = checkFail
		c.Message = fmt.Sprintf("%d entries in %s are open to group or others, e.g. %s", len(loose), dir, strings.Join(shown, ", "))
		c.Fix = fmt.Sprintf("chmod -R go-rwx %s", shellQuote(dir))
		return c
	}
	c.Status, c.Message = checkOK, dir+" is writable; folders 700, files 600"
	return c
}

// shellQuote quotes p for a POSIX shell when it needs it.
func shellQuote(p string) string {
	if !strings.ContainsAny(p, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}

// CheckFTS5 is doctor's "fts5" line: it opens a throwaway store, which fails without
// SQLite's FTS5 (Open probes it), so a broken store folder cannot hide the build's problem
// or the other way round.
func CheckFTS5() Finding {
	var c Finding
	tmp, err := os.MkdirTemp("", "smarter-compact-doctor-")
	if err != nil {
		c.Status, c.Message = checkWarn, "cannot tell: "+err.Error()
		return c
	}
	defer os.RemoveAll(tmp)
	root, err := Open(filepath.Join(tmp, "context"))
	if err != nil {
		c.Status, c.Message = checkFail, err.Error()
		c.Fix = "use a release build, or rebuild with cgo and the FTS5 tag: CGO_ENABLED=1 go build -tags sqlite_fts5 (make build)"
		return c
	}
	root.Close()
	c.Status, c.Message = checkOK, "SQLite has FTS5"
	return c
}
