package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/mattn/go-sqlite3"
)

// Recovery of a session database SQLite calls corrupt or not a database (issue 16, item 2):
// the file is moved aside, kept, and a fresh one takes its place, so the session's next
// request stores its whole history again instead of failing every later write.

// corruptSuffix starts the name a broken database is moved to: sessions/<sid>.db.corrupt-<time>,
// its -wal and -shm beside it under the same name. No retention suffix matches these names, so
// the sweep leaves them alone (contract: Retention, other names are left alone).
const corruptSuffix = ".corrupt-"

// corruptTimeLayout is the <time> of a moved database: UTC, no colons, so the name is valid on
// every file system.
const corruptTimeLayout = "20060102T150405Z"

// Recovery describes one broken session database moved aside (Root.SetOnRecovery).
type Recovery struct {
	SID     string
	At      time.Time
	Path    string // sessions/<sid>.db, the fresh database now
	MovedTo string // sessions/<sid>.db.corrupt-<time>, the broken file, kept
	Cause   error  // SQLite's error: corrupt (SQLITE_CORRUPT) or not a database (SQLITE_NOTADB)
}

// SetOnRecovery sets fn to be called (on the writing goroutine, after the fresh database is
// open) each time a broken session database is moved aside; nil turns it off. The store also
// writes a fail_open event into the fresh database and one line to stderr. For the store-wide
// health record: fn must not block.
func (r *Root) SetOnRecovery(fn func(Recovery)) {
	r.mu.Lock()
	r.onRecovery = fn
	r.mu.Unlock()
}

// isBroken reports whether err is SQLite saying the file is corrupt or not a database: the
// errors a fresh database fixes. Locked, full, read-only and permission errors are not.
func isBroken(err error) bool {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return false
	}
	return se.Code == sqlite3.ErrCorrupt || se.Code == sqlite3.ErrNotADB
}

// brokenKind is the fail_open event's error type of a recovery.
func brokenKind(err error) string {
	var se sqlite3.Error
	if errors.As(err, &se) && se.Code == sqlite3.ErrNotADB {
		return "store_not_a_database"
	}
	return "store_corrupt"
}

// sqliteHeader is the first 16 bytes of every SQLite database file (file format, 1.3.1).
const sqliteHeader = "SQLite format 3\x00"

// checkHeader returns SQLite's not-a-database error when d's file no longer starts with the
// SQLite header. A connected writer does not see its file overwritten: in WAL mode its pages
// come from its cache and the WAL, so the writes "succeed" into a file that is garbage and
// would be lost at the next checkpoint (issue 16: a session corrupted under a running serve
// stored nothing and said nothing). One open, a 16-byte read and a close per SyncRows call or
// batch of the write queue, on the writing goroutine: about 3 µs of CPU (BenchmarkCheckHeader),
// under 1% of a warm write. No handle stays open, so the file can be deleted and renamed
// (retention, recovery) on every OS. A file that is missing or shorter than the header is left to the other checks
// (a deleted database closes the writer in use; a new one may not have its first page yet).
func (d *DB) checkHeader() error {
	f, err := os.Open(d.path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var b [len(sqliteHeader)]byte
	if n, _ := io.ReadFull(f, b[:]); n < len(b) || string(b[:]) == sqliteHeader {
		return nil
	}
	return sqlite3.Error{Code: sqlite3.ErrNotADB}
}

// noteBroken marks d for recovery when err says its file is broken; Root.Session then moves
// it aside. It returns err.
func (d *DB) noteBroken(err error) error {
	if err != nil && isBroken(err) {
		d.brokenErr.Store(&err) // first: a reader that sees broken finds the error
		d.broken.Store(true)
	}
	return err
}

// noteReadOnly parks d when err is SQLite's SQLITE_READONLY (d.mu not held). SQLite opens a
// file it cannot open for writing (an immutable file, chattr +i; a read-only mount or mode)
// read-only instead, and such a connection fails every later write even once the file is
// writable again; parked, the next call connects again and, the fault gone, writes (issue 16:
// the rows come back after chattr -i). It returns err.
func (d *DB) noteReadOnly(err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) && se.Code == sqlite3.ErrReadonly {
		d.park()
	}
	return err
}

// moveAside renames path and its -wal and -shm to path.corrupt-<at> (and its -wal, -shm), so
// SQLite can still open the moved copy with its WAL. It returns the new name of the database.
func moveAside(path string, at time.Time) (string, error) {
	to := path + corruptSuffix + at.UTC().Format(corruptTimeLayout)
	for i := 2; ; i++ { // two recoveries within a second keep both files
		if _, err := os.Lstat(to); errors.Is(err, fs.ErrNotExist) {
			break
		}
		to = fmt.Sprintf("%s%s%s-%d", path, corruptSuffix, at.UTC().Format(corruptTimeLayout), i)
	}
	if err := renameFile(path, to); err != nil {
		return "", fmt.Errorf("move broken session db aside: %w", err)
	}
	for _, s := range []string{"-wal", "-shm"} {
		if err := renameFile(path+s, to+s); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return to, fmt.Errorf("move broken session db aside: %w", err)
		}
	}
	return to, nil
}

// recover moves the broken database of sid aside and opens a fresh one in its place, then
// reports it: a fail_open event in the fresh database, one stderr line, and the
// SetOnRecovery hook (e.mu held).
func (r *Root) recover(sid, path string, cause error) (*DB, error) {
	at := time.Now()
	moved, err := moveAside(path, at)
	if err != nil {
		return nil, fmt.Errorf("%w (after: %w)", err, cause)
	}
	db, err := openDB(path, &r.writers)
	if err != nil {
		return nil, err
	}
	rel := func(p string) string { return filepath.ToSlash(filepath.Join("sessions", filepath.Base(p))) }
	fmt.Fprintf(os.Stderr, "smarter-compact: fail-open %s at store/db_recover.go: session database %s was unreadable (%v); moved aside to %s (kept) and a fresh one started, which the session's next request fills from its history\n",
		brokenKind(cause), rel(path), cause, rel(moved))
	_ = db.AddEvent(Event{At: at, Kind: "fail_open", Version: "store", Location: "store/db_recover.go", Error: brokenKind(cause)})
	// The store-wide record (health.go) shows the move on the dashboard, in status and the
	// tray, outside the database that failed.
	r.health.Report(Problem{Kind: HealthStoreWrite, Key: sid, Session: sid, Class: "corrupt",
		Text: fmt.Sprintf("session database %s was unreadable (%v); moved aside to %s", rel(path), cause, rel(moved)),
		Hint: "Nothing to do: the broken file is kept beside the new one for inspection, and the session's next request refills the new database from its history."})
	r.mu.Lock()
	fn := r.onRecovery
	r.mu.Unlock()
	if fn != nil {
		fn(Recovery{SID: sid, At: at, Path: path, MovedTo: moved, Cause: cause})
	}
	return db, nil
}
