package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-sqlite3"
)

// ErrNoSchema: the session database exists but its writer has not committed a schema yet
// (user_version 0). It holds nothing to read.
var ErrNoSchema = errors.New("session database has no schema yet")

// roDriverName is the driver of every Reader connection: SQLite opened read-only with an
// authorizer that admits reads only (contract: SQL step 2).
const roDriverName = "sqlite3_smarter_compact_ro"

// maxValueLength caps a string or blob SQLite builds on a Reader connection (SQLITE_LIMIT_LENGTH,
// default 1e9), so group_concat or zeroblob cannot allocate gigabytes before the timeout. A row
// is a block of one model request, which the APIs cap far below this.
const maxValueLength = 64 << 20

var registerRO sync.Once

func roDriver() string {
	registerRO.Do(func() {
		sql.Register(roDriverName, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
			// Full scans (pattern search) read the file through mmap rather than one pread per
			// page; set before the authorizer, which refuses pragmas.
			if _, err := c.Exec("PRAGMA mmap_size = 1073741824", nil); err != nil {
				return err
			}
			c.SetLimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
			c.SetLimit(sqlite3.SQLITE_LIMIT_LENGTH, maxValueLength)
			c.RegisterAuthorizer(authorize)
			return nil
		}})
	})
	return roDriverName
}

// sqliteRecursive is SQLITE_RECURSIVE, which the driver leaves out of its constants.
const sqliteRecursive = 33

// deniedFunctions are SQL functions a Reader connection refuses even though they only need
// SQLITE_FUNCTION: file and extension access (present in some builds), and FTS3's tokenizer
// pointer hook.
var deniedFunctions = map[string]bool{
	"load_extension": true,
	"readfile":       true,
	"writefile":      true,
	"edit":           true,
	"fts3_tokenizer": true,
}

// authorize admits SELECT, reads of tables and columns, functions outside deniedFunctions,
// recursive CTEs, and the PRAGMA data_version that FTS5 runs internally. Everything else
// (writes, DDL, ATTACH, transactions, other pragmas) fails at prepare time with "not
// authorized".
func authorize(op int, a1, a2, _ string) int {
	switch op {
	case sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqliteRecursive:
		return sqlite3.SQLITE_OK
	case sqlite3.SQLITE_FUNCTION:
		if deniedFunctions[strings.ToLower(a2)] {
			return sqlite3.SQLITE_DENY
		}
		return sqlite3.SQLITE_OK
	case sqlite3.SQLITE_PRAGMA:
		if strings.EqualFold(a1, "data_version") && a2 == "" {
			return sqlite3.SQLITE_OK
		}
	}
	return sqlite3.SQLITE_DENY
}

// Reader is one session database opened read-only for the recall tools (contract: Search,
// SQL). It accepts schema versions 1–3; a newer one is ErrUnsupportedSchema. It never
// writes, and it does not refresh the -wal/-shm mtimes the retention sweep reads. Open one per
// tool call or page and close it: the connection behind it stays in Root's pool for the next
// OpenReader of the session (readerpool.go). Its methods are safe for concurrent use.
type Reader struct {
	path    string
	version int
	db      *sql.DB
	sr      *sharedReader
	readers *readerPool

	mu     sync.Mutex
	closed bool
}

// OpenReader opens sessions/<sid>.db under the root read-only (mode=ro) on connections with
// the read-only authorizer, or takes the session's pooled connection when the file is still
// the one it read. sid must already be sanitized (SanitizeSID). A missing database is an error
// wrapping fs.ErrNotExist; one without a schema yet wraps ErrNoSchema; a newer schema wraps
// ErrUnsupportedSchema; every error but an invalid sid is a *ReadError with its kind. Nothing
// is created or written. It first waits for the session's
// queued writes (Root.Settle); the Reader then sees every commit made before each of its
// reads.
func (r *Root) OpenReader(sid string) (*Reader, error) {
	if err := checkSID(sid); err != nil {
		return nil, err
	}
	path := r.sessionFile(sid, ".db")
	rd, err := r.openReader(sid, path)
	if err != nil {
		return nil, readError(path, err)
	}
	return rd, nil
}

func (r *Root) openReader(sid, path string) (*Reader, error) {
	r.Settle(sid)
	sr, s, err := r.readers.checkout(sid, path)
	if err != nil {
		return nil, fmt.Errorf("open session %s: %w", sid, err)
	}
	if sr == nil {
		settled := s.db.ModTime().Before(time.Now().Add(-dashRacyWindow))
		if sr, err = openShared(sid, path, s); err != nil {
			return nil, err
		}
		r.readers.add(sr, s, settled)
	}
	rd := &Reader{path: path, db: sr.db, sr: sr, readers: &r.readers}
	if rd.version, err = sr.currentVersion(s); err != nil {
		r.readers.discard(sr)
		_ = rd.Close()
		return nil, fmt.Errorf("open session %s: read user_version: %w", sid, err)
	}
	switch v := rd.version; {
	case v == 0:
		r.readers.discard(sr)
		_ = rd.Close()
		return nil, fmt.Errorf("open session %s: %w", sid, ErrNoSchema)
	case v < 0 || v > SchemaVersion:
		r.readers.discard(sr)
		_ = rd.Close()
		return nil, fmt.Errorf("open session %s: %w", sid, unsupported(v))
	}
	return rd, nil
}

// Close ends this use of the reader: its connection goes back to the pool (or closes when
// the pool does not keep it), and the -shm mtime the read changed is put back.
func (rd *Reader) Close() error {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.closed {
		return nil
	}
	rd.closed = true
	return rd.readers.release(rd.sr)
}

// SchemaVersion is the database's user_version: 1, 2 or 3 (1 has no events table, 2 no usage
// columns in it).
func (rd *Reader) SchemaVersion() int { return rd.version }

// Path is the database file (sessions/<sid>.db).
func (rd *Reader) Path() string { return rd.path }

// openSnapshot opens path read-only with driver and returns a restore func to call after the
// pool is closed.
//
// The read must not make the session look used: a read-only connection to a WAL database
// creates -wal and -shm when they are missing and writes to -shm, and those mtimes count for
// retention. Without a -wal (the last writer closed cleanly and SQLite checkpointed) the file
// is read with immutable=1, which creates nothing; with one, restore gives -shm its mtime back
// when the -wal shows no writer activity during the read (a -shm the read created gets the
// newest mtime the session's database files had).
func openSnapshot(path, driver string) (*sql.DB, func(), error) {
	params := "mode=ro&_busy_timeout=1000"
	s, _ := snapshotFiles(path)
	if s.wal == nil {
		params = "mode=ro&immutable=1"
	}
	db, err := sql.Open(driver, sqliteURI(path, params))
	if err != nil {
		return nil, nil, err
	}
	return db, func() { s.restore(path) }, nil
}

// readUserVersion reads PRAGMA user_version, which the authorizer refuses (pragma_user_version
// too), on a connection whose authorizer is lifted for that one read and put back after it
// (setting an authorizer expires the connection's prepared statements, so each is prepared
// again under it). The connection stays in the pool, warm.
func readUserVersion(ctx context.Context, db *sql.DB) (int, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	v, read := 0, false
	var qerr error
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*sqlite3.SQLiteConn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		c.RegisterAuthorizer(nil)
		defer c.RegisterAuthorizer(authorize)
		v, read, qerr = queryUserVersion(ctx, c)
		return nil
	})
	switch {
	case read:
		return v, nil
	case qerr != nil:
		return 0, qerr
	}
	return 0, err
}

func queryUserVersion(ctx context.Context, c *sqlite3.SQLiteConn) (int, bool, error) {
	rows, err := c.QueryContext(ctx, "PRAGMA user_version", nil)
	if err != nil {
		return 0, false, err
	}
	dest := make([]driver.Value, 1)
	err = rows.Next(dest)
	_ = rows.Close()
	if err != nil {
		return 0, false, err
	}
	n, ok := dest[0].(int64)
	if !ok {
		return 0, false, fmt.Errorf("user_version is %T", dest[0])
	}
	return int(n), true, nil
}

// pool returns the pool, or an error after Close.
func (rd *Reader) pool() (*sql.DB, error) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.closed {
		return nil, errors.New("session reader is closed")
	}
	return rd.db, nil
}
