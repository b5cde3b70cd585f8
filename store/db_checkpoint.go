package store

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// WAL checkpoints off the write path. SQLite's automatic checkpoint runs inside the commit
// that takes the WAL past its threshold (1,000 pages by default): that commit copies the
// WAL into the database and syncs both files before it returns. The proxy waits for the
// commit of a reply's rows before the response's last byte (proxy/reply_rows.go), so every
// request whose commit drew the checkpoint paid for it: in BenchmarkReplyStoreWarm (400
// messages, one tool step a request) a writer without the automatic checkpoint had a p99
// to the last byte of 8.6–13.7 ms against 19.4–21.5 ms, and a p50 of 2.6–2.9 against
// 3.2–3.4 ms (three interleaved runs).
//
// So a writer's connection raises the threshold to walSafetyPages, which only a writer
// whose background checkpoints cannot keep up reaches, and every checkpointEvery commits
// the DB checkpoints on a connection of its own, on a goroutine of its own: PASSIVE, so it
// copies what no reader still needs and never waits for the writer, which goes on
// committing meanwhile. The files and what they hold are SQLite's as before; only who pays
// for the copy changed. Every 64 commits, not more often: a checkpoint costs a connection's
// open and two syncs whatever it copies, and at 16 a warm request's store CPU was about
// 0.2 ms higher than with SQLite's own checkpoint (BenchmarkQueuedWarm held/sessions_1:
// 0.69–0.78 against 0.54–0.57 cpu-ms/op), at 64 the same (0.55–0.62). 64 of a warm loop's
// commits are about 800 pages, near SQLite's default threshold.
const (
	walSafetyPages  = 4000
	checkpointEvery = 64
)

// checkpointer is a DB's background checkpoint: at most one runs at a time.
type checkpointer struct {
	since   int            // commits since the last checkpoint started (DB.mu held)
	running atomic.Bool    // a checkpoint runs
	wg      sync.WaitGroup // the running checkpoint; disconnect waits for it
	// done counts checkpoints that completed and failed those that returned an error (tests).
	done, failed atomic.Int64
}

// noteCommit counts a committed transaction (d.mu held) and starts a background
// checkpoint every checkpointEvery commits, unless one still runs.
func (d *DB) noteCommit() {
	d.commits.Add(1)
	c := &d.ckpt
	c.since++
	if c.since < checkpointEvery || !c.running.CompareAndSwap(false, true) {
		return
	}
	c.since = 0
	c.wg.Add(1)
	go d.checkpoint(d.fi, d.walFi)
}

// errCheckpointStale: the database or its -wal at the path is no longer the writer's.
var errCheckpointStale = errors.New("checkpoint: the files at the path are not the writer's")

// checkpoint runs PASSIVE on a connection of its own (mode=rw: it never creates the file,
// should the database be gone by then) and closes it. It opens the files by path, so it
// checkpoints only when the .db and -wal there are still the writer's (fi, walFi): a
// database deleted or replaced under a connected writer (Root.Session's reopen check,
// closeStale) would otherwise get the writer's WAL copied into whatever file is at the path
// now. The check runs before the open (so nothing is created beside a file that is not the
// writer's) and again once a read has bound the connection to its files. A failure changes
// nothing: the WAL keeps its frames for the next one, and the writer's own checkpoint at
// walSafetyPages still bounds it.
func (d *DB) checkpoint(fi, walFi os.FileInfo) {
	c := &d.ckpt
	defer c.wg.Done()
	defer c.running.Store(false)
	err := func() error {
		mine := func() bool { return sameFileAt(d.path, fi) && sameFileAt(d.path+"-wal", walFi) }
		if !mine() {
			return errCheckpointStale
		}
		db, err := sql.Open("sqlite3", sqliteURI(d.path, "mode=rw&_busy_timeout=1000&_cache_size=-64"))
		if err != nil {
			return err
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		// A read opens the -wal and -shm: from here on the connection's files are fixed.
		var v int
		if err := conn.QueryRowContext(ctx, "PRAGMA schema_version").Scan(&v); err != nil {
			return err
		}
		if !mine() {
			return errCheckpointStale
		}
		var busy, log, copied int
		return conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &copied)
	}()
	if err != nil {
		c.failed.Add(1)
		return
	}
	c.done.Add(1)
}
