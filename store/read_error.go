package store

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"github.com/mattn/go-sqlite3"
)

// ReadFailure is why a session database could not be read, as ReadError.Kind.
type ReadFailure int

// The read failures, from fs errors, the store's own sentinels and SQLite result codes.
const (
	ReadFailed       ReadFailure = iota // anything else: the message is all there is
	ReadMissing                         // the file is gone (deleted by retention, or never there)
	ReadNoSchema                        // created, no schema committed yet (ErrNoSchema): nothing to read
	ReadNewerSchema                     // user_version newer than SchemaVersion (ErrUnsupportedSchema)
	ReadLocked                          // SQLITE_BUSY or SQLITE_LOCKED: another connection holds a lock
	ReadNotADatabase                    // SQLITE_NOTADB: the file is not an SQLite database
	ReadCorrupt                         // SQLITE_CORRUPT: an SQLite database with a damaged image
	ReadPermission                      // the file or its folder may not be read (fs.ErrPermission, SQLITE_PERM, SQLITE_CANTOPEN on an unreadable file)
)

var readFailureNames = [...]string{"failed", "missing", "no schema", "newer schema", "locked", "not a database", "corrupt", "permission denied"}

func (k ReadFailure) String() string {
	if k < 0 || int(k) >= len(readFailureNames) {
		return "unknown"
	}
	return readFailureNames[k]
}

// ReadError is a session database that could not be opened or read (the Reader's open and
// reads, Sessions' summaries, Status, Rows and Events). Error is the message of Err
// unchanged; Kind is what callers branch on (never the message text) and Hint what a user
// can do about it, "" when there is nothing to do.
type ReadError struct {
	Kind ReadFailure
	Path string // sessions/<sid>.db
	Err  error
	Hint string
}

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// Transient reports a failure that may clear on its own (a lock, a vanished file, anything
// unknown), as opposed to one that lasts until the file changes.
func (e *ReadError) Transient() bool {
	switch e.Kind {
	case ReadNoSchema, ReadNewerSchema, ReadNotADatabase:
		return false
	}
	return true
}

// AsReadError returns the ReadError in err's chain, nil when there is none.
func AsReadError(err error) *ReadError {
	var re *ReadError
	if errors.As(err, &re) {
		return re
	}
	return nil
}

var readHints = map[ReadFailure]string{
	ReadNewerSchema:  "update smarter-compact to read it",
	ReadLocked:       "try again in a moment",
	ReadNotADatabase: "move the file away or delete it",
	ReadCorrupt:      "move the file away or delete it",
	ReadPermission:   "give your user read access to the session files",
}

// readError wraps err, from opening or reading the database at path, in a ReadError of its
// kind. nil, a context error and an error that already is a ReadError are returned as they
// are.
func readError(path string, err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || AsReadError(err) != nil {
		return err
	}
	k := readFailure(path, err)
	return &ReadError{Kind: k, Path: path, Err: err, Hint: readHints[k]}
}

// readFailure classifies err by sentinel, fs error and SQLite result code.
func readFailure(path string, err error) ReadFailure {
	switch {
	case errors.Is(err, ErrNoSchema):
		return ReadNoSchema
	case errors.Is(err, ErrUnsupportedSchema):
		return ReadNewerSchema
	case errors.Is(err, fs.ErrNotExist):
		return ReadMissing
	case errors.Is(err, fs.ErrPermission):
		return ReadPermission
	}
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return ReadFailed
	}
	switch se.Code {
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return ReadLocked
	case sqlite3.ErrNotADB:
		return ReadNotADatabase
	case sqlite3.ErrCorrupt:
		return ReadCorrupt
	case sqlite3.ErrPerm:
		return ReadPermission
	case sqlite3.ErrCantOpen:
		// SQLite says only that it could not open the file: ask the file system why.
		f, oerr := os.Open(path)
		switch {
		case errors.Is(oerr, fs.ErrNotExist):
			return ReadMissing
		case errors.Is(oerr, fs.ErrPermission):
			return ReadPermission
		case oerr == nil:
			_ = f.Close()
		}
	}
	return ReadFailed
}
