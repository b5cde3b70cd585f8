package store

import (
	"database/sql"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// chain builds rows of one thread with chained fingerprints, all in context.
func chain(specs ...[4]string) []RowWrite {
	var rows []RowWrite
	prev := ""
	for _, s := range specs { // role, kind, name, text
		fp := Fingerprint(prev, s[0], s[1], s[2], s[3])
		thread := fp
		if len(rows) > 0 {
			thread = rows[0].Fingerprint
		}
		rows = append(rows, RowWrite{Fingerprint: fp, Thread: thread, Role: s[0], Kind: s[1], Name: s[2], Text: s[3], InContext: true})
		prev = fp
	}
	return rows
}

type storedRow struct {
	Seq                       int64
	Fingerprint, Thread, Role string
	Kind                      string
	Name                      sql.NullString
	Text                      string
	BlobID                    sql.NullString
	InContext                 int64
	TrimmedAtSeq              sql.NullInt64
	TrimmedAt                 sql.NullString
	CreatedAt                 string
}

func readRows(t *testing.T, db *sql.DB) []storedRow {
	t.Helper()
	rows, err := db.Query(`SELECT seq, fingerprint, thread, role, kind, name, text, blob_id, in_context, trimmed_at_seq, trimmed_at, created_at FROM messages ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []storedRow
	for rows.Next() {
		var r storedRow
		if err := rows.Scan(&r.Seq, &r.Fingerprint, &r.Thread, &r.Role, &r.Kind, &r.Name, &r.Text, &r.BlobID, &r.InContext, &r.TrimmedAtSeq, &r.TrimmedAt, &r.CreatedAt); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

type lineRow struct {
	Seq, No    int64
	Role, Text string
}

func readLines(t *testing.T, db *sql.DB) []lineRow {
	t.Helper()
	rows, err := db.Query(`SELECT message_seq, line_no, role, text FROM lines ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []lineRow
	for rows.Next() {
		var l lineRow
		if err := rows.Scan(&l.Seq, &l.No, &l.Role, &l.Text); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

func str(s string) sql.NullString { return sql.NullString{String: s, Valid: true} }
func num(n int64) sql.NullInt64   { return sql.NullInt64{Int64: n, Valid: true} }

var t0 = time.Date(2026, 10, 29, 19, 0, 0, 987654321, time.FixedZone("CEST", 2*3600)) // 17:00:00Z

// TestSyncRowsLinesAcrossBatches writes rows whose lines fill several insert batches
// (lineMaxBatch), one row's lines crossing from one batch into the next, a remainder below a
// batch and empty lines, and reads back every line in order with its seq, number and role.
func TestSyncRowsLinesAcrossBatches(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	counts := []int{lineMaxBatch - 3, 7, 2*lineMaxBatch + 1, 1, 37}
	var specs [][4]string
	for i, n := range counts {
		lines := make([]string, n)
		for l := range lines {
			if l%5 != 4 { // every fifth line empty
				lines[l] = fmt.Sprintf("row %d line %d", i, l+1)
			}
		}
		role := []string{"user", "tool"}[i%2]
		specs = append(specs, [4]string{role, "text", "", strings.Join(lines, "\n")})
	}
	rows := chain(specs...)
	if _, err := d.SyncRows(rows, t0); err != nil {
		t.Fatal(err)
	}
	var want []lineRow
	for i, row := range rows {
		for l, text := range strings.Split(row.Text, "\n") {
			want = append(want, lineRow{Seq: int64(i + 1), No: int64(l + 1), Role: row.Role, Text: text})
		}
	}
	got := readLines(t, otherConn(t, d.Path(), "mode=ro"))
	if len(got) != len(want) {
		t.Fatalf("%d lines stored, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestSyncRowsInserts(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	rows := chain(
		[4]string{"user", "text", "", "hello\nworld"},
		[4]string{"assistant", "tool_use", "Bash", `{"command":"ls"}`},
		[4]string{"tool", "tool_result", "Bash", "a\n"},
		[4]string{"assistant", "text", "", ""},
	)
	rows[2].BlobID = "0123456789abcdef"
	res, err := d.SyncRows(rows, t0)
	if err != nil {
		t.Fatal(err)
	}
	if res != (SyncResult{Inserted: 4}) {
		t.Errorf("result %+v, want 4 inserted", res)
	}
	ro := otherConn(t, d.Path(), "mode=ro")
	const ts = "2026-10-29T17:00:00Z"
	th := rows[0].Fingerprint
	want := []storedRow{
		{1, rows[0].Fingerprint, th, "user", "text", sql.NullString{}, "hello\nworld", sql.NullString{}, 1, sql.NullInt64{}, sql.NullString{}, ts},
		{2, rows[1].Fingerprint, th, "assistant", "tool_use", str("Bash"), `{"command":"ls"}`, sql.NullString{}, 1, sql.NullInt64{}, sql.NullString{}, ts},
		{3, rows[2].Fingerprint, th, "tool", "tool_result", str("Bash"), "a\n", str("0123456789abcdef"), 1, sql.NullInt64{}, sql.NullString{}, ts},
		{4, rows[3].Fingerprint, th, "assistant", "text", sql.NullString{}, "", sql.NullString{}, 1, sql.NullInt64{}, sql.NullString{}, ts},
	}
	if got := readRows(t, ro); !reflect.DeepEqual(got, want) {
		t.Errorf("messages:\n got %+v\nwant %+v", got, want)
	}
	wantLines := []lineRow{
		{1, 1, "user", "hello"}, {1, 2, "user", "world"},
		{2, 1, "assistant", `{"command":"ls"}`},
		{3, 1, "tool", "a"}, {3, 2, "tool", ""},
		{4, 1, "assistant", ""},
	}
	if got := readLines(t, ro); !reflect.DeepEqual(got, wantLines) {
		t.Errorf("lines:\n got %+v\nwant %+v", got, wantLines)
	}
	// The FTS triggers ran.
	if seq := queryInt(t, ro, "SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'world'"); seq != 1 {
		t.Errorf("messages_fts hit seq %d, want 1", seq)
	}
	if n := queryInt(t, ro, "SELECT count(*) FROM lines_fts WHERE lines_fts MATCH 'hello'"); n != 1 {
		t.Errorf("lines_fts hits %d, want 1", n)
	}

	// Resending the same rows, plus one new one, inserts only the new one with the next seq.
	more := append(rows, chain([4]string{"user", "text", "", "next"})...)
	more[4].Thread = th
	res, err = d.SyncRows(more, t0.Add(time.Minute))
	if err != nil || res != (SyncResult{Inserted: 1}) {
		t.Fatalf("second call = %+v, %v; want 1 inserted", res, err)
	}
	got := readRows(t, ro)
	if len(got) != 5 || got[4].Seq != 5 || got[4].Text != "next" || got[4].CreatedAt != "2026-10-29T17:01:00Z" {
		t.Errorf("after the second call: %+v", got)
	}
}

// TestSyncRowsNoChangeWritesNothing: while another connection holds the write lock, a call that
// has nothing to write returns at once; it would wait out the busy timeout and fail if it
// opened a transaction.
func TestSyncRowsNoChangeWritesNothing(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	rows := chain([4]string{"user", "text", "", "a"}, [4]string{"assistant", "text", "", "b"})
	if _, err := d.SyncRows(rows, t0); err != nil {
		t.Fatal(err)
	}
	walBefore, err := os.Stat(d.Path() + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	conn := holdWriteLock(t, d.Path(), "_busy_timeout=0")
	res, err := d.SyncRows(rows, t0)
	if err != nil || res != (SyncResult{}) {
		t.Errorf("no-op SyncRows under a foreign write lock = %+v, %v", res, err)
	}
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	walAfter, err := os.Stat(d.Path() + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if walAfter.Size() != walBefore.Size() {
		t.Errorf("WAL grew from %d to %d bytes on a no-op call", walBefore.Size(), walAfter.Size())
	}
}

func TestSyncRowsInContext(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	rows := chain(
		[4]string{"user", "text", "", "first"},
		[4]string{"assistant", "text", "", "reply"},
		[4]string{"user", "text", "", "cut turn"},
		[4]string{"assistant", "text", "", "answer"},
	)
	if _, err := d.SyncRows(rows, t0); err != nil {
		t.Fatal(err)
	}
	ro := otherConn(t, d.Path(), "mode=ro")
	state := func() [][3]any {
		var out [][3]any
		for _, s := range readRows(t, ro) {
			out = append(out, [3]any{s.InContext, s.TrimmedAtSeq, s.TrimmedAt})
		}
		return out
	}
	in := [3]any{int64(1), sql.NullInt64{}, sql.NullString{}}
	t1 := t0.Add(time.Hour)
	const ts1 = "2026-10-29T18:00:00Z"

	// Trim rows 1-2 at the cut turn (row 3).
	trimmed := append([]RowWrite(nil), rows...)
	for i := 0; i < 2; i++ {
		trimmed[i].InContext = false
		trimmed[i].CutFingerprint = rows[2].Fingerprint
	}
	res, err := d.SyncRows(trimmed, t1)
	if err != nil || res != (SyncResult{Updated: 2}) {
		t.Fatalf("trim = %+v, %v; want 2 updated", res, err)
	}
	out := [3]any{int64(0), num(3), str(ts1)}
	if got, want := state(), [][3]any{out, out, in, in}; !reflect.DeepEqual(got, want) {
		t.Errorf("after trim:\n got %v\nwant %v", got, want)
	}

	// The same request again moves nothing; trimmed_at keeps the first trim's time.
	if res, err := d.SyncRows(trimmed, t1.Add(time.Hour)); err != nil || res != (SyncResult{}) {
		t.Errorf("repeat = %+v, %v", res, err)
	}
	// A request that no longer carries the rows leaves them as they are.
	if res, err := d.SyncRows(rows[2:], t1.Add(time.Hour)); err != nil || res != (SyncResult{}) {
		t.Errorf("subset = %+v, %v", res, err)
	}
	if got, want := state(), [][3]any{out, out, in, in}; !reflect.DeepEqual(got, want) {
		t.Errorf("after repeat and subset:\n got %v\nwant %v", got, want)
	}

	// Back in context: both trim columns cleared.
	if res, err := d.SyncRows(rows, t1); err != nil || res != (SyncResult{Updated: 2}) {
		t.Fatalf("restore = %+v, %v", res, err)
	}
	if got, want := state(), [][3]any{in, in, in, in}; !reflect.DeepEqual(got, want) {
		t.Errorf("after restore:\n got %v\nwant %v", got, want)
	}

	// A compaction (no cut turn) and an unknown cut both leave trimmed_at_seq NULL.
	compacted := append([]RowWrite(nil), rows...)
	for i := range compacted {
		compacted[i].InContext = false
	}
	compacted[0].CutFingerprint = "ffffffffffffffffffffffffffffffff"
	if res, err := d.SyncRows(compacted, t1); err != nil || res != (SyncResult{Updated: 4}) {
		t.Fatalf("compaction = %+v, %v", res, err)
	}
	noCut := [3]any{int64(0), sql.NullInt64{}, str(ts1)}
	if got, want := state(), [][3]any{noCut, noCut, noCut, noCut}; !reflect.DeepEqual(got, want) {
		t.Errorf("after compaction:\n got %v\nwant %v", got, want)
	}
}

func TestSeqRuns(t *testing.T) {
	for _, tc := range []struct {
		name string
		seqs []int64
		runs [][2]int64
		rest []int64
	}{
		{"empty", nil, nil, nil},
		{"short run", []int64{3, 1, 2}, nil, []int64{1, 2, 3}},
		{"one run", []int64{12, 5, 6, 7, 8, 9, 10, 11}, [][2]int64{{5, 12}}, nil},
		{"run and strays", []int64{1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 20}, [][2]int64{{3, 11}}, []int64{1, 13, 20}},
		{"two runs split by a hole", []int64{1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17}, [][2]int64{{1, 8}, {10, 17}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs, rest := seqRuns(append([]int64(nil), tc.seqs...))
			if !reflect.DeepEqual(runs, tc.runs) || !reflect.DeepEqual(rest, tc.rest) {
				t.Errorf("seqRuns(%v) = %v, %v; want %v, %v", tc.seqs, runs, rest, tc.runs, tc.rest)
			}
		})
	}
}

// TestSyncRowsTrimRuns: a cut that moves long runs of rows out of context (updated as seq
// ranges) leaves a stored row between them that the request does not carry as it was, and
// moves the short stretches too; bringing them back clears both trim columns.
func TestSyncRowsTrimRuns(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	var specs [][4]string
	for i := range 40 {
		specs = append(specs, [4]string{"user", "text", "", fmt.Sprintf("row %d", i+1)})
	}
	rows := chain(specs...)
	if _, err := d.SyncRows(rows, t0); err != nil {
		t.Fatal(err)
	}
	// The request leaves out row 20 (seq 20) and row 25; it trims rows 2-38 (a run of 18,
	// one of 4 and one of 13) at the cut row 39.
	var req []RowWrite
	for i, w := range rows {
		if i == 19 || i == 24 {
			continue
		}
		if i >= 1 && i < 38 {
			w.InContext, w.CutFingerprint = false, rows[38].Fingerprint
		}
		req = append(req, w)
	}
	t1 := t0.Add(time.Hour)
	if res, err := d.SyncRows(req, t1); err != nil || res != (SyncResult{Updated: 35}) {
		t.Fatalf("trim = %+v, %v; want 35 updated", res, err)
	}
	ro := otherConn(t, d.Path(), "mode=ro")
	in := [3]any{int64(1), sql.NullInt64{}, sql.NullString{}}
	out := [3]any{int64(0), num(39), str("2026-10-29T18:00:00Z")}
	check := func(when string, want func(seq int64) [3]any) {
		t.Helper()
		for _, s := range readRows(t, ro) {
			if got := [3]any{s.InContext, s.TrimmedAtSeq, s.TrimmedAt}; !reflect.DeepEqual(got, want(s.Seq)) {
				t.Errorf("%s: seq %d = %v, want %v", when, s.Seq, got, want(s.Seq))
			}
		}
	}
	check("after the trim", func(seq int64) [3]any {
		if seq >= 2 && seq <= 38 && seq != 20 && seq != 25 {
			return out
		}
		return in
	})
	for i := range req {
		req[i].InContext, req[i].CutFingerprint = true, ""
	}
	if res, err := d.SyncRows(req, t1); err != nil || res != (SyncResult{Updated: 35}) {
		t.Fatalf("restore = %+v, %v; want 35 updated", res, err)
	}
	check("after the restore", func(int64) [3]any { return in })
}

// TestSyncRowsNewTrimmedRows: rows first seen already out of context get trimmed_at_seq from a
// cut row inserted in the same call, after them.
func TestSyncRowsNewTrimmedRows(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	rows := chain(
		[4]string{"user", "text", "", "old 1"},
		[4]string{"assistant", "text", "", "old 2"},
		[4]string{"user", "text", "", "cut"},
		[4]string{"assistant", "text", "", "after"},
	)
	rows[0].InContext, rows[0].CutFingerprint = false, rows[2].Fingerprint
	rows[1].InContext, rows[1].CutFingerprint = false, rows[2].Fingerprint
	rows[3].InContext, rows[3].CutFingerprint = false, rows[0].Fingerprint // cut inserted earlier in the call
	if res, err := d.SyncRows(rows, t0); err != nil || res != (SyncResult{Inserted: 4}) {
		t.Fatalf("SyncRows = %+v, %v", res, err)
	}
	got := readRows(t, otherConn(t, d.Path(), "mode=ro"))
	wantSeq := []sql.NullInt64{num(3), num(3), {}, num(1)}
	for i, g := range got {
		if g.TrimmedAtSeq != wantSeq[i] {
			t.Errorf("row %d trimmed_at_seq = %v, want %v", i+1, g.TrimmedAtSeq, wantSeq[i])
		}
		wantIn := int64(1)
		if !rows[i].InContext {
			wantIn = 0
		}
		if g.InContext != wantIn || (wantIn == 0) != g.TrimmedAt.Valid {
			t.Errorf("row %d in_context %d trimmed_at %v", i+1, g.InContext, g.TrimmedAt)
		}
	}
}

func TestSyncRowsDuplicatesAndErrors(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	rows := chain([4]string{"user", "text", "", "same"})
	res, err := d.SyncRows([]RowWrite{rows[0], rows[0]}, t0)
	if err != nil || res != (SyncResult{Inserted: 1}) {
		t.Errorf("duplicate in one call = %+v, %v; want 1 inserted", res, err)
	}
	bad := chain([4]string{"user", "text", "", "new"})
	bad = append(bad, RowWrite{Role: "user", Kind: "text", Text: "no fingerprint"})
	if _, err := d.SyncRows(bad, t0); err == nil {
		t.Error("a row without fingerprint was accepted")
	}
	ro := otherConn(t, d.Path(), "mode=ro")
	if n := queryInt(t, ro, "SELECT count(*) FROM messages"); n != 1 {
		t.Errorf("messages = %d after the rejected call, want 1", n)
	}
}

// TestReaderSeesWriterRows: a read-only connection (the MCP tools) reads rows while the writer
// keeps its connection open (WAL).
func TestReaderSeesWriterRows(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	ro := otherConn(t, d.Path(), "mode=ro")
	if n := queryInt(t, ro, "SELECT count(*) FROM messages"); n != 0 {
		t.Fatalf("count = %d", n)
	}
	rows := chain([4]string{"user", "text", "", "one"}, [4]string{"assistant", "text", "", "two"})
	if _, err := d.SyncRows(rows[:1], t0); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, ro, "SELECT count(*) FROM messages"); n != 1 {
		t.Errorf("reader sees %d rows, want 1", n)
	}
	if _, err := d.SyncRows(rows, t0); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, ro, "SELECT count(*) FROM messages"); n != 2 {
		t.Errorf("reader sees %d rows, want 2", n)
	}
	if _, err := ro.Exec("INSERT INTO events (at, kind, version) VALUES ('x', 'y', 'z')"); err == nil {
		t.Error("the read-only connection could write")
	}
}

// TestExternalWriteReloadsIndex: rows committed by another connection reach the index through
// PRAGMA data_version, so SyncRows neither inserts them again nor misses a changed flag.
func TestExternalWriteReloadsIndex(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	rows := chain([4]string{"user", "text", "", "mine"}, [4]string{"assistant", "text", "", "theirs"}, [4]string{"user", "text", "", "later"})
	if _, err := d.SyncRows(rows[:1], t0); err != nil {
		t.Fatal(err)
	}
	other := otherConn(t, d.Path(), "_busy_timeout=1000")
	if _, err := other.Exec(`INSERT INTO messages (fingerprint, thread, role, kind, text, created_at) VALUES (?, ?, 'assistant', 'text', 'theirs', 'x')`,
		rows[1].Fingerprint, rows[1].Thread); err != nil {
		t.Fatal(err)
	}
	res, err := d.SyncRows(rows[:2], t0)
	if err != nil || res != (SyncResult{}) {
		t.Errorf("after an external insert: %+v, %v; want nothing written", res, err)
	}
	if _, err := other.Exec(`UPDATE messages SET in_context = 0, trimmed_at = 'x' WHERE seq = 1`); err != nil {
		t.Fatal(err)
	}
	res, err = d.SyncRows(rows, t0)
	if err != nil || res != (SyncResult{Inserted: 1, Updated: 1}) {
		t.Errorf("after an external update: %+v, %v; want 1 inserted, 1 updated", res, err)
	}
	got := readRows(t, other)
	if len(got) != 3 || got[0].InContext != 1 || got[0].TrimmedAt.Valid || got[2].Seq != 3 {
		t.Errorf("rows: %+v", got)
	}
}

// TestSyncRowsLocked: a write lock held past the 1 s busy timeout fails the call; nothing is
// written and the index is not polluted, so the next call inserts the row.
func TestSyncRowsLocked(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	conn := holdWriteLock(t, d.Path(), "")
	rows := chain([4]string{"user", "text", "", "blocked"})
	start := time.Now()
	_, err := d.SyncRows(rows, t0)
	waited := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "locked") {
		t.Errorf("SyncRows under a foreign write lock = %v, want database is locked", err)
	}
	if waited < 900*time.Millisecond {
		t.Errorf("gave up after %v, want the 1 s busy timeout", waited)
	}
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if res, err := d.SyncRows(rows, t0); err != nil || res != (SyncResult{Inserted: 1}) {
		t.Errorf("after the lock: %+v, %v; want 1 inserted", res, err)
	}
}

func TestSessionsConcurrent(t *testing.T) {
	r := newRoot(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("s%d", g%3)
			var rows []RowWrite
			prev := ""
			for i := 0; i < 20; i++ {
				text := fmt.Sprintf("goroutine %d row %d", g, i)
				fp := Fingerprint(prev, "user", "text", "", text)
				rows = append(rows, RowWrite{Fingerprint: fp, Thread: "t", Role: "user", Kind: "text", Text: text, InContext: true})
				prev = fp
				d, err := r.Session(sid)
				if err == nil {
					_, err = d.SyncRows(rows, time.Now())
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := int64(0)
	for i := 0; i < 3; i++ {
		total += queryInt(t, otherConn(t, mustSession(t, r, fmt.Sprintf("s%d", i)).Path(), "mode=ro"), "SELECT count(*) FROM messages")
	}
	if total != 8*20 {
		t.Errorf("stored %d rows, want %d", total, 8*20)
	}
}

// TestSyncRowsManyRows crosses the multi-row INSERT batch sizes: seq follows the order given,
// lines keep (message, line) order in their ids, and a trimmed row points at a cut row that
// went in with a later statement.
func TestSyncRowsManyRows(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	if _, err := d.SyncRows(chain([4]string{"user", "text", "", "already stored"}), t0); err != nil {
		t.Fatal(err)
	}
	var specs [][4]string
	wantLines := 0
	for i := 0; i < 150; i++ {
		n := i%7 + 1
		if i == 75 {
			n = 700
		}
		var b strings.Builder
		for j := 1; j <= n; j++ {
			if j > 1 {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "row %d line %d", i, j)
		}
		specs = append(specs, [4]string{"user", "text", "", b.String()})
		wantLines += n
	}
	rows := chain(specs...)
	rows[0].InContext, rows[0].CutFingerprint = false, rows[140].Fingerprint
	res, err := d.SyncRows(rows, t0)
	if err != nil || res != (SyncResult{Inserted: 150}) {
		t.Fatalf("SyncRows = %+v, %v", res, err)
	}
	ro := otherConn(t, d.Path(), "mode=ro")
	got := readRows(t, ro)
	if len(got) != 151 {
		t.Fatalf("%d messages, want 151", len(got))
	}
	for i, row := range rows {
		if g := got[i+1]; g.Seq != int64(i+2) || g.Fingerprint != row.Fingerprint || g.Text != row.Text {
			t.Fatalf("seq %d holds %q, want row %d", g.Seq, g.Text, i)
		}
	}
	if got[1].TrimmedAtSeq != num(142) {
		t.Errorf("trimmed_at_seq = %v, want 142 (row 140)", got[1].TrimmedAtSeq)
	}
	lines := readLines(t, ro)
	if len(lines) != wantLines+1 {
		t.Fatalf("%d lines, want %d", len(lines), wantLines+1)
	}
	for k := 1; k < len(lines); k++ {
		prev, cur := lines[k-1], lines[k]
		if !(cur.Seq == prev.Seq && cur.No == prev.No+1 || cur.Seq == prev.Seq+1 && cur.No == 1) {
			t.Fatalf("line ids out of order at %d: %+v after %+v", k, cur, prev)
		}
		if want := fmt.Sprintf("row %d line %d", cur.Seq-2, cur.No); cur.Seq > 1 && cur.Text != want {
			t.Fatalf("line %+v, want text %q", cur, want)
		}
	}
}
