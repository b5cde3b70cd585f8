package store

import (
	"container/list"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Reader pool: OpenReader hands out readers on connections kept open between calls, so a
// search over hundreds of sessions does not pay, per session, for opening the file, reading
// the schema, setting up FTS5 and closing again (about 1.3 ms of the 1.6 ms a small session's
// search cost fresh). A pooled connection is reused while the database file is the same one:
//
//   - opened over a -wal (a writer is or was active): reused while the .db is the same file
//     (inode) and a -wal is still there. SQLite shows such a connection every commit at its
//     next read transaction, so the rows are current; when the .db or -wal changed size or
//     mtime since the last look, the schema version is read again (a migration raises it).
//   - opened without a -wal (immutable=1: nothing created, nothing locked): reused while no
//     -wal appeared and the .db kept its size and mtime, and only when that mtime was at least
//     dashRacyWindow old at open (a coarse clock could hide a later change).
//
// Anything else opens a new connection and retires the old one. At most readerPoolCap
// readers are kept, least recently used out first; one unused for readerIdleTimeout is
// closed. Retention closes a session's reader (waiting for callers still reading it) before it
// deletes the files, which Windows refuses while they are open, and Root.Close closes them all.
//
// Retention's mtimes: a read on a WAL database writes to -shm. The -shm mtime is put back at
// the end of each busy period (the last handle of a reader closed), as a fresh reader's Close
// did, so an idle pooled connection never makes a session look used.
const (
	readerPoolCap     = 256
	readerIdleTimeout = 2 * time.Minute
	// readerDeleteWait bounds how long retention waits for callers still reading a session
	// it deletes (searches run under a 5 s timeout).
	readerDeleteWait = 10 * time.Second
	// readerConns is the connections a reader may open for callers reading at once; one
	// stays open when idle.
	readerConns = 4
)

// readerPool is Root's pool of session readers. The zero value is ready; it is safe for
// concurrent use.
type readerPool struct {
	mu      sync.Mutex
	entries map[string]*sharedReader // by sid: the pooled reader of each session
	lru     list.List                // of *sharedReader in entries, most recently used first
	blocked blockCounts              // sids being deleted: readers of these are not pooled
	closed  bool
	timer   *time.Timer // closes idle readers; armed while entries is not empty

	// settings (tests lower them); 0 = the defaults above
	cap  int
	idle time.Duration
}

// sharedReader is one opened session database, shared by the Reader handles that use it.
type sharedReader struct {
	sid, path string
	db        *sql.DB
	immutable bool        // opened without a -wal (immutable=1)
	fi        os.FileInfo // the .db at open: the file identity
	dbAt      fileStamp   // the .db at open (immutable readers must find it unchanged)

	// under readerPool.mu
	refs     int          // handles not closed yet
	busy     fileSnapshot // the files when refs last went from 0 to 1 (restored when back to 0)
	lastUsed time.Time
	pooled   bool          // in readerPool.entries; false: closed when refs reaches 0
	elem     *list.Element // in readerPool.lru
	done     chan struct{} // closed once db is closed

	vmu     sync.Mutex // guards version and seen
	version int
	seen    [2]fileStamp // .db and -wal when version was last read (WAL readers)

	vsmu    sync.Mutex          // guards vstatus
	vstatus *cachedVectorStatus // Reader.Vectors' last answer and its key (vectors.go); nil until one

	vimu    sync.Mutex   // guards vectors
	vectors *vectorIndex // the hybrid search's decoded vectors (vectors_index.go); nil until one runs

	gimu  sync.Mutex // guards grams
	grams *gramIndex // the pattern search's trigram filters (search_trigrams.go); nil until one runs
	// gramsTooBig is the search memory budget under which the session's filters alone did
	// not fit (0: none): no index is built while the budget is no larger.
	gramsTooBig int64

	pimu  sync.Mutex    // guards posts
	posts *postingIndex // the words queries' postings of common words (search_postings.go); nil until one ranks

	stmu        sync.Mutex // guards stmts
	stmts       map[string]*sql.Stmt
	stmtsClosed bool
}

func (p *readerPool) capacity() int {
	if p.cap > 0 {
		return p.cap
	}
	return readerPoolCap
}

func (p *readerPool) idleTimeout() time.Duration {
	if p.idle > 0 {
		return p.idle
	}
	return readerIdleTimeout
}

// fileSnapshot is the stat of a session database's files before a read (nil: missing).
type fileSnapshot struct{ db, wal, shm os.FileInfo }

func snapshotFiles(path string) (s fileSnapshot, dbErr error) {
	s.db, dbErr = os.Stat(path)
	s.wal, _ = os.Stat(path + "-wal")
	s.shm, _ = os.Stat(path + "-shm")
	return s, dbErr
}

// restore gives -shm back the mtime it had in s when the -wal shows no writer activity
// since s (a -shm the read created gets the newest mtime the database files had). Without a
// -wal in s (an immutable read) nothing was created or written.
func (s fileSnapshot) restore(path string) {
	if s.wal == nil {
		return
	}
	walAfter, werr := os.Stat(path + "-wal")
	shmAfter, serr := os.Stat(path + "-shm")
	if werr != nil || serr != nil || walAfter.Size() != s.wal.Size() || !walAfter.ModTime().Equal(s.wal.ModTime()) {
		return // a writer was active: the session is in use anyway
	}
	want := s.wal.ModTime()
	if s.shm != nil {
		want = s.shm.ModTime()
	} else if s.db != nil && s.db.ModTime().After(want) {
		want = s.db.ModTime()
	}
	if !shmAfter.ModTime().Equal(want) {
		_ = os.Chtimes(path+"-shm", want, want)
	}
}

func stampOf(fi os.FileInfo) fileStamp {
	if fi == nil {
		return noFile
	}
	return fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}

// usable reports whether sr may serve a read of the files as they are in s.
func (sr *sharedReader) usable(s fileSnapshot) bool {
	if s.db == nil || !os.SameFile(sr.fi, s.db) {
		return false // deleted or replaced
	}
	if sr.immutable {
		return s.wal == nil && stampOf(s.db) == sr.dbAt
	}
	return s.wal != nil
}

// checkout returns the pooled reader of sid when it can serve a read of the files now, with
// one more handle on it; nil when a new one must be opened (s is then the files now). A
// pooled reader that can no longer serve is retired.
func (p *readerPool) checkout(sid, path string) (*sharedReader, fileSnapshot, error) {
	p.mu.Lock()
	s, err := snapshotFiles(path) // under the lock: a busy period starts from the files as its predecessor's end left them
	sr := p.entries[sid]
	if sr == nil {
		p.mu.Unlock()
		return nil, s, err
	}
	if err != nil || !sr.usable(s) { // deleted (its disk space is freed once closed) or changed
		p.removeLocked(sr)
		closeNow := sr.refs == 0
		p.mu.Unlock()
		if closeNow {
			_ = sr.close()
		}
		return nil, s, err
	}
	if sr.refs == 0 {
		sr.busy = s
	}
	sr.refs++
	p.lru.MoveToFront(sr.elem)
	p.mu.Unlock()
	return sr, s, nil
}

// add registers a reader just opened (refs 1, busy s): pooled when the pool has room (the
// least recently used idle readers are closed to make it) and nothing speaks against it.
func (p *readerPool) add(sr *sharedReader, s fileSnapshot, settled bool) {
	sr.refs, sr.busy, sr.done = 1, s, make(chan struct{})
	var evicted []*sharedReader
	p.mu.Lock()
	switch {
	case p.closed || p.blocked[sr.sid] > 0 || p.entries[sr.sid] != nil:
	case sr.immutable && !settled:
	default:
		for e := p.lru.Back(); e != nil && len(p.entries) >= p.capacity(); {
			old := e.Value.(*sharedReader)
			e = e.Prev()
			if old.refs == 0 {
				p.removeLocked(old)
				evicted = append(evicted, old)
			}
		}
		if len(p.entries) < p.capacity() {
			if p.entries == nil {
				p.entries = map[string]*sharedReader{}
			}
			sr.pooled = true
			p.entries[sr.sid] = sr
			sr.elem = p.lru.PushFront(sr)
			p.armLocked()
		}
	}
	p.mu.Unlock()
	for _, old := range evicted {
		_ = old.close()
	}
}

// release drops one handle of sr. The last one ends the busy period: the -shm mtime is put
// back, and a reader no longer pooled is closed.
func (p *readerPool) release(sr *sharedReader) error {
	p.mu.Lock()
	sr.refs--
	if sr.refs > 0 {
		p.mu.Unlock()
		return nil
	}
	sr.lastUsed = time.Now()
	closeNow := !sr.pooled
	if !closeNow {
		sr.busy.restore(sr.path) // under the lock: no new busy period starts meanwhile
	}
	p.mu.Unlock()
	if closeNow {
		return sr.close()
	}
	return nil
}

// close closes the connections, then puts back the -shm mtime of the last busy period.
func (sr *sharedReader) close() error {
	sr.forgetCaches()
	sr.closeStmts()
	err := sr.db.Close()
	sr.busy.restore(sr.path)
	close(sr.done)
	return err
}

// removeLocked takes sr out of the pool; the caller closes it when refs is 0 (or release
// does, later).
func (p *readerPool) removeLocked(sr *sharedReader) {
	if !sr.pooled {
		return
	}
	sr.pooled = false
	delete(p.entries, sr.sid)
	p.lru.Remove(sr.elem)
	sr.elem = nil
}

// armLocked schedules the idle sweep when entries exist and none is scheduled.
func (p *readerPool) armLocked() {
	if p.timer == nil && len(p.entries) > 0 && !p.closed {
		p.timer = time.AfterFunc(p.idleTimeout()/4, p.closeIdle)
	}
}

// closeIdle closes the readers unused for the idle timeout and re-arms while any remain.
func (p *readerPool) closeIdle() {
	var idle []*sharedReader
	p.mu.Lock()
	p.timer = nil
	cutoff := time.Now().Add(-p.idleTimeout())
	for e := p.lru.Back(); e != nil; {
		sr := e.Value.(*sharedReader)
		e = e.Prev()
		if sr.refs == 0 && sr.lastUsed.Before(cutoff) {
			p.removeLocked(sr)
			idle = append(idle, sr)
		}
	}
	p.armLocked()
	p.mu.Unlock()
	for _, sr := range idle {
		_ = sr.close()
	}
}

// evict closes the pooled reader of sid, waiting up to readerDeleteWait for handles still
// open on it, and keeps readers of sid out of the pool until the returned func is called.
func (p *readerPool) evict(sid string) (unblock func()) {
	p.mu.Lock()
	unblock = p.blocked.add(&p.mu, sid)
	sr := p.entries[sid]
	var closeNow bool
	if sr != nil {
		p.removeLocked(sr)
		closeNow = sr.refs == 0
	}
	p.mu.Unlock()
	switch {
	case sr == nil:
	case closeNow:
		_ = sr.close()
	default:
		select {
		case <-sr.done: // the last handle's Close closed it
		case <-time.After(readerDeleteWait):
		}
	}
	return unblock
}

// blockCounts counts, by key, the evictions under way that keep the key out of a cache (a
// session's reader or savings file being deleted). The cache's mutex guards it; the zero
// value is empty.
type blockCounts map[string]int

// add blocks key once more, with mu held; the returned func lifts that block, taking mu.
func (b *blockCounts) add(mu *sync.Mutex, key string) (unblock func()) {
	if *b == nil {
		*b = blockCounts{}
	}
	(*b)[key]++
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if (*b)[key]--; (*b)[key] <= 0 {
			delete(*b, key)
		}
	}
}

// closeAll closes every idle reader and keeps new ones out; readers in use close when their
// last handle does.
func (p *readerPool) closeAll() error {
	var idle []*sharedReader
	p.mu.Lock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	for e := p.lru.Front(); e != nil; {
		sr := e.Value.(*sharedReader)
		e = e.Next()
		p.removeLocked(sr)
		if sr.refs == 0 {
			idle = append(idle, sr)
		}
	}
	p.mu.Unlock()
	var errs []error
	for _, sr := range idle {
		errs = append(errs, sr.close())
	}
	return errors.Join(errs...)
}

// discard takes sr out of the pool (a reader of a database it cannot serve: no schema yet, a
// newer one, unreadable); it closes when its last handle does.
func (p *readerPool) discard(sr *sharedReader) {
	p.mu.Lock()
	p.removeLocked(sr)
	p.mu.Unlock()
}

// size is the number of pooled readers (tests).
func (p *readerPool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

// openShared opens sid's database read-only on connections with the read-only authorizer,
// as the files are in s, and reads its schema version.
func openShared(sid, path string, s fileSnapshot) (*sharedReader, error) {
	params := "mode=ro&_busy_timeout=1000"
	if s.wal == nil {
		params = "mode=ro&immutable=1"
	}
	db, err := sql.Open(roDriver(), sqliteURI(path, params))
	if err != nil {
		return nil, fmt.Errorf("open session %s: %w", sid, err)
	}
	db.SetMaxOpenConns(readerConns)
	db.SetMaxIdleConns(1)
	sr := &sharedReader{sid: sid, path: path, db: db, immutable: s.wal == nil, fi: s.db, dbAt: stampOf(s.db),
		seen: [2]fileStamp{stampOf(s.db), stampOf(s.wal)}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if sr.version, err = readUserVersion(ctx, db); err != nil {
		_ = db.Close()
		s.restore(path)
		return nil, fmt.Errorf("open session %s: read user_version: %w", sid, err)
	}
	return sr, nil
}

// currentVersion returns the schema version, read again on a WAL reader when the .db or
// -wal changed since it was last read (a writer may have migrated the database).
func (sr *sharedReader) currentVersion(s fileSnapshot) (int, error) {
	sr.vmu.Lock()
	defer sr.vmu.Unlock()
	now := [2]fileStamp{stampOf(s.db), stampOf(s.wal)}
	if sr.immutable || now == sr.seen {
		return sr.version, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := readUserVersion(ctx, sr.db)
	if err != nil {
		return 0, err
	}
	sr.version, sr.seen = v, now
	return v, nil
}

// readerStmtCap bounds the statements a pooled reader keeps prepared (the searches' shapes
// are a few dozen; a statement past the cap is prepared per use).
const readerStmtCap = 64

// stmt returns sr's prepared statement for q, preparing it on first use; nil when the cache
// is full or q does not prepare (the caller runs q unprepared, which reports the error).
func (sr *sharedReader) stmt(ctx context.Context, q string) *sql.Stmt {
	sr.stmu.Lock()
	st, ok := sr.stmts[q]
	full := len(sr.stmts) >= readerStmtCap
	sr.stmu.Unlock()
	if ok || full {
		return st
	}
	st, err := sr.db.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	sr.stmu.Lock()
	defer sr.stmu.Unlock()
	if have, ok := sr.stmts[q]; ok || sr.stmts == nil && sr.stmtsClosed {
		_ = st.Close()
		return have
	}
	if sr.stmts == nil {
		sr.stmts = map[string]*sql.Stmt{}
	}
	sr.stmts[q] = st
	return st
}

// closeStmts closes the prepared statements (before the connections close).
func (sr *sharedReader) closeStmts() {
	sr.stmu.Lock()
	defer sr.stmu.Unlock()
	for _, st := range sr.stmts {
		_ = st.Close()
	}
	sr.stmts, sr.stmtsClosed = nil, true
}

// conn runs a Reader's statements through its pooled reader's prepared statements.
type conn struct {
	db *sql.DB
	sr *sharedReader
}

// conn returns the Reader's statement runner, or an error after Close.
func (rd *Reader) conn() (conn, error) {
	db, err := rd.pool()
	return conn{db: db, sr: rd.sr}, err
}

func (c conn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := c.sr.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.db.QueryRowContext(ctx, q, args...)
}

func (c conn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := c.sr.stmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return c.db.QueryContext(ctx, q, args...)
}

// preparedStmt is a statement from conn.prepare; call done when finished with it.
type preparedStmt struct {
	*sql.Stmt
	cached bool
}

func (s preparedStmt) done() {
	if !s.cached {
		_ = s.Close()
	}
}

func (c conn) prepare(ctx context.Context, q string) (preparedStmt, error) {
	if st := c.sr.stmt(ctx, q); st != nil {
		return preparedStmt{Stmt: st, cached: true}, nil
	}
	st, err := c.db.PrepareContext(ctx, q)
	return preparedStmt{Stmt: st}, err
}
