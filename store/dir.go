package store

import (
	"os"
	"path/filepath"
	"strings"
)

// asciiSpace is the whitespace the contract trims from SMARTER_COMPACT_STATE_DIR and session ids
// (space, \t, \n, \v, \f, \r); other Unicode whitespace is kept.
const asciiSpace = " \t\n\v\f\r"

// StateDirEnv names the environment variable that overrides the state directory.
const StateDirEnv = "SMARTER_COMPACT_STATE_DIR"

// Dir resolves the context root (contract: Location; DESIGN.md §6 "Prefixes and names").
//
// When getenv(StateDirEnv), trimmed of surrounding ASCII whitespace, is non-empty the root is
// <that>/context. Otherwise it is home/.local/share/smarter-compact/context, or, when that does
// not exist and the legacy home/.local/share/openmem/context does, the legacy directory. On
// goos "windows" the default is localAppData\smarter-compact\context (home\AppData\Local when
// localAppData is empty) and there is no legacy directory. getenv is os.Getenv in production,
// home os.UserHomeDir, goos runtime.GOOS, localAppData %LOCALAPPDATA%. Dir creates nothing.
func Dir(getenv func(string) string, home, goos, localAppData string) string {
	if state := strings.Trim(getenv(StateDirEnv), asciiSpace); state != "" {
		return joinFor(goos, state, "context")
	}
	if goos == "windows" {
		base := localAppData
		if base == "" {
			base = joinFor(goos, home, "AppData", "Local")
		}
		return joinFor(goos, base, "smarter-compact", "context")
	}
	def := filepath.Join(home, ".local", "share", "smarter-compact", "context")
	legacy := filepath.Join(home, ".local", "share", "openmem", "context")
	if _, err := os.Stat(def); os.IsNotExist(err) {
		if fi, err := os.Stat(legacy); err == nil && fi.IsDir() {
			return legacy
		}
	}
	return def
}

// joinFor joins path elements with goos's separator, so the Windows rule can be tested on
// other systems; on the running OS it is filepath.Join.
func joinFor(goos string, elem ...string) string {
	if goos != "windows" || filepath.Separator == '\\' {
		return filepath.Join(elem...)
	}
	out := strings.TrimRight(elem[0], `\/`)
	for _, e := range elem[1:] {
		out += `\` + strings.Trim(e, `\/`)
	}
	return out
}
