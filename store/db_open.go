package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// timeLayout is the contract's timestamp form: ISO 8601 UTC without fractions.
const timeLayout = "2006-01-02T15:04:05Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

var errClosed = errors.New("session database is closed; get it again with Root.Session")

// DB is one session database opened for writing (contract: Session database). It holds one
// pinned SQLite connection, so PRAGMA data_version tells it when another connection committed.
// Its methods are safe for concurrent use; they serialize on the DB.
type DB struct {
	path string
	fi   os.FileInfo // identity of the file when opened, for Root.Session's reopen check
	// Identities of the -wal and -shm files this connection uses (nil when missing), so a
	// writer whose database was deleted or replaced can remove exactly its own leftovers.
	walFi, shmFi os.FileInfo

	mu     sync.Mutex
	sqldb  *sql.DB   // nil while parked (writerSet) and after close
	conn   *sql.Conn // nil while parked and after close
	closed bool

	writers *writerSet   // the Root's connected writers; nil counts none
	queue   *writeQueue  // writes queued by SyncRowsLater and AddEventLater (queue.go)
	used    atomic.Int64 // unix nanoseconds of the last call, for parking the least recent
	commits atomic.Int64 // transactions committed by SyncRows, AddEvent, PutVectors and the queue's batches (tests)
	ckpt    checkpointer // background WAL checkpoints (db_checkpoint.go)
	// broken: a write found the file corrupt or not a database (noteBroken); Root.Session
	// moves it aside. brokenErr is that write's error.
	broken    atomic.Bool
	brokenErr atomic.Pointer[error]

	// note reports a write's outcome to the Root's health record and returns the error to
	// hand back (Root.noteWrite); nil (a DB without a Root) returns it unchanged.
	note func(error) error

	stDataVersion *sql.Stmt
	stMaxSeq      *sql.Stmt
	stTrim        *sql.Stmt
	stRestore     *sql.Stmt
	stInsertEvent *sql.Stmt
	// Multi-row INSERT statements by row count (see execBatched), prepared on first use.
	stInsertMsgs  map[int]*sql.Stmt
	stInsertLines map[int]*sql.Stmt
	// stTrimRange and stRestoreRange are stTrim and stRestore over one run of consecutive
	// seqs (updateSeqs).
	stTrimRange, stRestoreRange *sql.Stmt

	// index maps every stored fingerprint to its seq and in_context, as of dataVersion.
	index       map[string]rowState
	dataVersion int64
}

type rowState struct {
	seq       int64
	inContext bool
}

// sqliteURI builds a SQLite URI filename for path, escaping the characters a URI gives meaning
// to; params are the query (driver and SQLite parameters).
func sqliteURI(path, params string) string {
	p := filepath.ToSlash(path)
	if filepath.VolumeName(path) != "" && !strings.HasPrefix(p, "/") {
		p = "/" + p // file:/C:/... on Windows
	}
	var b strings.Builder
	b.WriteString("file:")
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '%', '?', '#':
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	if params != "" {
		b.WriteByte('?')
		b.WriteString(params)
	}
	return b.String()
}

// sameFileAt reports whether the file at path is now fi (os.SameFile: the same device and
// inode, or on Windows the same volume and file index); false when fi is nil or path cannot
// be stat'ed. The store opens its files by path, so this is how it tells that a database or
// its -wal was deleted or replaced under a connection that still has the old one open.
func sameFileAt(path string, fi os.FileInfo) bool {
	if fi == nil {
		return false
	}
	now, err := os.Stat(path)
	return err == nil && os.SameFile(now, fi)
}

// createDBFile creates path empty with mode 600 before SQLite opens it (SQLite would use
// 0644 &^ umask); an existing file readable by others is narrowed to 600.
func createDBFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
	if errors.Is(err, fs.ErrExist) {
		return tighten(path, fileMode)
	}
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(path, fileMode)
}

// openDB opens path as a session database: created mode 600 when missing, a newer schema
// refused before anything is written, WAL, busy timeout 1 s, schema migrated, index loaded.
// ws (nil in tests that need no limit) counts it among the connected writers.
func openDB(path string, ws *writerSet) (_ *DB, err error) {
	if err := createDBFile(path); err != nil {
		return nil, fmt.Errorf("create session db: %w", err)
	}
	d := &DB{path: path, writers: ws, queue: newWriteQueue()}
	if err := d.connect(); err != nil {
		return nil, err
	}
	if d.fi, err = os.Stat(path); err != nil {
		_ = d.close()
		return nil, fmt.Errorf("open session db: %w", err)
	}
	return d, nil
}

// writerCacheKiB is each writer's SQLite page cache (PRAGMA cache_size, KiB). SQLite's
// default of 2,000 KiB made every open writer cost about 2.8 MB of resident memory; a writer
// appends a request's rows and reads little back, and the OS page cache serves what it
// does read. BenchmarkWriterFootprint (400-row sessions, then warm writes): 256 KiB about
// 0.73 MB a writer, 128 KiB 0.58 MB, 64 KiB 0.52 MB; the CPU of a warm write was the same
// at 256 and 128 KiB (0.43 cpu-ms) and a fifth more at 64 KiB (pages read again).
const writerCacheKiB = 128

// connect opens the connection of d (d.mu held, or d not yet shared): WAL, the schema
// checked and migrated, statements prepared, the fingerprint index loaded.
func (d *DB) connect() (err error) {
	ctx := context.Background()
	path := d.path
	sqldb, err := sql.Open("sqlite3", sqliteURI(path, fmt.Sprintf("_busy_timeout=1000&_synchronous=NORMAL&_cache_size=-%d", writerCacheKiB)))
	if err != nil {
		return fmt.Errorf("open session db %s: %w", path, err)
	}
	sqldb.SetMaxOpenConns(1)
	d.sqldb = sqldb
	defer func() {
		if err != nil {
			_ = d.disconnect()
		}
	}()
	if d.conn, err = sqldb.Conn(ctx); err != nil {
		return fmt.Errorf("open session db %s: %w", path, err)
	}
	// Refuse a newer schema before PRAGMA journal_mode can write to the file.
	v, err := userVersion(ctx, d.conn)
	if err != nil {
		return fmt.Errorf("open session db %s: %w", path, err)
	}
	if v < 0 || v > SchemaVersion {
		return fmt.Errorf("open session db %s: %w", path, unsupported(v))
	}
	var mode string
	if err := d.conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return fmt.Errorf("open session db %s: set WAL: %w", path, err)
	}
	if mode != "wal" {
		return fmt.Errorf("open session db %s: journal mode is %q, not wal", path, mode)
	}
	// The WAL is checkpointed in the background (db_checkpoint.go); the writer's own
	// checkpoint is the safety net.
	if _, err := d.conn.ExecContext(ctx, fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", walSafetyPages)); err != nil {
		return fmt.Errorf("open session db %s: %w", path, err)
	}
	if err := migrate(ctx, d.conn); err != nil {
		return fmt.Errorf("open session db %s: %w", path, err)
	}
	if err := d.prepare(ctx); err != nil {
		return fmt.Errorf("open session db %s: %w", path, err)
	}
	if err := d.loadIndex(ctx); err != nil {
		return fmt.Errorf("open session db %s: %w", path, err)
	}
	d.walFi, _ = os.Stat(path + "-wal")
	d.shmFi, _ = os.Stat(path + "-shm")
	d.used.Store(time.Now().UnixNano())
	d.writers.connected(d)
	return nil
}

// use makes d ready for a statement (d.mu held): errClosed after close; a parked writer
// connects again, unless its file was deleted or replaced meanwhile (then it closes, and
// Root.Session opens the file now there).
func (d *DB) use() error {
	if d.closed {
		return errClosed
	}
	d.used.Store(time.Now().UnixNano())
	if d.conn != nil {
		return nil
	}
	if !sameFileAt(d.path, d.fi) {
		d.closed = true
		return errClosed
	}
	return d.connect()
}

// park closes the connection of an idle writer to give back its memory (page cache,
// statements, fingerprint index); the next call connects again. It reports false, doing
// nothing, when d is in use, closed or parked already.
func (d *DB) park() bool {
	if !d.mu.TryLock() {
		return false
	}
	defer d.mu.Unlock()
	if d.closed || d.conn == nil {
		return false
	}
	_ = d.disconnect() // SQLite reports close errors it has already recovered from
	// The last connection to close removes -wal and -shm; forget them then, so closeStale
	// never removes a later file that reused the inode.
	for _, f := range []struct {
		path string
		fi   *os.FileInfo
	}{{d.path + "-wal", &d.walFi}, {d.path + "-shm", &d.shmFi}} {
		if !sameFileAt(f.path, *f.fi) {
			*f.fi = nil
		}
	}
	return true
}

// closeStale closes a writer whose database file was deleted or replaced. SQLite leaves the
// connection's -wal and -shm behind in that case, and would replay that WAL onto whatever file
// is now at path, so the ones this connection used are removed after it closes.
func (d *DB) closeStale() error {
	err := d.close()
	for _, f := range []struct {
		path string
		fi   os.FileInfo
	}{{d.path + "-wal", d.walFi}, {d.path + "-shm", d.shmFi}} {
		if sameFileAt(f.path, f.fi) {
			if rerr := removeFile(f.path); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
	}
	return err
}

func (d *DB) prepare(ctx context.Context) error {
	for _, p := range []struct {
		st  **sql.Stmt
		sql string
	}{
		{&d.stDataVersion, "PRAGMA data_version"},
		{&d.stMaxSeq, "SELECT coalesce(max(seq), 0) FROM messages"},
		// One statement per cut (a JSON array of seqs) rather than one per row: a new cut
		// moves hundreds of rows out of context, and each statement is a cgo round trip.
		{&d.stTrim, "UPDATE messages SET in_context = 0, trimmed_at = ?, trimmed_at_seq = ? WHERE seq IN (SELECT value FROM json_each(?))"},
		{&d.stRestore, "UPDATE messages SET in_context = 1, trimmed_at = NULL, trimmed_at_seq = NULL WHERE seq IN (SELECT value FROM json_each(?))"},
		{&d.stTrimRange, "UPDATE messages SET in_context = 0, trimmed_at = ?, trimmed_at_seq = ? WHERE seq BETWEEN ? AND ?"},
		{&d.stRestoreRange, "UPDATE messages SET in_context = 1, trimmed_at = NULL, trimmed_at_seq = NULL WHERE seq BETWEEN ? AND ?"},
		{&d.stInsertEvent, "INSERT INTO events (at, kind, version, location, error, tokens_before, tokens_after, dropped, model, thread_root, trimmed, input_tokens, cache_read_tokens, cache_creation_tokens, output_tokens, breakpoints, breakpoint_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"},
	} {
		st, err := d.conn.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.st = st
	}
	return nil
}

// Path returns the database file path (sessions/<sid>.db).
func (d *DB) Path() string { return d.path }

func (d *DB) close() error {
	d.Settle() // the queued writes land first
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	return d.disconnect()
}

// disconnect closes the statements and the connection and drops the index (d.mu held). A
// parked or closed DB has conn == nil.
func (d *DB) disconnect() error {
	// A background checkpoint ends first, so that the writer's connection is the last one
	// and its close removes the WAL, as before (it does not take d.mu).
	d.ckpt.wg.Wait()
	var errs []error
	stmts := []*sql.Stmt{d.stDataVersion, d.stMaxSeq, d.stTrim, d.stRestore, d.stInsertEvent, d.stTrimRange, d.stRestoreRange}
	for _, m := range []map[int]*sql.Stmt{d.stInsertMsgs, d.stInsertLines} {
		for _, st := range m {
			stmts = append(stmts, st)
		}
	}
	for _, st := range stmts {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	d.stDataVersion, d.stMaxSeq, d.stTrim, d.stRestore, d.stInsertEvent = nil, nil, nil, nil, nil
	d.stTrimRange, d.stRestoreRange = nil, nil
	d.stInsertMsgs, d.stInsertLines = nil, nil
	if d.conn != nil {
		errs = append(errs, d.conn.Close())
		d.conn = nil
	}
	if d.sqldb != nil {
		errs = append(errs, d.sqldb.Close())
		d.sqldb = nil
	}
	d.index, d.dataVersion = nil, 0
	d.writers.disconnected(d)
	return errors.Join(errs...)
}

func (d *DB) readDataVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := d.stDataVersion.QueryRowContext(ctx).Scan(&v); err != nil {
		return 0, fmt.Errorf("read data_version: %w", err)
	}
	return v, nil
}

// loadIndex reads every fingerprint. data_version is read first: a commit that lands between
// the two reads only causes one more reload later, never a stale index.
func (d *DB) loadIndex(ctx context.Context) error {
	v, err := d.readDataVersion(ctx)
	if err != nil {
		return err
	}
	rows, err := d.conn.QueryContext(ctx, "SELECT fingerprint, seq, in_context FROM messages")
	if err != nil {
		return fmt.Errorf("load fingerprints: %w", err)
	}
	defer rows.Close()
	index := make(map[string]rowState, len(d.index)+64)
	for rows.Next() {
		var fp string
		var st rowState
		if err := rows.Scan(&fp, &st.seq, &st.inContext); err != nil {
			return fmt.Errorf("load fingerprints: %w", err)
		}
		index[fp] = st
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load fingerprints: %w", err)
	}
	d.index = index
	d.dataVersion = v
	return nil
}

// refreshIndex reloads the index when another connection committed since it was loaded.
func (d *DB) refreshIndex(ctx context.Context) error {
	v, err := d.readDataVersion(ctx)
	if err != nil {
		return err
	}
	if v == d.dataVersion {
		return nil
	}
	return d.loadIndex(ctx)
}
