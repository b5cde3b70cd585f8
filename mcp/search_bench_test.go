package mcp

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	_ "github.com/mattn/go-sqlite3" // the bare statements' connection, as a client of the file would open it

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/storetest"
)

// benchToolRows is a 50,000-row session (user, assistant and tool rows of 1–6 lines) where
// the word "needle" is in every hundredth row, about 500 rows.
func benchToolRows() []storetest.Row {
	rng := rand.New(rand.NewPCG(7, 8))
	roles := []struct{ role, kind, name string }{{"user", "text", ""}, {"assistant", "tool_use", "Bash"}, {"tool", "tool_result", "Bash"}}
	rows := make([]storetest.Row, 50000)
	for i := range rows {
		var b strings.Builder
		for l := range 1 + rng.IntN(6) {
			if l > 0 {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "step %d of the build: w%d and w%d checked, result %d", i, rng.IntN(3000), rng.IntN(3000), rng.IntN(1000))
		}
		if i%100 == 42 {
			b.WriteString(" needle")
		}
		k := roles[i%3]
		rows[i] = storetest.Row{Role: k.role, Kind: k.kind, Name: k.name, Text: b.String(), Trimmed: i < 20000}
	}
	return rows
}

// BenchmarkSearchToolVsStatements: one word matching about 500 of 50,000 rows, searched
// through the smart_compact_search handler (mcp-go's server, called in process with its
// in-process client: argument parsing, session resolution, the store's search, JSON) and by
// the same SQLite statements the store's search runs, on a connection kept open (the counts,
// the ranking and one read per hit), one after the other latencySamples times per iteration;
// it reports both p50s in milliseconds and their ratio, the aim's (≤ 1.5).
func BenchmarkSearchToolVsStatements(b *testing.B) {
	const latencySamples = 200
	base := b.TempDir()
	dir, ws := filepath.Join(base, "context"), filepath.Join(base, "repo")
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o700); err != nil {
		b.Fatal(err)
	}
	writer := storetest.OpenRootAt(b, dir)
	start := time.Now()
	storetest.SyncRows(b, writer, "bench", fixedNow, benchToolRows())
	b.Logf("50000 rows in %v", time.Since(start).Round(time.Millisecond))
	srv := New(storetest.OpenRootAt(b, dir), Options{Workspace: ws, Now: func() time.Time { return fixedNow }, Version: "bench"})
	ctx := context.Background()

	c, err := client.NewInProcessClient(srv.mcp)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	init := mcpgo.InitializeRequest{}
	init.Params.ClientInfo = mcpgo.Implementation{Name: "bench", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		b.Fatal(err)
	}
	rd, err := writer.OpenReader("bench")
	if err != nil {
		b.Fatal(err)
	}
	path := rd.Path()
	rd.Close()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("PRAGMA mmap_size = 1073741824"); err != nil { // as the store's readers read
		b.Fatal(err)
	}
	ss := prepareSearch(b, db)
	want, err := ss.run(ctx, `"needle"`)
	if err != nil {
		b.Fatal(err)
	}
	statements := func() error { _, err := ss.run(ctx, `"needle"`); return err }
	call := func() (*mcpgo.CallToolResult, error) {
		req := mcpgo.CallToolRequest{}
		req.Params.Name = ToolSearch
		req.Params.Arguments = map[string]any{"session_id": "bench", "query": "needle"}
		return c.CallTool(ctx, req)
	}
	// The answer is checked once, outside the timed calls (decoding it is the model's side).
	res, err := call()
	if err != nil {
		b.Fatal(err)
	}
	var out struct {
		TotalMatches int `json:"total_matches"`
	}
	if tc, ok := res.Content[0].(mcpgo.TextContent); !ok || res.IsError || json.Unmarshal([]byte(tc.Text), &out) != nil || out.TotalMatches != want {
		b.Fatalf("answer %+v, want %d matches", res.Content, want)
	}
	tool := func() error {
		res, err := call()
		if err == nil && (res.IsError || len(res.Content) != 1) {
			err = fmt.Errorf("answer %+v", res.Content)
		}
		return err
	}
	// The store's search alone, as the handler runs it (a pooled reader per call).
	search := func() error {
		rd, err := srv.root.OpenReader("bench")
		if err != nil {
			return err
		}
		defer rd.Close()
		res, err := rd.Search(ctx, store.SearchOptions{Query: "needle", Roles: []string{"user", "tool"}})
		if err == nil && res.TotalMatches != want {
			err = fmt.Errorf("store search: %d matches, want %d", res.TotalMatches, want)
		}
		return err
	}
	// Interleaved: a tool call, the store's search, then the statements, so all see the same
	// machine.
	var dt, dr, ds []time.Duration
	for b.Loop() {
		for range latencySamples {
			for _, run := range []struct {
				f  func() error
				to *[]time.Duration
			}{{tool, &dt}, {search, &dr}, {statements, &ds}} {
				t := time.Now()
				if err := run.f(); err != nil {
					b.Fatal(err)
				}
				*run.to = append(*run.to, time.Since(t))
			}
		}
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2]) / float64(time.Millisecond)
	}
	tp, sp := p50(dt), p50(ds)
	b.ReportMetric(tp, "tool-p50-ms")
	b.ReportMetric(sp, "statements-p50-ms")
	b.ReportMetric(p50(dr), "store-p50-ms")
	b.ReportMetric(tp/sp, "tool/statements")
	b.ReportMetric(float64(want), "matches")
}

// searchStatements are the statements of store's word search for one FTS5 string under the
// default roles (user, tool), prepared once: both counts, the ranking of the default 8 hits,
// and each hit's row with its highlight.
type searchStatements struct{ total, lines, rank, hit *sql.Stmt }

func prepareSearch(b *testing.B, db *sql.DB) *searchStatements {
	b.Helper()
	var ss searchStatements
	for _, p := range []struct {
		st **sql.Stmt
		q  string
	}{
		{&ss.total, "SELECT count(*) FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid WHERE messages_fts MATCH ? AND m.role IN (?, ?)"},
		{&ss.lines, "SELECT count(*) FROM lines_fts JOIN lines l ON l.id = lines_fts.rowid WHERE lines_fts MATCH ? AND l.role IN (?, ?)"},
		{&ss.rank, "SELECT messages_fts.rowid, 1 AS matched, bm25(messages_fts) AS score FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid " +
			"WHERE messages_fts MATCH ?1 AND m.role IN (?2, ?3) ORDER BY matched DESC, score, messages_fts.rowid DESC LIMIT ?4"},
		{&ss.hit, "SELECT m.thread, m.role, m.kind, coalesce(m.name, ''), m.in_context, coalesce(m.blob_id, ''), m.text, " +
			"highlight(messages_fts, 0, char(1), char(2)) FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid " +
			"WHERE messages_fts MATCH ? AND messages_fts.rowid = ?"},
	} {
		st, err := db.Prepare(p.q)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		*p.st = st
	}
	return &ss
}

// run runs the statements for match and returns the row count.
func (ss *searchStatements) run(ctx context.Context, match string) (int, error) {
	var total, lines int
	if err := ss.total.QueryRowContext(ctx, match, "user", "tool").Scan(&total); err != nil {
		return 0, err
	}
	if err := ss.lines.QueryRowContext(ctx, match, "user", "tool").Scan(&lines); err != nil {
		return 0, err
	}
	rows, err := ss.rank.QueryContext(ctx, match, "user", "tool", store.DefaultSearchLimit)
	if err != nil {
		return 0, err
	}
	var seqs []int64
	for rows.Next() {
		var seq, matched int64
		var score float64
		if err := rows.Scan(&seq, &matched, &score); err != nil {
			rows.Close()
			return 0, err
		}
		seqs = append(seqs, seq)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	for _, seq := range seqs {
		var thread, role, kind, name, blob, text, marked string
		var inContext bool
		if err := ss.hit.QueryRowContext(ctx, match, seq).Scan(&thread, &role, &kind, &name, &inContext, &blob, &text, &marked); err != nil {
			return 0, err
		}
	}
	if lines == 0 || len(seqs) == 0 {
		return 0, fmt.Errorf("%s: %d rows, %d lines, %d hits", match, total, lines, len(seqs))
	}
	return total, nil
}
