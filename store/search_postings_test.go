package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPostingsMatchRankAll is the equivalence of the ranking from word postings
// (search_postings.go) with the one statement (rankAll), on a real session database that
// grows, and whose rows move in and out of context, between the searches (the pooled
// reader's postings follow it). Queries of one to four words from rankVocab, under every
// filter and limit, with the common-word threshold low enough that the common words are
// ranked from postings: the hits must be the same rows in the same order with the same
// matched words and bit-identical bm25. A last round runs under a search memory budget no
// postings fit.
func TestPostingsMatchRankAll(t *testing.T) {
	ctx := context.Background()
	f, tr := false, true
	filters := []SearchOptions{{}, {Roles: []string{"user", "tool"}}, {InContext: &tr}, {Roles: []string{"assistant"}, InContext: &f}}
	// Alpha, is the token alpha; key-7 (two tokens) and NAÏVE (not ASCII) have no postings.
	words := []string{"alpha", "BETA", "gamma", "delta", "key-7", "key", "NAÏVE", "omega", "absent", "Alpha,"}
	roles := []string{"user", "assistant", "tool"}
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 18))
			r := newRoot(t)
			d := mustSession(t, r, "s")
			var written []RowWrite
			grow := func(n int) {
				rows := make([]testRow, n)
				for i := range rows {
					rows[i] = testRow{thread: "a", role: roles[rng.IntN(3)], text: rankText(rng), out: rng.IntN(4) == 0}
				}
				written = append(written, syncTestRows(t, d, rows)...)
			}
			grow(500)
			rd := mustReader(t, r, "s") // kept open: its pooled reader's postings follow the writes
			c, err := rd.conn()
			if err != nil {
				t.Fatal(err)
			}
			compared, alone, counted, totals := 0, 0, 0, 0
			var kept postingIndex
			for round := range 4 {
				if round == 3 {
					kept = postingStats(c.sr)
					defer searchMem.setLimit(searchMem.setLimit(1 << 10))
				}
				for range 40 {
					ws, o, q := drawRankQuery(rng, words, 1, 4, filters)
					for _, w := range ws {
						// The counts of a one-word search without an in_context filter come from its
						// postings.
						before := postingStats(c.sr).counted
						res, err := rd.Search(ctx, SearchOptions{Query: w, Roles: o.Roles, InContext: o.InContext, Limit: -1})
						if err != nil {
							t.Fatal(err)
						}
						one := newRankQuery(o, []string{w})
						total := countRows(t, c, "SELECT count(*) FROM messages_fts"+one.join+" WHERE messages_fts MATCH ?"+one.filter, append([]any{ftsString(w)}, one.fargs...)...)
						lf, largs := where(o, "l.role", []any{ftsString(w)})
						lj := ""
						if len(o.Roles) > 0 || o.InContext != nil {
							lj = " JOIN lines l ON l.id = lines_fts.rowid JOIN messages m ON m.seq = l.message_seq"
						}
						lines := countRows(t, c, "SELECT count(*) FROM lines_fts"+lj+" WHERE lines_fts MATCH ?"+lf, largs...)
						if res.TotalMatches != total || res.LineMatches != lines {
							t.Fatalf("round %d word %q %+v: %d rows, %d lines, want %d, %d", round, w, o, res.TotalMatches, res.LineMatches, total, lines)
						}
						if postingStats(c.sr).counted > before {
							counted++
						}
					}
					for _, limit := range []int{1, 3, 8, 1000} {
						want, err := rankAll(ctx, c, q, limit)
						if err != nil {
							t.Fatal(err)
						}
						for _, maxRows := range []int{5, 60} {
							before := postingStats(c.sr).ranked
							got, total, ok, err := rankTiersCount(ctx, c, q, limit, maxRows)
							if err != nil {
								t.Fatal(err)
							}
							if !ok {
								continue
							}
							// A ranking of a common word's postings counts the query's rows on the way.
							if total >= 0 {
								want := countRows(t, c, "SELECT count(*) FROM messages_fts"+q.join+" WHERE messages_fts MATCH ?"+q.filter,
									append([]any{strings.Join(q.phrases, " OR ")}, q.fargs...)...)
								if total != want {
									t.Fatalf("round %d query %q %+v limit %d maxRows %d: %d rows counted, want %d", round, ws, o, limit, maxRows, total, want)
								}
								totals++
							}
							compared++
							if postingStats(c.sr).ranked > before {
								alone++
							}
							if d := diffRanked(got, want); d != "" {
								t.Fatalf("round %d query %q %+v limit %d maxRows %d: %s", round, ws, o, limit, maxRows, d)
							}
						}
					}
				}
				// New rows, and rows moved in or out of context, before the next round.
				grow(80)
				var moved []RowWrite
				for _, i := range rng.Perm(len(written))[:40] {
					written[i].InContext = !written[i].InContext
					moved = append(moved, written[i])
				}
				if _, err := d.SyncRows(moved, time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%d rankings compared, %d of them from postings (%d counting the rows); %d counts from postings; %d words built, %d rows added to them later",
				compared, alone, totals, counted, kept.built, kept.added)
			if kept.built < 3 || kept.added == 0 || alone < compared/4 || counted < 50 {
				t.Fatalf("%d of %d rankings and %d counts from postings, %d words built, %d rows added later: the test no longer exercises them",
					alone, compared, counted, kept.built, kept.added)
			}
			if totals < 20 {
				t.Errorf("%d query counts from a ranking of postings: the test no longer exercises them", totals)
			}
			if kept.vocab != 0 {
				t.Errorf("%d of %d words read from fts5vocab: the doclist reader refused the contract's segments", kept.vocab, kept.built)
			}
			if postingStats(c.sr).words != nil {
				t.Error("postings kept under a budget they do not fit")
			}
		})
	}
}

// postingStats copies what sr's postings did, and their sizes and words (nil when sr has none).
func postingStats(sr *sharedReader) postingIndex {
	sr.pimu.Lock()
	pi := sr.posts
	sr.pimu.Unlock()
	if pi == nil {
		return postingIndex{}
	}
	pi.mu.Lock()
	defer pi.mu.Unlock()
	return postingIndex{sizes: pi.sizes, words: pi.words, built: pi.built, added: pi.added, vocab: pi.vocab, alone: pi.alone, ranked: pi.ranked, counted: pi.counted}
}

// countRows runs a count statement on c.
func countRows(t testing.TB, c conn, q string, args ...any) int {
	t.Helper()
	var n int
	if err := c.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func TestPostingToken(t *testing.T) {
	for _, c := range []struct {
		word, token string
		ok          bool
	}{
		{"payments", "payments", true},
		{"Payments,", "payments", true},
		{"(HTTP2)", "http2", true},
		{"key-7", "", false},      // two tokens
		{"latency_ms", "", false}, // _ separates tokens
		{"naïve", "", false},      // unicode61 folds it: not read as ASCII
		{"--", "", false},
	} {
		if token, ok := postingToken(c.word); token != c.token || ok != c.ok {
			t.Errorf("postingToken(%q) = %q, %v, want %q, %v", c.word, token, ok, c.token, c.ok)
		}
	}
}

// TestPostingsNeedTheContractsTokenizer: on a database whose messages_fts stems its terms
// (tokenize = 'porter', not the contract's), the lowercased word is not FTS5's term, so a
// common word gets no postings and is ranked by the one statement.
func TestPostingsNeedTheContractsTokenizer(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("testdata", "schema_v2.sql"))
	if err != nil {
		t.Fatal(err)
	}
	const contract = "USING fts5 (text, content='messages', content_rowid='seq');"
	if !strings.Contains(string(script), contract) {
		t.Fatal("schema_v2.sql no longer creates messages_fts as the contract does")
	}
	var b strings.Builder
	b.WriteString(strings.Replace(string(script), contract, "USING fts5 (text, content='messages', content_rowid='seq', tokenize='porter');", 1))
	for i := range 40 {
		fmt.Fprintf(&b, "INSERT INTO messages (fingerprint, thread, role, kind, text, created_at) VALUES ('fp%d', 't', 'user', 'text', '%s', '2026-01-01T00:00:00Z');\n",
			i, []string{"running late", "runs", "run run run", "ran"}[i%4])
	}
	r := newRoot(t)
	buildFixtureSQL(t, filepath.Join(r.Dir(), "sessions", "porter.db"), b.String())
	c, err := mustReader(t, r, "porter").conn()
	if err != nil {
		t.Fatal(err)
	}
	q := newRankQuery(SearchOptions{}, []string{"running"})
	want, err := rankAll(context.Background(), c, q, 8)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 8 || want[0].seq%4 != 1 { // "run run run" (seqs 5, 9, …: the fixture has 2 rows) first
		t.Fatalf("rankAll %+v: the fixture no longer stems", want)
	}
	if _, ok, err := rankTiers(context.Background(), c, q, 8, 5); ok || err != nil {
		t.Fatalf("rankTiers ranked from postings (%v, %v)", ok, err)
	}
	if ps := postingStats(c.sr); ps.built != 0 || ps.ranked != 0 {
		t.Fatalf("postings built %d, ranked %d on a porter table", ps.built, ps.ranked)
	}
}
