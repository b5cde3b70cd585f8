package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestCheckSelect(t *testing.T) {
	for _, c := range []struct {
		sql    string
		refuse string // "" = accepted; else a word the error must name
	}{
		{"SELECT 1", ""},
		{"  select count(*) from lines where text like '%x%'", ""},
		{"WITH x AS (SELECT 1) SELECT * FROM x", ""},
		{"SELECT replace(text, 'a', 'b') FROM messages", ""},
		{"SELECT REPLACE (text, 'a', 'b') FROM messages", ""},
		{"SELECT 1;", ""},
		{"SELECT 1 ;  \n\t", ""},
		{"SELECT 1; -- done", ""},
		{"SELECT 'DELETE FROM messages; DROP TABLE x'", ""},
		{`SELECT "update", [drop], ` + "`insert`" + ` FROM t`, ""},
		{"SELECT 1 -- DROP TABLE messages", ""},
		{"SELECT 1 /* ; DELETE */", ""},
		{"SELECT 'it''s; DELETE'", ""},
		{"SELECT deleted_at, updated, created FROM t", ""},
		{"SELECT * FROM messages_fts WHERE messages_fts MATCH '\"deploy\"'", ""},
		{"", "empty"},
		{"  -- only a comment", "empty"},
		{"DELETE FROM messages", "DELETE"},
		{"EXPLAIN SELECT 1", "EXPLAIN"},
		{"VALUES (1)", "VALUES"},
		{"(SELECT 1)", "("},
		{"SELECT 1; SELECT 2", ";"},
		{"SELECT 1;;", ";"},
		{"SELECT 1; DROP TABLE messages", ";"},
		{"WITH x AS (SELECT 1) DELETE FROM messages", "DELETE"},
		{"SELECT * FROM t WHERE x IN (SELECT 1) AND 1 = (INSERT)", "INSERT"},
		{"SELECT 1 FROM t; -- \n", ""},
		{"REPLACE INTO messages (seq) VALUES (1)", "REPLACE"},
		{"WITH x AS (SELECT 1) REPLACE INTO messages SELECT * FROM x", "REPLACE INTO"},
		{"WITH x AS (SELECT 1) replace /* c */ into messages SELECT * FROM x", "REPLACE INTO"},
		{"SELECT 1 FROM pragma_user_version", ""}, // the authorizer refuses it
		{"SELECT 1 WHERE 0 = 'a'||'' -- '\n; DELETE FROM t", ";"},
		{"SELECT 'a' ; /* x */ DELETE FROM t", ";"},
		{"SELECT \"a;\" FROM t", ""},
		{"SELECT `a'` FROM t; DELETE", ";"},
		{"SELECT [a'] FROM t; DELETE", ";"},
		{"SELECT 'unterminated", ""}, // SQLite rejects it
		{"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c", ""},
	} {
		err := CheckSelect(c.sql)
		switch {
		case c.refuse == "" && err != nil:
			t.Errorf("CheckSelect(%q) = %v, want accepted", c.sql, err)
		case c.refuse != "" && err == nil:
			t.Errorf("CheckSelect(%q) accepted, want refused (%s)", c.sql, c.refuse)
		case c.refuse != "" && (!strings.Contains(err.Error(), c.refuse) || !strings.Contains(err.Error(), "SELECT or WITH")):
			t.Errorf("CheckSelect(%q) = %q, want it to name %q and what is accepted", c.sql, err, c.refuse)
		}
	}
}

// sqlSession writes a session of 100 rows (300 lines) through the writer, which stays open
// (so -wal exists), and opens a Reader on it.
func sqlSession(t *testing.T) (*Root, *Reader, []string) {
	t.Helper()
	r := newRoot(t)
	d := mustSession(t, r, "s")
	if _, err := d.SyncRows(benchRows(nil, 100), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := d.AddEvent(Event{Kind: "trim", Version: "proxy:test"}); err != nil {
		t.Fatal(err)
	}
	files := []string{d.Path(), d.Path() + "-wal"}
	if !exists(files[1]) {
		t.Fatal("no -wal")
	}
	return r, mustReader(t, r, "s"), files
}

// TestQuerySafety runs hostile statements through Query: each is refused (statement check,
// authorizer, length limit) or stopped by the timeout, and the database files stay byte for
// byte the same.
func TestQuerySafety(t *testing.T) {
	r, rd, files := sqlSession(t)
	dir := t.TempDir()
	outside := filepath.Join(dir, "copy.db")
	before := hashFiles(t, files...)
	sessionsBefore := sessionTimes(t, r)
	const timeout = 300 * time.Millisecond

	hostile := []string{
		// attach, pragmas
		"ATTACH DATABASE '" + outside + "' AS x",
		"attach '" + outside + "' as y",
		"DETACH x",
		"PRAGMA writable_schema = ON",
		"PRAGMA user_version = 99",
		"PRAGMA journal_mode = DELETE",
		"pragma query_only = 0",
		"SELECT * FROM pragma_user_version",
		"SELECT * FROM pragma_table_info('messages')",
		// DML, also hidden in CTEs
		"INSERT INTO messages (fingerprint, thread, role, kind, text, created_at) VALUES ('x','x','user','text','x','x')",
		"UPDATE messages SET text = 'x'",
		"DELETE FROM messages",
		"/* SELECT */ DELETE FROM messages",
		"-- SELECT\nDELETE FROM messages",
		"WITH x AS (SELECT 1) DELETE FROM messages",
		"WITH x AS (SELECT 1) INSERT INTO lines SELECT * FROM lines",
		"WITH x AS (SELECT 1) UPDATE messages SET in_context = 0",
		`WITH "x" AS (SELECT 1) DELETE FROM "messages"`,
		"REPLACE INTO messages (seq, fingerprint, thread, role, kind, text, created_at) VALUES (1,'x','x','user','text','x','x')",
		"replace\n  into messages (seq) values (1)",
		"REPLACE/**/INTO messages (seq) VALUES (1)",
		"INSERT OR REPLACE INTO messages (seq) VALUES (1)",
		"WITH x AS (SELECT 1) INSERT INTO messages_fts (messages_fts) VALUES ('delete-all')",
		// second statements, comment and string tricks
		"SELECT 1; DROP TABLE messages",
		"SELECT 1;DROP TABLE messages;",
		"SELECT 1 -- comment\n; DELETE FROM messages",
		"SELECT '1'; DELETE FROM messages --'",
		"SELECT 1 /* ; */ ; DELETE FROM messages",
		"SELECT * FROM messages WHERE 1 = 1; ATTACH '" + outside + "' AS z",
		"SELECT * FROM sqlite_master; UPDATE sqlite_master SET sql = 'x'",
		"SELECT 'a' ; /* x */ DELETE FROM lines",
		// DDL and maintenance
		"CREATE TABLE x (y)",
		"CREATE TEMP TABLE x AS SELECT * FROM messages",
		"DROP TABLE messages",
		"DROP INDEX messages_thread",
		"ALTER TABLE messages ADD COLUMN z",
		"VACUUM",
		"VACUUM INTO '" + outside + "'",
		"REINDEX",
		"ANALYZE",
		// transactions
		"BEGIN; DELETE FROM messages; COMMIT",
		"BEGIN IMMEDIATE",
		"COMMIT",
		"ROLLBACK",
		"SAVEPOINT s",
		"RELEASE s",
		"END TRANSACTION",
		"EXPLAIN DELETE FROM messages",
		// extensions and files
		"SELECT load_extension('/tmp/evil.so')",
		"SELECT load_extension('x') FROM messages",
		"SELECT LOAD_EXTENSION('x', 'init')",
		"SELECT readfile('/etc/passwd')",
		"SELECT writefile('" + outside + "', 'y')",
		"SELECT fts3_tokenizer('simple')",
		// runaway statements: the timeout or the length limit stops them
		"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c",
		"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT max(x) FROM c",
		"WITH RECURSIVE c(x) AS (SELECT 'a' UNION ALL SELECT x||x FROM c) SELECT length(x) FROM c",
		"SELECT count(*) FROM lines a, lines b, lines c, lines d",
		"SELECT count(*) FROM messages a, messages b, messages c, lines d",
		"SELECT length(group_concat(a.text)) FROM lines a, lines b, lines c",
		"SELECT zeroblob(1000000000)",
		"SELECT randomblob(2000000000)",
		"SELECT printf('%.*c', 1000000000, 'x')",
		"SELECT replace(hex(zeroblob(50000000)), '0', 'ab')",
	}
	if len(hostile) < 50 {
		t.Fatalf("only %d hostile statements", len(hostile))
	}
	ctx := context.Background()
	for _, q := range hostile {
		start := time.Now()
		res, err := rd.Query(ctx, q, timeout)
		took := time.Since(start)
		if err == nil {
			t.Errorf("%q ran: %+v", q, res)
		}
		t.Logf("%-60.60q %6.0fms %v", q, took.Seconds()*1000, err)
		switch {
		case took > timeout+time.Second && underWine:
			// the statement was stopped (err above); wine only frees its gigabyte slowly
			t.Logf("%q took %v (timeout %v): not checked under wine, whose allocator is slow", q, took, timeout)
		case took > timeout+time.Second:
			t.Errorf("%q took %v (timeout %v)", q, took, timeout)
		}
	}
	// The pool still works after interrupts.
	if res, err := rd.Query(ctx, "SELECT count(*) FROM messages", timeout); err != nil || res.Rows[0][0] != int64(100) {
		t.Errorf("after the hostile statements: %+v, %v", res, err)
	}

	// Defence in depth: the authorizer alone, without the statement check, refuses writes.
	for _, q := range []string{
		"DELETE FROM messages", "UPDATE messages SET text = ''", "DROP TABLE lines", "CREATE TEMP TABLE x (y)",
		"ATTACH '" + outside + "' AS x", "PRAGMA user_version = 9", "PRAGMA writable_schema = 1", "BEGIN",
		"WITH x AS (SELECT 1) DELETE FROM messages", "REPLACE INTO messages (seq) VALUES (1)",
		"SELECT 1; DELETE FROM messages", "VACUUM INTO '" + outside + "'", "INSERT INTO messages_fts (messages_fts) VALUES ('rebuild')",
		"SELECT load_extension('x')", "ANALYZE", "REINDEX",
	} {
		if _, err := rd.db.ExecContext(ctx, q); err == nil || !strings.Contains(err.Error(), "authoriz") {
			t.Errorf("authorizer: %q = %v, want it refused by the authorizer", q, err)
		}
	}

	if err := rd.Close(); err != nil {
		t.Fatal(err)
	}
	after := hashFiles(t, files...)
	for _, f := range files {
		if before[f] != after[f] {
			t.Errorf("%s changed", filepath.Base(f))
		}
	}
	if exists(outside) {
		t.Errorf("%s was created", outside)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files appeared: %v", ents)
	}
	if after := sessionTimes(t, r); len(after) != len(sessionsBefore) {
		t.Errorf("session files before %v, after %v", sessionsBefore, after)
	}
}

func TestQueryTimeout(t *testing.T) {
	_, rd, _ := sqlSession(t)
	start := time.Now()
	_, err := rd.Query(context.Background(), "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c", 200*time.Millisecond)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "stopped after 200ms") {
		t.Errorf("err = %v, want stopped after the timeout", err)
	}
	if took < 200*time.Millisecond || took > time.Second {
		t.Errorf("took %v", took)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := rd.Query(ctx, "SELECT 1", time.Second); !errors.Is(err, context.Canceled) && (err == nil || !strings.Contains(err.Error(), "cancel")) {
		t.Errorf("canceled context: %v", err)
	}
}

func TestQueryResults(t *testing.T) {
	_, rd, _ := sqlSession(t)
	ctx := context.Background()
	long := strings.Repeat("é", 2500)
	for _, c := range []struct {
		sql       string
		cols      []string
		rows      int
		first     []any // first row, when set
		truncated bool
	}{
		{"SELECT count(*) FROM lines WHERE text LIKE '%row 1%'", []string{"count(*)"}, 1, []any{int64(22)}, false},
		{"SELECT replace(text, 'row', 'ROW') AS t FROM messages WHERE seq = 1", []string{"t"}, 1, nil, false},
		{"SELECT count(*) AS n FROM messages_fts WHERE messages_fts MATCH 'words AND message'", []string{"n"}, 1, []any{int64(100)}, false},
		{"SELECT rowid, bm25(lines_fts) FROM lines_fts WHERE lines_fts MATCH '\"row 7\"' ORDER BY rank LIMIT 1", []string{"rowid", "bm25(lines_fts)"}, 1, nil, false},
		{"WITH u AS (SELECT seq FROM messages WHERE role = 'user') SELECT count(*) FROM u", []string{"count(*)"}, 1, []any{int64(50)}, false},
		{"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 500) SELECT x FROM c", []string{"x"}, QueryMaxRows, []any{int64(1)}, true},
		{"SELECT kind, count(*) FROM events GROUP BY kind;", []string{"kind", "count(*)"}, 1, []any{"trim", int64(1)}, false},
		{"SELECT 1.5, NULL, 'x', x'41', x'ff00', 9e999, -9e999", []string{"1.5", "NULL", "'x'", "x'41'", "x'ff00'", "9e999", "-9e999"}, 1,
			[]any{1.5, nil, "x", "A", "<blob 2 bytes>", "Inf", "-Inf"}, false},
		{"SELECT '" + long + "' AS long", []string{"long"}, 1, []any{strings.Repeat("é", QueryMaxCellChars) + "…"}, true},
		{"SELECT a.seq, a.text FROM messages a, messages b LIMIT 300", []string{"seq", "text"}, -1, nil, true},
		{"SELECT 'DELETE; DROP' AS v -- DROP\n", []string{"v"}, 1, []any{"DELETE; DROP"}, false},
	} {
		t.Run(c.sql[:min(len(c.sql), 60)], func(t *testing.T) {
			res, err := rd.Query(ctx, c.sql, 0)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(res.Columns) != fmt.Sprint(c.cols) || res.Truncated != c.truncated {
				t.Errorf("columns %q truncated %v, want %q %v", res.Columns, res.Truncated, c.cols, c.truncated)
			}
			if c.rows >= 0 && len(res.Rows) != c.rows {
				t.Errorf("%d rows, want %d", len(res.Rows), c.rows)
			}
			if c.first != nil && (len(res.Rows) == 0 || fmt.Sprintf("%#v", res.Rows[0]) != fmt.Sprintf("%#v", c.first)) {
				t.Errorf("first row %#v, want %#v", res.Rows, c.first)
			}
			b, err := json.Marshal(res)
			if err != nil || utf8.RuneCount(b) > QueryMaxChars+100 {
				t.Errorf("result JSON %d bytes, %v", len(b), err)
			}
		})
	}

	t.Run("halved to fit", func(t *testing.T) {
		// 200 rows of ~1000 characters: 200 kB of JSON, halved to 25 rows (~25 kB).
		res, err := rd.Query(ctx, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 200) SELECT x, printf('%.*c', 1000, 'y') FROM c", 0)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Truncated || len(res.Rows) != 25 || resultChars(&res) > QueryMaxChars || res.Rows[24][0] != int64(25) {
			t.Errorf("%d rows (%d chars), truncated %v", len(res.Rows), resultChars(&res), res.Truncated)
		}
	})
	t.Run("empty result", func(t *testing.T) {
		res, err := rd.Query(ctx, "SELECT seq FROM messages WHERE 0", 0)
		if err != nil || len(res.Rows) != 0 || res.Rows == nil || res.Truncated || len(res.Columns) != 1 {
			t.Errorf("%+v, %v", res, err)
		}
	})
	t.Run("errors name the cause", func(t *testing.T) {
		_, err := rd.Query(ctx, "SELECT nope FROM messages", 0)
		if err == nil || !strings.Contains(err.Error(), "no such column") {
			t.Errorf("err = %v", err)
		}
	})
}

// TestQueryValueLimit: a statement cannot build a value far past what a cell returns. Before,
// printf built a 20 MB (and up to 64 MB) cell that was copied into Go and then cut to 2,000
// characters. A stored row over the limit still reads through the same pool afterwards: the
// limit is set back when the statement ends.
func TestQueryValueLimit(t *testing.T) {
	t.Parallel()
	r := newRoot(t)
	big := strings.Repeat("y", queryMaxValueLength+1)
	d := mustSession(t, r, "s")
	if _, err := d.SyncRows([]RowWrite{{Fingerprint: strings.Repeat("a", 32), Thread: "t", Role: "user", Kind: "text", Text: big, InContext: true}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	rd := mustReader(t, r, "s")
	ctx := context.Background()

	_, err := rd.Query(ctx, "SELECT printf('%.*c', 20000000, 'x') AS c", 0)
	if err == nil || !strings.Contains(err.Error(), "over 8 MB") {
		t.Fatalf("a 20 MB cell: %v, want the value-limit error", err)
	}
	res, err := rd.Query(ctx, "SELECT length(printf('%.*c', 100000, 'x')) AS n, substr(printf('%.*c', 100000, 'x'), 1, 3) AS head", 0)
	if err != nil || len(res.Rows) != 1 || res.Rows[0][0] != int64(100000) || res.Rows[0][1] != "xxx" {
		t.Fatalf("a 100 kB value: %+v, %v", res, err)
	}
	// the row over the SQL limit is still whole for the rest of the reader
	for range 3 { // every pooled connection the queries may have used
		rows, _, err := r.Rows(ctx, "s", 0, 1, len(big))
		if err != nil || len(rows) != 1 || len(rows[0].Text) != len(big) {
			t.Fatalf("Rows after the limited query: %d rows, %v", len(rows), err)
		}
	}
}
