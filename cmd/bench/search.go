package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

// Search at size (issue 18): one session of plan.Rows rows with a plan.Dim-dim vector each,
// built once per run; hybrid, pattern (literal and class) and lexical search on it through
// one store.Reader kept open, as the recall tools' reader pool keeps one; and the lexical
// search of a word in about plan.Matching rows through `smarter-compact mcp` (stdio JSON-RPC)
// against the same SQLite statements on a plain read-only connection.

type searchPlan struct {
	Rows     int
	Dim      int
	Matching int // rows holding the planted word of the MCP comparison
	Searches int // of each kind
	Seed     uint64
}

// searchKind is one kind of search: its first call (the reader loads its indexes) and the
// percentiles of the rest.
type searchKind struct {
	Name          string
	First         float64 // ms
	P50, P99      float64 // ms
	N             int
	Matches       int // total matches of the last call
	TimedOut      int
	Example, Note string
}

type searchResult struct {
	Rows, Lines, Dim     int
	BuildRows, BuildVecs time.Duration
	Hybrid, Literal      searchKind
	Class, Lexical       searchKind
	MCP, SQL             searchKind // the planted word through mcp, and its statements
	MCPWord              string
}

const (
	searchModel  = "bench-embed"
	searchSID    = "bench-search"
	plantedWord  = "quasarflux"
	plantedValue = "KEY-7 = 0x5eed"
)

// searchRowText is scaleRowText with the planted strings: the word of the MCP comparison in
// every step-th row (tool results only, so the default roles see them all), the literal of the
// pattern search in every 1000th.
func searchRowText(r *rand.Rand, i, step int) string {
	t := scaleRowText(r, i)
	if i%step == 2 {
		t += " " + plantedWord
	}
	if i%1000 == 500 {
		t += " " + plantedValue
	}
	return t
}

// buildSearchSession writes the rows (SyncRows calls of 500) and then a random vector for
// every row (PutVectors calls of 5000), timing each half.
func buildSearchSession(root *store.Root, pl searchPlan, res *searchResult) error {
	r := rand.New(rand.NewPCG(pl.Seed, 18))
	step := 3 * max(1, (pl.Rows/max(pl.Matching, 1)+2)/3) // a multiple of 3: i%step == 2 is a tool row
	db, err := root.Session(searchSID)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := syncConversationRows(db, pl.Rows, 500, func(i int) string { return searchRowText(r, i, step) },
		func(i int) bool { return i > pl.Rows/3 }, time.Now); err != nil {
		return err
	}
	res.BuildRows = time.Since(start)
	start = time.Now()
	seqs, err := db.PendingVectors(searchModel)
	if err != nil {
		return err
	}
	for i := 0; i < len(seqs); i += 5000 {
		vecs := make(map[int64][]float32, 5000)
		for _, s := range seqs[i:min(i+5000, len(seqs))] {
			vecs[s] = randomVector(r, pl.Dim)
		}
		if err := db.PutVectors(searchModel, vecs); err != nil {
			return err
		}
	}
	res.BuildVecs = time.Since(start)
	res.Rows, res.Dim = pl.Rows, pl.Dim
	return nil
}

func randomVector(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = 2*r.Float32() - 1
	}
	return v
}

// timeKind runs call n+1 times: the first call apart, then n timed ones.
func timeKind(k *searchKind, n int, call func(i int) (matches int, timedOut bool, err error)) error {
	var ds []float64
	for i := 0; i <= n; i++ {
		start := time.Now()
		m, to, err := call(i)
		if err != nil {
			return fmt.Errorf("%s: %w", k.Name, err)
		}
		d := ms(time.Since(start))
		if to {
			k.TimedOut++
		}
		k.Matches = m
		if i == 0 {
			k.First = d
			continue
		}
		ds = append(ds, d)
	}
	k.P50, k.P99, k.N = pct(ds, 50), pct(ds, 99), len(ds)
	return nil
}

// runSearch builds the session and measures every kind of search on it.
func runSearch(ctx context.Context, pl searchPlan, bin, tmp string, logf func(string, ...any)) (*searchResult, error) {
	res := &searchResult{MCPWord: plantedWord}
	state, err := os.MkdirTemp(tmp, "search-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(state)
	root, err := store.Open(filepath.Join(state, "context"))
	if err != nil {
		return nil, err
	}
	if err := buildSearchSession(root, pl, res); err != nil {
		root.Close()
		return nil, err
	}
	if err := root.Close(); err != nil { // checkpoints the WAL away
		return nil, err
	}
	logf("search: built %d rows in %s, %d vectors of %d dims in %s", pl.Rows, res.BuildRows.Round(time.Millisecond), pl.Rows, pl.Dim, res.BuildVecs.Round(time.Millisecond))
	if root, err = store.Open(filepath.Join(state, "context")); err != nil {
		return nil, err
	}
	defer root.Close()
	if err := storeSearches(ctx, root, pl, res); err != nil {
		return nil, err
	}
	dbPath := filepath.Join(state, "context", "sessions", searchSID+".db")
	if err := mcpVersusSQL(ctx, bin, state, dbPath, pl.Searches, res); err != nil {
		return nil, err
	}
	for _, k := range []searchKind{res.Hybrid, res.Literal, res.Class, res.Lexical, res.MCP, res.SQL} {
		logf("search %s: first %.2f ms, p50 %.2f ms, p99 %.2f ms, %d matches", k.Name, k.First, k.P50, k.P99, k.Matches)
	}
	return res, nil
}

// storeSearches times hybrid, pattern and lexical searches on one reader kept open.
func storeSearches(ctx context.Context, root *store.Root, pl searchPlan, res *searchResult) error {
	rd, err := root.OpenReader(searchSID)
	if err != nil {
		return err
	}
	defer rd.Close()
	r := rand.New(rand.NewPCG(pl.Seed, 19))
	qv := randomVector(r, pl.Dim)
	query := func(i int) string {
		row := 3*((i*7919)%max(pl.Rows/3, 1)) + 2
		return fmt.Sprintf("r-%08x-1 %s", row, services[i%len(services)])
	}
	search := func(o store.SearchOptions) (int, bool, error) {
		sr, err := rd.Search(ctx, o)
		if err != nil {
			return 0, false, err
		}
		if sr.TotalMatches == 0 && !sr.TimedOut {
			return 0, false, fmt.Errorf("%v %v found nothing", o.Query, o.Pattern)
		}
		return sr.TotalMatches, sr.TimedOut, nil
	}
	class := regexp.MustCompile(`user=u-1234\d latency_ms=\d+`)
	literal := regexp.MustCompile(regexp.QuoteMeta(plantedValue))
	res.Hybrid = searchKind{Name: "hybrid", Example: "query `" + query(1) + "` + a random 768-dim query vector"}
	res.Literal = searchKind{Name: "pattern, literal", Example: "`" + literal.String() + "`"}
	res.Class = searchKind{Name: "pattern, class", Example: "`" + class.String() + "`"}
	res.Lexical = searchKind{Name: "lexical", Example: "query `" + query(1) + "`"}
	for _, x := range []struct {
		k *searchKind
		o func(i int) store.SearchOptions
	}{
		{&res.Hybrid, func(i int) store.SearchOptions {
			return store.SearchOptions{Query: query(i), QueryVector: qv, VectorModel: searchModel}
		}},
		{&res.Literal, func(int) store.SearchOptions { return store.SearchOptions{Pattern: literal} }},
		{&res.Class, func(int) store.SearchOptions { return store.SearchOptions{Pattern: class} }},
		{&res.Lexical, func(i int) store.SearchOptions { return store.SearchOptions{Query: query(i)} }},
	} {
		if err := timeKind(x.k, pl.Searches, func(i int) (int, bool, error) { return search(x.o(i)) }); err != nil {
			return err
		}
	}
	return nil
}

// mcpVersusSQL times smart_compact_search for the planted word through `bin mcp` (one
// process, calls back to back over stdio) and the statements store's word search runs for
// it (the match count, the line count, the ranked hits, each hit's row and highlight) on a
// plain read-only SQLite connection kept open.
func mcpVersusSQL(ctx context.Context, bin, state, dbPath string, n int, res *searchResult) error {
	cl, err := startMCP(ctx, bin, state)
	if err != nil {
		return err
	}
	defer cl.close()
	args := map[string]any{"query": plantedWord, "session_id": searchSID, "mode": "lexical"}
	res.MCP = searchKind{Name: "lexical through mcp", Example: "smart_compact_search `" + mustJSON(args) + "`"}
	if err := timeKind(&res.MCP, n, func(int) (int, bool, error) {
		var out struct {
			TotalMatches int `json:"total_matches"`
			Results      []json.RawMessage
		}
		if err := cl.callTool("smart_compact_search", args, &out); err != nil {
			return 0, false, err
		}
		if out.TotalMatches == 0 || len(out.Results) == 0 {
			return 0, false, errors.New("smart_compact_search found nothing")
		}
		return out.TotalMatches, false, nil
	}); err != nil {
		return err
	}

	db, err := sql.Open("sqlite3", "file:"+dbPath+"?mode=ro&immutable=1")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	word := `"` + plantedWord + `"`
	res.SQL = searchKind{Name: "lexical, the same statements", Example: "count, line count, ranked hits (limit 8), the hits' rows"}
	return timeKind(&res.SQL, n, func(int) (int, bool, error) {
		return wordSearchSQL(ctx, db, word)
	})
}

// wordSearchSQL runs the statements of store's word search (store/search_query.go) for one
// FTS5 string with the recall tool's default roles (user, tool) and limit (8).
func wordSearchSQL(ctx context.Context, db *sql.DB, word string) (int, bool, error) {
	var total, lines int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid WHERE messages_fts MATCH ? AND m.role IN (?, ?)", word, "user", "tool").Scan(&total); err != nil {
		return 0, false, err
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM lines_fts JOIN lines l ON l.id = lines_fts.rowid WHERE lines_fts MATCH ? AND l.role IN (?, ?)", word, "user", "tool").Scan(&lines); err != nil {
		return 0, false, err
	}
	rows, err := db.QueryContext(ctx, "SELECT messages_fts.rowid, 1 AS matched, bm25(messages_fts) AS score FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid WHERE messages_fts MATCH ?1 AND m.role IN (?2, ?3) ORDER BY matched DESC, score, messages_fts.rowid DESC LIMIT ?4", word, "user", "tool", 8)
	if err != nil {
		return 0, false, err
	}
	var seqs []int64
	for rows.Next() {
		var seq, matched int64
		var score float64
		if err := rows.Scan(&seq, &matched, &score); err != nil {
			rows.Close()
			return 0, false, err
		}
		seqs = append(seqs, seq)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, false, err
	}
	st, err := db.PrepareContext(ctx, "SELECT m.thread, m.role, m.kind, coalesce(m.name, ''), m.in_context, coalesce(m.blob_id, ''), m.text, highlight(messages_fts, 0, char(1), char(2)) FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid WHERE messages_fts MATCH ? AND messages_fts.rowid = ?")
	if err != nil {
		return 0, false, err
	}
	defer st.Close()
	for _, seq := range seqs {
		var thread, role, kind, name, blob, text, marked string
		var inContext bool
		if err := st.QueryRowContext(ctx, word, seq).Scan(&thread, &role, &kind, &name, &inContext, &blob, &text, &marked); err != nil {
			return 0, false, err
		}
	}
	if total == 0 || len(seqs) == 0 {
		return 0, false, errors.New("the statements found nothing")
	}
	return total, false, nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// mcpClient speaks newline-delimited JSON-RPC to `smarter-compact mcp` over its stdio.
type mcpClient struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	next int
	log  *lockedBuffer
}

// startMCP starts `bin mcp` on the store under state (SMARTER_COMPACT_STATE_DIR) with an
// empty config and its own HOME, and initializes the session.
func startMCP(ctx context.Context, bin, state string) (*mcpClient, error) {
	config := filepath.Join(state, "config.toml")
	if err := os.WriteFile(config, []byte("# written by cmd/bench\n"), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "mcp")
	cmd.Dir = state
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(state, "home"),
		"SMARTER_COMPACT_CONFIG=" + config, "SMARTER_COMPACT_STATE_DIR=" + state}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &mcpClient{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20), log: &lockedBuffer{}}
	cmd.Stderr = c.log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s mcp: %w", bin, err)
	}
	var init json.RawMessage
	if err := c.call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "cmd-bench", "version": "1"}}, &init); err != nil {
		c.close()
		return nil, fmt.Errorf("mcp initialize: %w", err)
	}
	if err := c.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *mcpClient) write(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	_, err = c.in.Write(append(b, '\n'))
	return err
}

// call sends one request and decodes its result into out, skipping notifications.
func (c *mcpClient) call(method string, params, out any) error {
	c.next++
	if err := c.write(map[string]any{"jsonrpc": "2.0", "id": c.next, "method": method, "params": params}); err != nil {
		return err
	}
	for {
		line, err := c.out.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("%s: read: %w\n%s", method, err, tail(c.log.String(), 1000))
		}
		var msg struct {
			ID     *int            `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			return fmt.Errorf("%s: a stdout line is not JSON-RPC: %w: %q", method, err, tail(string(line), 200))
		}
		if msg.ID == nil || msg.Method != "" || *msg.ID != c.next {
			continue // a notification, or a request of the server's (none is expected)
		}
		if msg.Error != nil {
			return fmt.Errorf("%s: %s", method, msg.Error.Message)
		}
		return json.Unmarshal(msg.Result, out)
	}
}

// callTool calls tool and decodes the JSON of its text result into out.
func (c *mcpClient) callTool(tool string, args map[string]any, out any) error {
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := c.call("tools/call", map[string]any{"name": tool, "arguments": args}, &res); err != nil {
		return err
	}
	if len(res.Content) == 0 {
		return fmt.Errorf("%s: no content", tool)
	}
	if res.IsError {
		return fmt.Errorf("%s: %s", tool, res.Content[0].Text)
	}
	return json.NewDecoder(strings.NewReader(res.Content[0].Text)).Decode(out)
}

func (c *mcpClient) close() {
	c.in.Close() // mcp returns when stdin ends
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}
