-- A version 2 session database: schema_v1.sql plus the version 2 events table and one trim
-- event, user_version = 2. Used by the migration tests.
CREATE TABLE messages (seq INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE, thread TEXT NOT NULL,
  role TEXT NOT NULL, kind TEXT NOT NULL, name TEXT, text TEXT NOT NULL, blob_id TEXT,
  in_context INTEGER NOT NULL DEFAULT 1, trimmed_at_seq INTEGER, trimmed_at TEXT, created_at TEXT NOT NULL);
CREATE INDEX messages_thread ON messages (thread, seq);
CREATE TABLE lines (id INTEGER PRIMARY KEY, message_seq INTEGER NOT NULL REFERENCES messages (seq),
  line_no INTEGER NOT NULL, role TEXT NOT NULL, text TEXT NOT NULL, UNIQUE (message_seq, line_no));
CREATE VIRTUAL TABLE messages_fts USING fts5 (text, content='messages', content_rowid='seq');
CREATE VIRTUAL TABLE lines_fts USING fts5 (text, content='lines', content_rowid='id');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
  INSERT INTO messages_fts (rowid, text) VALUES (new.seq, new.text); END;
CREATE TRIGGER lines_fts_insert AFTER INSERT ON lines BEGIN
  INSERT INTO lines_fts (rowid, text) VALUES (new.id, new.text); END;
CREATE TABLE vectors (message_seq INTEGER NOT NULL REFERENCES messages (seq), model TEXT NOT NULL,
  dim INTEGER NOT NULL, blob BLOB NOT NULL, PRIMARY KEY (message_seq, model));
INSERT INTO messages (fingerprint, thread, role, kind, name, text, blob_id, in_context, trimmed_at_seq, trimmed_at, created_at)
  VALUES ('ef4ec80451390e48c7d9345e3d025634', 'ef4ec80451390e48c7d9345e3d025634', 'user', 'text', NULL,
          'Remember KEY-7 = 0x3f2a.', NULL, 0, 2, '2026-01-02T03:04:05Z', '2026-01-01T00:00:00Z');
INSERT INTO lines (message_seq, line_no, role, text) VALUES (1, 1, 'user', 'Remember KEY-7 = 0x3f2a.');
INSERT INTO messages (fingerprint, thread, role, kind, name, text, blob_id, in_context, trimmed_at_seq, trimmed_at, created_at)
  VALUES ('0000000000000000000000000000000b', 'ef4ec80451390e48c7d9345e3d025634', 'tool', 'tool_result', 'Bash',
          'total 0
drwx------ .', '0123456789abcdef', 1, NULL, NULL, '2026-01-01T00:00:01Z');
INSERT INTO lines (message_seq, line_no, role, text) VALUES (2, 1, 'tool', 'total 0');
INSERT INTO lines (message_seq, line_no, role, text) VALUES (2, 2, 'tool', 'drwx------ .');
CREATE TABLE events (id INTEGER PRIMARY KEY, at TEXT NOT NULL, kind TEXT NOT NULL, version TEXT NOT NULL,
  location TEXT, error TEXT, tokens_before INTEGER, tokens_after INTEGER, dropped INTEGER);
INSERT INTO events (at, kind, version, location, error, tokens_before, tokens_after, dropped)
  VALUES ('2026-01-02T03:04:05Z', 'trim', 'proxy:0123456789ab', NULL, NULL, 150000, 40000, 12);
PRAGMA user_version = 2;
