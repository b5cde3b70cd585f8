package store

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"

	"github.com/mattn/go-sqlite3"
)

// WriteError is a failed write to the store (rows, an event, the trim state, a blob, a
// session database that would not open), as the store reports it to its health record
// (HealthStoreWrite). Error is the cause's message unchanged; Class and Hint say what kind
// of failure it is and what to do.
type WriteError struct {
	Session string // the session id; "" for a blob
	Class   string // disk_full, read_only, corrupt, locked, queue_full, newer_schema, gone, failed
	Hint    string
	// Announce is true for the first failure of this condition (Health.Report): the caller
	// logs Hint at warning level then, and at debug level otherwise.
	Announce bool
	Err      error
}

func (e *WriteError) Error() string { return e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

// AsWriteError returns the *WriteError in err's chain, or nil.
func AsWriteError(err error) *WriteError {
	var we *WriteError
	if errors.As(err, &we) {
		return we
	}
	return nil
}

// writeClass classifies a write error by SQLite result code, errno and, last, SQLite's
// message (a driver error wrapped as text).
func writeClass(err error) string {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrFull:
			return "disk_full"
		case sqlite3.ErrReadonly, sqlite3.ErrPerm, sqlite3.ErrAuth:
			return "read_only"
		case sqlite3.ErrCorrupt, sqlite3.ErrNotADB:
			return "corrupt"
		case sqlite3.ErrBusy, sqlite3.ErrLocked:
			return "locked"
		}
		if se.SystemErrno == syscall.ENOSPC {
			return "disk_full"
		}
	}
	switch {
	case errors.Is(err, ErrQueueFull):
		return "queue_full"
	case errors.Is(err, ErrUnsupportedSchema):
		return "newer_schema"
	case errors.Is(err, errClosed):
		return "gone"
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "disk_full"
	case errors.Is(err, syscall.EROFS), errors.Is(err, fs.ErrPermission):
		return "read_only"
	}
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "disk is full"), strings.Contains(msg, "no space left"):
		return "disk_full"
	case strings.Contains(msg, "readonly"), strings.Contains(msg, "read-only"), strings.Contains(msg, "permission denied"),
		strings.Contains(msg, "operation not permitted"), strings.Contains(msg, "unable to open database file"):
		return "read_only"
	case strings.Contains(msg, "malformed"), strings.Contains(msg, "not a database"):
		return "corrupt"
	case strings.Contains(msg, "locked"), strings.Contains(msg, "busy"):
		return "locked"
	}
	return "failed"
}

// writeHint says what to do about a write failure of class at path (a session database, a
// blob or trim state file).
func writeHint(class, root, path string) string {
	const lost = " Requests still reach the API; their messages are not stored until then."
	switch class {
	case "disk_full":
		return "The disk holding " + root + " is full: free space there (or move the store with SMARTER_COMPACT_STATE_DIR and restart the service)." + lost
	case "read_only":
		return path + " cannot be written: a read-only file system, an immutable file (lsattr; chattr -i) or its permissions. Make it writable by this user." + lost
	case "corrupt":
		return path + " is damaged or not a SQLite database: move it aside (keep it) and the session's next request starts a fresh database." + lost
	case "locked":
		return "Another process holds a lock on " + path + " longer than the busy timeout: stop whatever else writes it (a second serve, a sqlite3 shell)."
	case "queue_full":
		return "The store writes slower than the requests arrive (a slow or stalled disk): the session's next request stores the dropped rows again."
	case "newer_schema":
		return path + " was written by a newer smarter-compact: upgrade this one (it leaves the file alone meanwhile)."
	case "gone":
		return path + " was deleted or replaced while open: the session's next request opens the file now there and stores its rows again."
	}
	return "Writing " + path + " failed: see the service log for the cause."
}

// noteWrite reports err, a failed write of session sid at path, to the root's health record
// and returns it as a *WriteError (nil stays nil; ErrTextGone is no failure of the store and
// is returned unchanged). A success (err nil) resolves the session's source.
func (r *Root) noteWrite(sid, path string, err error) error {
	key := sid
	if key == "" {
		key = "blobs"
	}
	if err == nil {
		r.health.Resolve(HealthStoreWrite, key)
		return nil
	}
	if errors.Is(err, ErrTextGone) || AsWriteError(err) != nil {
		return err
	}
	class := writeClass(err)
	we := &WriteError{Session: sid, Class: class, Hint: writeHint(class, r.dir, path), Err: err}
	text := err.Error()
	if sid != "" {
		text = "session " + sid + ": " + text
	}
	we.Announce = r.health.Report(Problem{Kind: HealthStoreWrite, Key: key, Session: sid, Class: class,
		Text: text, Hint: we.Hint, Wide: class == "disk_full" || class == "queue_full"})
	return we
}

// noted is d.note(err): err reported to the Root's health record, or err unchanged for a DB
// without a Root.
func (d *DB) noted(err error) error {
	if d.note == nil {
		return err
	}
	return d.note(err)
}
