package store

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver; build with -tags sqlite_fts5
)

const (
	dirMode  = 0o700
	fileMode = 0o600
)

// Root is an opened context root (contract: Location): dir, sessions/ and blobs/ exist, and the
// SQLite build was checked for FTS5. It caches one writer per session; all methods are safe
// for concurrent use.
type Root struct {
	dir string

	mu       sync.Mutex
	sessions map[string]*sessionEntry
	closed   bool

	health     *Health        // the store-wide health record (health.go)
	onRecovery func(Recovery) // SetOnRecovery; read under mu

	dash    dashCache    // per-session summaries of the dashboard reads (dashboard.go)
	readers readerPool   // open session readers, reused by OpenReader (readerpool.go)
	writers writerSet    // the writers holding a connection (writers.go)
	savings savingsFiles // the savings files kept open for appending (savings_files.go)
}

// sessionEntry serializes opening, reopening and deleting one session's database without
// holding Root.mu, so a slow open (busy timeout) of one session does not stall the others.
type sessionEntry struct {
	mu sync.Mutex
	db *DB
}

// Open prepares the context root dir (usually from Dir): it creates dir, dir/sessions and
// dir/blobs with mode 700 when missing and checks that SQLite has FTS5. The error names the
// missing build tag when the binary was built without -tags sqlite_fts5 or without cgo.
func Open(dir string) (*Root, error) {
	if dir == "" {
		return nil, errors.New("open context store: empty directory; set SMARTER_COMPACT_STATE_DIR or HOME")
	}
	for _, d := range []string{dir, filepath.Join(dir, "sessions"), filepath.Join(dir, "blobs")} {
		if err := mkdirPrivate(d); err != nil {
			return nil, fmt.Errorf("open context store: %w", err)
		}
	}
	if err := probeFTS5(); err != nil {
		return nil, err
	}
	r := &Root{dir: dir, sessions: make(map[string]*sessionEntry), health: NewHealth(nil)}
	r.writers.savings = &r.savings // a writer parking or closing closes its savings file
	return r, nil
}

// mkdirPrivate creates d (and missing parents) with mode 700, independent of the umask. An
// existing directory keeps its mode.
func mkdirPrivate(d string) error {
	if fi, err := os.Stat(d); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s exists and is not a directory", d)
		}
		return tighten(d, dirMode)
	}
	if err := os.MkdirAll(d, dirMode); err != nil {
		return err
	}
	return os.Chmod(d, dirMode)
}

func probeFTS5() error {
	db, err := sql.Open("sqlite3", ":memory:")
	if err != nil {
		return fmt.Errorf("open sqlite: %w", err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE VIRTUAL TABLE t USING fts5(x)"); err != nil {
		if strings.Contains(err.Error(), "no such module") {
			return fmt.Errorf("sqlite has no fts5 module: rebuild smarter-compact with -tags sqlite_fts5: %w", err)
		}
		return fmt.Errorf("sqlite fts5 check failed (smarter-compact needs cgo and -tags sqlite_fts5): %w", err)
	}
	return nil
}

// Dir returns the context root directory.
func (r *Root) Dir() string { return r.dir }

// Close closes every cached session database and pooled reader (a reader still in use closes
// with its Close). Session fails after Close; OpenReader still works, without the pool.
func (r *Root) Close() error {
	rerr := r.readers.closeAll() // first: a writer closing last checkpoints and removes its -wal
	r.mu.Lock()
	r.closed = true
	entries := make([]*sessionEntry, 0, len(r.sessions))
	for _, e := range r.sessions {
		entries = append(entries, e)
	}
	r.mu.Unlock()
	r.writers.stop()
	errs := []error{rerr}
	for _, e := range entries {
		e.mu.Lock()
		if e.db != nil {
			errs = append(errs, e.db.close())
			e.db = nil
		}
		e.mu.Unlock()
	}
	errs = append(errs, r.savings.closeAll()) // after the writers: none opens one again
	errs = append(errs, r.health.closeFile()) // last: the writers' final failures are in it
	return errors.Join(errs...)
}

func (r *Root) entry(sid string) (*sessionEntry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("context store is closed")
	}
	e := r.sessions[sid]
	if e == nil {
		e = &sessionEntry{}
		r.sessions[sid] = e
	}
	return e, nil
}

// Session returns the cached writer for sessions/<sid>.db (contract: Session database),
// opening it on first use: the file is created mode 600, switched to WAL and created or
// migrated to schema version 3. sid must already be sanitized (SanitizeSID). A file deleted
// or replaced since it was opened (a different inode) is reopened; the old *DB is closed.
// A database with a newer schema returns an error wrapping ErrUnsupportedSchema. A database
// SQLite finds corrupt or not a database, on open or in an earlier write, is moved aside to
// sessions/<sid>.db.corrupt-<time> and a fresh one returned (db_recover.go).
func (r *Root) Session(sid string) (*DB, error) {
	if err := checkSID(sid); err != nil {
		return nil, err
	}
	e, err := r.entry(sid)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	path := r.sessionFile(sid, ".db")
	var broken error
	if e.db != nil {
		same := sameFileAt(path, e.db.fi)
		if same && !e.db.broken.Load() {
			return e.db, nil
		}
		if same {
			broken = *e.db.brokenErr.Load()
			_ = e.db.close()
		} else {
			_ = e.db.closeStale() // deleted or replaced: the next open starts from the file now there
		}
		e.db = nil
	}
	if err := r.keepLongID(sid); err != nil {
		return nil, fmt.Errorf("record session id %.40s…: %w", sid, err)
	}
	var db *DB
	if broken == nil {
		db, err = openDB(path, &r.writers)
		if err != nil && isBroken(err) {
			broken = err
		}
	}
	if broken != nil {
		db, err = r.recover(sid, path, broken)
	}
	if err != nil {
		return nil, r.noteWrite(sid, path, err)
	}
	db.note = func(err error) error { return r.noteWrite(sid, path, err) }
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		_ = db.close()
		return nil, errors.New("context store is closed")
	}
	e.db = db
	return db, nil
}

// HasSession reports whether sessions/<sid>.db exists now (false for an invalid sid), without
// creating it as Session would.
func (r *Root) HasSession(sid string) bool {
	if checkSID(sid) != nil {
		return false
	}
	_, err := os.Stat(r.sessionFile(sid, ".db"))
	return err == nil
}

// sessionFile is sessions/<stem><suffix>, the stem by sessionStem (sid_file.go); sid must
// have passed checkSID.
func (r *Root) sessionFile(sid, suffix string) string {
	return filepath.Join(r.dir, "sessions", r.sessionStem(sid)+suffix)
}

// tighten removes group and other permission bits from an existing path (the store is
// private to its user: folders 700, files 600). On Windows modes carry no such bits.
func tighten(path string, mode os.FileMode) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("make %s private (mode %o): %w", path, mode, err)
	}
	return nil
}
