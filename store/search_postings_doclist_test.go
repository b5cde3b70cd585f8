package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestReadDoclistMatchesVocab is the equivalence of the doclist reader (search_postings_doclist.go)
// with FTS5's own fts5vocab table, for every term of a session database written as the proxy
// writes it (many small writes: many segments), with rows whose word repeats thousands of
// times (poslists over several leaf pages) and common words (doclists over many pages), then
// after an incremental FTS5 merge and after an optimize (one segment). (A merge left half
// done, whose input segments lost their first pages, was compared on bench1M's session, which
// has four; this small database does not get one.) A database with a deleted row must read either the same rows or
// errNoPostings, never other rows.
func TestReadDoclistMatchesVocab(t *testing.T) {
	ctx := context.Background()
	r := newRoot(t)
	d := mustSession(t, r, "s")
	rng := rand.New(rand.NewPCG(7, 18))
	words := strings.Fields("alpha beta gamma delta omega zeta x y 42 r 0001a2b3")
	for batch := range 40 {
		rows := make([]testRow, 100+rng.IntN(100))
		for i := range rows {
			var toks []string
			for range 1 + rng.IntN(60) {
				toks = append(toks, words[rng.IntN(len(words))])
			}
			if rng.IntN(50) == 0 { // a poslist longer than a leaf page
				toks = append(toks, strings.Repeat("repeat ", 2000+rng.IntN(3000)))
			}
			toks = append(toks, fmt.Sprintf("w%d", rng.IntN(300)), fmt.Sprintf("b%d", batch))
			rows[i] = testRow{thread: "a", role: "user", text: strings.Join(toks, " ")}
		}
		syncTestRows(t, d, rows)
	}
	db, err := sql.Open("sqlite3", sqliteURI(d.Path(), "_busy_timeout=5000"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, s := range []string{"CREATE VIRTUAL TABLE temp.postings_vocab USING fts5vocab(main, messages_fts, instance)"} {
		if _, err := c.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	compare := func(stage string, deletes bool) {
		t.Helper()
		var list sql.NullString
		if err := c.QueryRowContext(ctx, "SELECT group_concat(DISTINCT term) FROM temp.postings_vocab").Scan(&list); err != nil {
			t.Fatal(err)
		}
		terms := strings.Split(list.String, ",")
		var segs []fts5Segment
		var block []byte
		if err := c.QueryRowContext(ctx, "SELECT block FROM messages_fts_data WHERE id = 10").Scan(&block); err == nil {
			segs, _ = parseStructure(block)
		}
		read, refused, pages := 0, 0, 0
		for _, term := range append(terms, "absent", "zzzz") {
			want, wantTF, err := readVocab(ctx, c, term)
			if err != nil {
				t.Fatal(err)
			}
			got, gotTF, err := readDoclist(ctx, c, term)
			if deletes && errors.Is(err, errNoPostings) {
				refused++
				continue
			}
			if err != nil {
				t.Fatalf("%s: term %q: %v", stage, term, err)
			}
			if !slices.Equal(got, want) || !slices.Equal(gotTF, wantTF) {
				t.Fatalf("%s: term %q: doclist %d rows %v…, vocab %d rows %v…", stage, term, len(got), got[:min(5, len(got))], len(want), want[:min(5, len(want))])
			}
			read++
			if len(want) > 0 && slices.Max(wantTF) > 1000 {
				pages++
			}
		}
		trimmed := 0
		for _, s := range segs {
			if s.first > 1 {
				trimmed++
			}
		}
		t.Logf("%s: %d segments (%d lost their first pages), %d terms read alike, %d refused, %d with a poslist over pages", stage, len(segs), trimmed, read, refused, pages)
		if !deletes && (read < 300 || pages == 0) {
			t.Fatalf("%s: %d terms, %d long poslists: the test no longer exercises the reader", stage, read, pages)
		}
		if stage == "written" && len(segs) < 3 {
			t.Fatalf("%d segments: the test no longer exercises several", len(segs))
		}
	}
	compare("written", false)
	// A merge of a few pages: its input segments lose their first pages.
	for _, s := range []string{"INSERT INTO messages_fts(messages_fts, rank) VALUES('usermerge', 2)", "INSERT INTO messages_fts(messages_fts, rank) VALUES('merge', 2)"} {
		if _, err := c.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	compare("merging", false)
	if _, err := c.ExecContext(ctx, "INSERT INTO messages_fts(messages_fts) VALUES('optimize')"); err != nil {
		t.Fatal(err)
	}
	compare("optimized", false)
	// A row taken out of the index (not the contract's writes): a delete entry in a new segment.
	if _, err := c.ExecContext(ctx, "INSERT INTO messages_fts(messages_fts, rowid, text) SELECT 'delete', seq, text FROM messages WHERE seq = 7"); err != nil {
		t.Fatal(err)
	}
	compare("deleted", true)
}
