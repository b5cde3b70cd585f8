package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A session's files are sessions/<stem><suffix>, where the stem is the session id itself
// except in two cases the contract's rule lets through but a file system does not take well
// (issue 16: ids "." and ".." were stored but unreachable, dot ids hidden from listings, a
// 300-character id hit ENAMETOOLONG and nothing was stored):
//
//   - an id that starts with "." has that dot written as "%2E" ("." → "%2E", ".." → "%2E.",
//     ".x" → "%2Ex"), so no session file is a dot file;
//   - an id longer than maxStemID bytes becomes its first stemPrefix bytes (the dot escaped),
//     "%", and the first 32 hex of the SHA-256 of the whole id; the whole id is kept in
//     <stem>.sid, so that listings give back the id the agent was told.
//
// "%" never occurs in a sanitized id, so a stem names one id and no ordinary id collides with
// an escaped one. The pointer, the MCP tools and the dashboard keep using the sanitized id.
// Databases written before this rule under a dot name (sessions/.x.db) are still found:
// sessionStem uses the old name while it exists and the new one does not.
const (
	maxStemID  = 160 // bytes; NAME_MAX is 255, and the longest suffix is ".db.corrupt-<time>"
	stemPrefix = 80
	sidSuffix  = ".sid"
)

// fileStem is the stem of sid's files by the rule above, without the legacy lookup.
func fileStem(sid string) string {
	if len(sid) > maxStemID {
		sum := sha256.Sum256([]byte(sid))
		return escapeDot(sid[:stemPrefix]) + "%" + hex.EncodeToString(sum[:16])
	}
	return escapeDot(sid)
}

func escapeDot(s string) string {
	if strings.HasPrefix(s, ".") {
		return "%2E" + s[1:]
	}
	return s
}

// hashedStem reports a stem of a long id, whose id is in <stem>.sid.
func hashedStem(stem string) bool {
	i := strings.LastIndexByte(stem, '%')
	return i > 0 && len(stem)-i-1 == 32
}

// sessionStem is fileStem, or for a dot id the name it had before the rule (sessions/<sid>.db)
// while that database exists and the escaped one does not.
func (r *Root) sessionStem(sid string) string {
	stem := fileStem(sid)
	if stem == sid || !strings.HasPrefix(sid, ".") || len(sid) > maxStemID {
		return stem
	}
	dir := filepath.Join(r.dir, "sessions")
	if _, err := os.Stat(filepath.Join(dir, stem+".db")); err == nil {
		return stem
	}
	if _, err := os.Stat(filepath.Join(dir, sid+".db")); err == nil {
		return sid // legacy name
	}
	return stem
}

// SessionOfFile returns the session id whose files have the name stem (a sessions/ file name
// without its suffix), by the rule above: a dot escape is undone, a hashed stem is read from
// <stem>.sid, a legacy dot name is its own id. ok is false when stem is no session's.
func (r *Root) SessionOfFile(stem string) (sid string, ok bool) {
	switch {
	case !strings.Contains(stem, "%"):
		sid = stem
	case hashedStem(stem):
		b, err := os.ReadFile(filepath.Join(r.dir, "sessions", stem+sidSuffix))
		if err != nil {
			return "", false
		}
		sid = string(b)
		if fileStem(sid) != stem {
			return "", false
		}
	case strings.HasPrefix(stem, "%2E") && !strings.Contains(stem[3:], "%"):
		sid = "." + stem[3:]
	default:
		return "", false
	}
	if checkSID(sid) != nil {
		return "", false
	}
	return sid, true
}

// SessionDBPath is the path of sid's database (sessions/<stem>.db); "" for an id that
// SanitizeSID would change.
func (r *Root) SessionDBPath(sid string) string {
	if checkSID(sid) != nil {
		return ""
	}
	return r.sessionFile(sid, ".db")
}

// keepLongID writes <stem>.sid for a hashed stem, once: the id listings give back.
func (r *Root) keepLongID(sid string) error {
	stem := fileStem(sid)
	if !hashedStem(stem) {
		return nil
	}
	path := filepath.Join(r.dir, "sessions", stem+sidSuffix)
	if _, err := os.Stat(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return writeFileAtomic(path, []byte(sid))
}
