package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SchemaVersion is the PRAGMA user_version this package writes and the newest it accepts
// (contract: Schema).
const SchemaVersion = 3

// ErrUnsupportedSchema: the session database has a user_version newer than SchemaVersion
// (contract: Session database). The file is left alone; callers fail open.
var ErrUnsupportedSchema = errors.New("unsupported schema")

// schemaStatements are the contract's SCHEMA then MIGRATIONS, byte for byte (sqlite_master keeps
// the CREATE text, and the parity test compares it). migrations[v] lists the statements that
// take a database from user_version v to v+1; a new database runs all of them.
var migrations = [][]string{
	// version 1 (SCHEMA)
	{
		"CREATE TABLE messages (seq INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE, thread TEXT NOT NULL,\n" +
			"  role TEXT NOT NULL, kind TEXT NOT NULL, name TEXT, text TEXT NOT NULL, blob_id TEXT,\n" +
			"  in_context INTEGER NOT NULL DEFAULT 1, trimmed_at_seq INTEGER, trimmed_at TEXT, created_at TEXT NOT NULL);",
		"CREATE INDEX messages_thread ON messages (thread, seq);",
		"CREATE TABLE lines (id INTEGER PRIMARY KEY, message_seq INTEGER NOT NULL REFERENCES messages (seq),\n" +
			"  line_no INTEGER NOT NULL, role TEXT NOT NULL, text TEXT NOT NULL, UNIQUE (message_seq, line_no));",
		"CREATE VIRTUAL TABLE messages_fts USING fts5 (text, content='messages', content_rowid='seq');",
		"CREATE VIRTUAL TABLE lines_fts USING fts5 (text, content='lines', content_rowid='id');",
		"CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN\n" +
			"  INSERT INTO messages_fts (rowid, text) VALUES (new.seq, new.text); END;",
		"CREATE TRIGGER lines_fts_insert AFTER INSERT ON lines BEGIN\n" +
			"  INSERT INTO lines_fts (rowid, text) VALUES (new.id, new.text); END;",
		"CREATE TABLE vectors (message_seq INTEGER NOT NULL REFERENCES messages (seq), model TEXT NOT NULL,\n" +
			"  dim INTEGER NOT NULL, blob BLOB NOT NULL, PRIMARY KEY (message_seq, model));",
	},
	// version 2
	{
		"CREATE TABLE events (id INTEGER PRIMARY KEY, at TEXT NOT NULL, kind TEXT NOT NULL, version TEXT NOT NULL,\n" +
			"  location TEXT, error TEXT, tokens_before INTEGER, tokens_after INTEGER, dropped INTEGER);",
	},
	// version 3, one statement per column
	{
		"ALTER TABLE events ADD COLUMN model TEXT;",
		"ALTER TABLE events ADD COLUMN thread_root TEXT;",
		"ALTER TABLE events ADD COLUMN trimmed INTEGER;",
		"ALTER TABLE events ADD COLUMN input_tokens INTEGER;",
		"ALTER TABLE events ADD COLUMN cache_read_tokens INTEGER;",
		"ALTER TABLE events ADD COLUMN cache_creation_tokens INTEGER;",
		"ALTER TABLE events ADD COLUMN output_tokens INTEGER;",
		"ALTER TABLE events ADD COLUMN breakpoints INTEGER;",
		"ALTER TABLE events ADD COLUMN breakpoint_at TEXT;",
	},
}

func userVersion(ctx context.Context, conn *sql.Conn) (int, error) {
	var v int
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read user_version: %w", err)
	}
	return v, nil
}

func unsupported(v int) error {
	return fmt.Errorf("%w: user_version %d is not between 0 and %d; a newer smarter-compact wrote this session database, upgrade to use it",
		ErrUnsupportedSchema, v, SchemaVersion)
}

// migrate brings the database to SchemaVersion in one BEGIN IMMEDIATE transaction (contract:
// Schema). A newer or negative version returns ErrUnsupportedSchema without writing.
func migrate(ctx context.Context, conn *sql.Conn) (err error) {
	v, err := userVersion(ctx, conn)
	if err != nil {
		return err
	}
	if v == SchemaVersion {
		return nil
	}
	if v < 0 || v > SchemaVersion {
		return unsupported(v)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin schema transaction: %w", err)
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(ctx, "ROLLBACK")
		}
	}()
	// Another writer may have migrated between the read above and the write lock.
	if v, err = userVersion(ctx, conn); err != nil {
		return err
	}
	if v < 0 || v > SchemaVersion {
		return unsupported(v)
	}
	if v == SchemaVersion {
		_, err = conn.ExecContext(ctx, "ROLLBACK")
		return err
	}
	for _, step := range migrations[v:] {
		for _, stmt := range step {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migrate schema from version %d: %w", v, err)
			}
		}
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
		return fmt.Errorf("set user_version: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit schema: %w", err)
	}
	return nil
}
