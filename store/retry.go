package store

// Removing and renaming under Windows file semantics. On Windows a file another handle holds
// open without FILE_SHARE_DELETE (SQLite's own handles, a reader in `smarter-compact mcp`,
// an antivirus scan, an editor) cannot be deleted or renamed over: the call fails with a
// sharing violation or access denied until that handle closes. Every remove and rename in
// the store goes through here: it retries a held file briefly, and a removal that is still
// refused is left to the next retention pass (Sweep reports it as deferred and makes the
// next pass due at once), never a failed sweep. Elsewhere no error counts as held, so these
// are os.Remove and os.Rename.

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// heldOps are the file operations and the clock of the retry; tests replace them (never in
// parallel tests) to simulate a held file on any system.
type heldOps struct {
	remove func(string) error
	rename func(string, string) error
	held   func(error) bool // the error means another handle holds the file
	sleep  func(time.Duration)
}

var fsOps = heldOps{remove: os.Remove, rename: os.Rename, held: heldError, sleep: time.Sleep}

// heldBackoff is the wait before each retry of a held file: 630 ms in all, enough for a
// reader's query or a scan to let go, short enough for the request path (a rename of the
// trim state).
var heldBackoff = []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond,
	80 * time.Millisecond, 160 * time.Millisecond, 320 * time.Millisecond}

// retryHeld runs op, and again after each heldBackoff wait while its error means the file is
// held. It returns op's last error and whether that error still means held.
func retryHeld(op func() error) (held bool, err error) {
	err = op()
	for _, d := range heldBackoff {
		if err == nil || !fsOps.held(err) {
			return false, err
		}
		fsOps.sleep(d)
		err = op()
	}
	return err != nil && fsOps.held(err), err
}

// removeHeld removes path, retrying while another handle holds it. A missing file is not an
// error. held is true when the file is still held after the retries; err is then the last
// error (wrapping the system's, e.g. "The process cannot access the file because it is being
// used by another process").
func removeHeld(path string) (held bool, err error) {
	held, err = retryHeld(func() error { return fsOps.remove(path) })
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return held, err
}

// removeFile is removeHeld for callers with nothing to defer: an error when the file could
// not be removed, held or not.
func removeFile(path string) error {
	_, err := removeHeld(path)
	return err
}

// renameFile is os.Rename, retrying while another handle holds the target (a reader of the
// old trim state) or the source.
func renameFile(from, to string) error {
	_, err := retryHeld(func() error { return fsOps.rename(from, to) })
	return err
}
