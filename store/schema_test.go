package store

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

type masterRow struct{ Type, Name, SQL string }

// contractObjects is sqlite_master for the contract's objects, transcribed from the contract's
// Schema section (statements without the trailing ";"). The events table shows the CREATE text
// as SQLite rewrites it after the nine version-3 ALTER TABLE ... ADD COLUMN statements.
var contractObjects = []masterRow{
	{"table", "messages", "CREATE TABLE messages (seq INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE, thread TEXT NOT NULL,\n  role TEXT NOT NULL, kind TEXT NOT NULL, name TEXT, text TEXT NOT NULL, blob_id TEXT,\n  in_context INTEGER NOT NULL DEFAULT 1, trimmed_at_seq INTEGER, trimmed_at TEXT, created_at TEXT NOT NULL)"},
	{"index", "messages_thread", "CREATE INDEX messages_thread ON messages (thread, seq)"},
	{"table", "lines", "CREATE TABLE lines (id INTEGER PRIMARY KEY, message_seq INTEGER NOT NULL REFERENCES messages (seq),\n  line_no INTEGER NOT NULL, role TEXT NOT NULL, text TEXT NOT NULL, UNIQUE (message_seq, line_no))"},
	{"table", "messages_fts", "CREATE VIRTUAL TABLE messages_fts USING fts5 (text, content='messages', content_rowid='seq')"},
	{"table", "lines_fts", "CREATE VIRTUAL TABLE lines_fts USING fts5 (text, content='lines', content_rowid='id')"},
	{"trigger", "messages_fts_insert", "CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN\n  INSERT INTO messages_fts (rowid, text) VALUES (new.seq, new.text); END"},
	{"trigger", "lines_fts_insert", "CREATE TRIGGER lines_fts_insert AFTER INSERT ON lines BEGIN\n  INSERT INTO lines_fts (rowid, text) VALUES (new.id, new.text); END"},
	{"table", "vectors", "CREATE TABLE vectors (message_seq INTEGER NOT NULL REFERENCES messages (seq), model TEXT NOT NULL,\n  dim INTEGER NOT NULL, blob BLOB NOT NULL, PRIMARY KEY (message_seq, model))"},
	{"table", "events", "CREATE TABLE events (id INTEGER PRIMARY KEY, at TEXT NOT NULL, kind TEXT NOT NULL, version TEXT NOT NULL,\n  location TEXT, error TEXT, tokens_before INTEGER, tokens_after INTEGER, dropped INTEGER, model TEXT, thread_root TEXT, trimmed INTEGER, input_tokens INTEGER, cache_read_tokens INTEGER, cache_creation_tokens INTEGER, output_tokens INTEGER, breakpoints INTEGER, breakpoint_at TEXT)"},
}

// queryMaster runs query, which selects type, name and sql from sqlite_master, and returns
// its rows.
func queryMaster(t *testing.T, db *sql.DB, query string) []masterRow {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []masterRow
	for rows.Next() {
		var m masterRow
		if err := rows.Scan(&m.Type, &m.Name, &m.SQL); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// masterOf lists the contract's objects as a second connection sees them, in creation order.
func masterOf(t *testing.T, db *sql.DB) []masterRow {
	t.Helper()
	return queryMaster(t, db, `SELECT type, name, sql FROM sqlite_master WHERE name IN
		('messages','messages_thread','lines','messages_fts','lines_fts','messages_fts_insert','lines_fts_insert','vectors','events')
		ORDER BY rowid`)
}

// fullMaster is all of sqlite_master (shadow tables and autoindexes included), for comparing a
// migrated database with a new one.
func fullMaster(t *testing.T, db *sql.DB) []masterRow {
	t.Helper()
	return queryMaster(t, db, `SELECT type, name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name`)
}

func TestNewDatabaseSchema(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s1")
	if want := filepath.Join(r.Dir(), "sessions", "s1.db"); d.Path() != want {
		t.Fatalf("Path = %s, want %s", d.Path(), want)
	}
	ro := otherConn(t, d.Path(), "mode=ro")
	if got := masterOf(t, ro); !reflect.DeepEqual(got, contractObjects) {
		t.Errorf("sqlite_master:\n got %q\nwant %q", got, contractObjects)
	}
	if v := queryInt(t, ro, "PRAGMA user_version"); v != 3 {
		t.Errorf("user_version = %d, want 3", v)
	}
	var mode string
	if err := ro.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	// Write something so -wal and -shm exist, then check modes.
	if _, err := d.SyncRows([]RowWrite{{Fingerprint: "f1", Thread: "f1", Role: "user", Kind: "text", Text: "hi", InContext: true}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if p := perm(t, d.Path()+suffix); wrongMode(t, p, 0o600) {
			t.Errorf("%s mode %o, want 600", filepath.Base(d.Path()+suffix), p)
		}
	}
}

func TestMigrateFromOlderVersions(t *testing.T) {
	// The reference: what a new database looks like.
	ref := newRoot(t)
	want := fullMaster(t, otherConn(t, mustSession(t, ref, "ref").Path(), "mode=ro"))

	for _, c := range []struct {
		name, fixture string
		events        int64
	}{
		{"version 1", "schema_v1.sql", 0},
		{"version 2", "schema_v2.sql", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRoot(t)
			path := filepath.Join(r.Dir(), "sessions", "old.db")
			buildFixture(t, path, c.fixture)
			d := mustSession(t, r, "old")

			ro := otherConn(t, path, "mode=ro")
			if v := queryInt(t, ro, "PRAGMA user_version"); v != 3 {
				t.Errorf("user_version = %d, want 3", v)
			}
			if got := fullMaster(t, ro); !reflect.DeepEqual(got, want) {
				t.Errorf("sqlite_master after migration differs from a new database:\n got %q\nwant %q", got, want)
			}
			// Stored rows are untouched.
			var fp, trimmedAt, created string
			var inCtx, cut int64
			if err := ro.QueryRow(`SELECT fingerprint, in_context, trimmed_at_seq, trimmed_at, created_at FROM messages WHERE seq = 1`).
				Scan(&fp, &inCtx, &cut, &trimmedAt, &created); err != nil {
				t.Fatal(err)
			}
			if fp != "ef4ec80451390e48c7d9345e3d025634" || inCtx != 0 || cut != 2 || trimmedAt != "2026-01-02T03:04:05Z" || created != "2026-01-01T00:00:00Z" {
				t.Errorf("row 1 changed: %s %d %d %s %s", fp, inCtx, cut, trimmedAt, created)
			}
			if n := queryInt(t, ro, "SELECT count(*) FROM lines"); n != 3 {
				t.Errorf("lines = %d, want 3", n)
			}
			if n := queryInt(t, ro, "SELECT count(*) FROM events"); n != c.events {
				t.Errorf("events = %d, want %d", n, c.events)
			}
			if c.events > 0 {
				var model, input sql.NullString
				if err := ro.QueryRow("SELECT model, input_tokens FROM events WHERE id = 1").Scan(&model, &input); err != nil {
					t.Fatal(err)
				}
				if model.Valid || input.Valid {
					t.Errorf("old event got values in new columns: %v %v", model, input)
				}
			}
			// The index was loaded from the migrated file: the stored rows are not inserted again.
			res, err := d.SyncRows([]RowWrite{
				{Fingerprint: "ef4ec80451390e48c7d9345e3d025634", Role: "user", Kind: "text", Text: "Remember KEY-7 = 0x3f2a.", InContext: false},
				{Fingerprint: "0000000000000000000000000000000b", Role: "tool", Kind: "tool_result", Text: "x", InContext: true},
			}, time.Now())
			if err != nil || res != (SyncResult{}) {
				t.Errorf("SyncRows of stored rows = %+v, %v; want nothing written", res, err)
			}
			if err := d.AddEvent(Event{Kind: "usage", Version: "proxy:0123456789ab", Model: "m"}); err != nil {
				t.Errorf("AddEvent after migration: %v", err)
			}
		})
	}
}

func TestNewerSchemaLeftAlone(t *testing.T) {
	r := newRoot(t)
	path := filepath.Join(r.Dir(), "sessions", "future.db")
	buildFixtureSQL(t, path, "CREATE TABLE future (x); INSERT INTO future VALUES (1); PRAGMA user_version = 4;")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	age(t, path, old)

	for i := 0; i < 2; i++ {
		d, err := r.Session("future")
		if !errors.Is(err, ErrUnsupportedSchema) {
			t.Fatalf("Session = %v, %v; want ErrUnsupportedSchema", d, err)
		}
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(before) != sha256.Sum256(after) || !bytes.Equal(before, after) {
		t.Error("the newer database file was modified")
	}
	if fi, err := os.Stat(path); err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("mtime changed: %v %v", fi.ModTime(), err)
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if _, err := os.Stat(path + suffix); err == nil {
			t.Errorf("%s was created", suffix)
		}
	}
}

// TestSchemaIsOneTransaction: a statement failing halfway (a clashing "vectors" table) leaves
// none of the earlier objects behind and user_version at 0.
func TestSchemaIsOneTransaction(t *testing.T) {
	r := newRoot(t)
	path := filepath.Join(r.Dir(), "sessions", "clash.db")
	buildFixtureSQL(t, path, "CREATE TABLE vectors (x);")
	if _, err := r.Session("clash"); err == nil {
		t.Fatal("Session succeeded on a clashing schema")
	}
	ro := otherConn(t, path, "mode=ro")
	if n := queryInt(t, ro, "SELECT count(*) FROM sqlite_master WHERE name IN ('messages', 'lines', 'messages_fts')"); n != 0 {
		t.Errorf("%d schema objects survived the failed transaction", n)
	}
	if v := queryInt(t, ro, "PRAGMA user_version"); v != 0 {
		t.Errorf("user_version = %d, want 0", v)
	}
}
