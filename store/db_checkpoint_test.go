package store

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// mainFileRows copies the session's .db alone (no -wal, no -shm) and counts the messages
// rows in the copy: what checkpoints have written into the database file itself. -1 when
// the copy has no messages table yet (its creation is still only in the WAL).
func mainFileRows(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db := otherConn(t, cp, "")
	if queryInt(t, db, "SELECT count(*) FROM sqlite_master WHERE name = 'messages'") == 0 {
		return -1
	}
	return queryInt(t, db, "SELECT count(*) FROM messages")
}

// TestCheckpointInBackground: a writer's commits leave the WAL alone until the
// checkpointEvery-th, which starts a checkpoint on a connection of its own; once it ends, the
// database file itself holds every row committed. The writer's own automatic checkpoint is
// raised to walSafetyPages.
func TestCheckpointInBackground(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "ckpt")
	d.mu.Lock()
	var auto int64
	err := d.conn.QueryRowContext(t.Context(), "PRAGMA wal_autocheckpoint").Scan(&auto)
	d.mu.Unlock()
	if err != nil || auto != walSafetyPages {
		t.Fatalf("writer's wal_autocheckpoint = %d (%v), want %d", auto, err, walSafetyPages)
	}

	var rows []RowWrite
	for i := 1; i < checkpointEvery; i++ {
		rows = benchRows(rows, 2)
		if _, err := d.SyncRows(rows, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	d.ckpt.wg.Wait()
	if n := d.ckpt.done.Load(); n != 0 {
		t.Fatalf("%d checkpoints after %d commits, want none before the %dth", n, checkpointEvery-1, checkpointEvery)
	}
	if n := mainFileRows(t, d.Path()); n > 0 {
		t.Fatalf("the database file holds %d rows before any checkpoint, want them only in the WAL", n)
	}

	rows = benchRows(rows, 2)
	if _, err := d.SyncRows(rows, time.Now()); err != nil {
		t.Fatal(err)
	}
	d.ckpt.wg.Wait()
	if done, failed := d.ckpt.done.Load(), d.ckpt.failed.Load(); done != 1 || failed != 0 {
		t.Fatalf("after %d commits: %d checkpoints done, %d failed; want 1 and 0", checkpointEvery, done, failed)
	}
	if n := mainFileRows(t, d.Path()); n != int64(len(rows)) {
		t.Fatalf("the database file holds %d rows after the checkpoint, want all %d", n, len(rows))
	}
	// The writer goes on as before.
	rows = benchRows(rows, 2)
	if _, err := d.SyncRows(rows, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointNeverCreatesTheFile: a checkpoint that starts after the session's files were
// removed fails and leaves nothing behind (a recreated empty file would be a session).
func TestCheckpointNeverCreatesTheFile(t *testing.T) {
	skipOnWindows(t, "an open database file cannot be removed on Windows")
	r := newRoot(t)
	d := mustSession(t, r, "gone")
	if _, err := d.SyncRows(benchRows(nil, 2), time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(d.Path() + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	d.ckpt.wg.Add(1)
	d.ckpt.running.Store(true)
	d.checkpoint(d.fi, d.walFi)
	if d.ckpt.failed.Load() != 1 || d.ckpt.done.Load() != 0 {
		t.Fatalf("checkpoint of a removed file: %d failed, %d done; want 1 and 0", d.ckpt.failed.Load(), d.ckpt.done.Load())
	}
	if _, err := os.Stat(d.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the checkpoint left %s behind (stat: %v)", d.Path(), err)
	}
}

// TestCheckpointSkipsReplacedFile: a database replaced (a new file renamed over it) under a
// connected writer keeps the writer's -wal and -shm at the path until Root.Session notices
// and closeStale removes them. The background checkpoint opens by path, so it must not copy
// the writer's WAL into the new file.
func TestCheckpointSkipsReplacedFile(t *testing.T) {
	skipOnWindows(t, "an open database file cannot be renamed over on Windows")
	r := newRoot(t)
	d := mustSession(t, r, "replaced")
	rows := benchRows(nil, 2)
	if _, err := d.SyncRows(rows, time.Now()); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other.db")
	buildFixtureSQL(t, other, "CREATE TABLE keep(x); INSERT INTO keep VALUES (1), (2), (3);")
	if err := os.Rename(other, d.Path()); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < checkpointEvery; i++ {
		rows = benchRows(rows, 2)
		if _, err := d.SyncRows(rows, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	d.ckpt.wg.Wait()
	after, err := os.ReadFile(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("a checkpoint wrote the writer's WAL into the file that replaced its database (%d bytes, was %d)", len(after), len(before))
	}
	if done, failed := d.ckpt.done.Load(), d.ckpt.failed.Load(); done != 0 || failed != 1 {
		t.Fatalf("checkpoints: %d done, %d failed; want 0 and 1", done, failed)
	}
}

// TestCheckpointCreatesNoWAL: with the .db still there but its -wal and -shm removed under
// the writer, the checkpoint leaves no new -wal or -shm behind.
func TestCheckpointCreatesNoWAL(t *testing.T) {
	skipOnWindows(t, "an open file cannot be removed on Windows")
	r := newRoot(t)
	d := mustSession(t, r, "nowal")
	if _, err := d.SyncRows(benchRows(nil, 2), time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"-wal", "-shm"} {
		if err := os.Remove(d.Path() + s); err != nil {
			t.Fatal(err)
		}
	}
	d.ckpt.wg.Add(1)
	d.ckpt.running.Store(true)
	d.checkpoint(d.fi, d.walFi)
	for _, s := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(d.Path() + s); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the checkpoint left %s%s behind (stat: %v)", d.Path(), s, err)
		}
	}
}

// TestCheckpointKeepsDataVersion: a checkpoint on another connection is no commit for the
// writer: its PRAGMA data_version stays, so the fingerprint index is not reloaded.
func TestCheckpointKeepsDataVersion(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "dv")
	var rows []RowWrite
	for i := 0; i < 3*checkpointEvery; i++ {
		rows = benchRows(rows, 2)
		if _, err := d.SyncRows(rows, time.Now()); err != nil {
			t.Fatal(err)
		}
		d.ckpt.wg.Wait()
		d.mu.Lock()
		v, err := d.readDataVersion(t.Context())
		loaded := d.dataVersion
		d.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if v != loaded {
			t.Fatalf("commit %d: data_version %d, index loaded at %d", i, v, loaded)
		}
	}
	if d.ckpt.done.Load() != 3 {
		t.Fatalf("%d checkpoints done, want 3", d.ckpt.done.Load())
	}
}
