package store

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"os"

	"strconv"
	"strings"
	"testing"
)

// TestDoclistFuzzStoreWriter: session databases written by the store's writer (SyncRows,
// one commit a batch), random texts over fuzzVocab with long rows; readDoclist for every word
// against Go's count from the texts, and Search's TotalMatches against FTS5 MATCH.
func TestDoclistFuzzStoreWriter(t *testing.T) {
	seeds := 3
	if s := os.Getenv("DLFUZZ2_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	compared, searched := 0, 0
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 7))
		r := newRoot(t)
		d := mustSession(t, r, "s")
		truth := map[string]map[int64]uint32{}
		seq := int64(0)
		for range 20 + rng.IntN(40) {
			rows := make([]testRow, 1+rng.IntN(30))
			for i := range rows {
				var toks []string
				for range 1 + rng.IntN(30) {
					toks = append(toks, fuzzVocab[int(float64(len(fuzzVocab))*rng.Float64()*rng.Float64())])
				}
				if rng.IntN(25) == 0 {
					w := fuzzVocab[rng.IntN(len(fuzzVocab))]
					for range 3000 + rng.IntN(8000) {
						toks = append(toks, w)
					}
				}
				toks = append(toks, "u"+strconv.Itoa(int(seq))) // unique: rows never equal
				seq++
				for _, tk := range toks {
					if truth[tk] == nil {
						truth[tk] = map[int64]uint32{}
					}
					truth[tk][seq]++
				}
				rows[i] = testRow{thread: "a", role: "user", text: strings.Join(toks, " ")}
			}
			syncTestRows(t, d, rows)
		}
		db, err := sql.Open("sqlite3", sqliteURI(d.Path(), "_busy_timeout=5000"))
		if err != nil {
			t.Fatal(err)
		}
		c, _ := db.Conn(ctx)
		var n int64
		if c.QueryRowContext(ctx, "SELECT count(*) FROM messages").Scan(&n); n != seq {
			t.Fatalf("%d rows, wrote %d", n, seq)
		}
		for _, w := range fuzzVocab {
			got, tf, err := readDoclist(ctx, c, w)
			if err != nil {
				t.Fatalf("seed %d word %q: %v", seed, w, err)
			}
			want := truth[w]
			ok := len(got) == len(want)
			for i := range got {
				ok = ok && want[got[i]] == tf[i]
			}
			if !ok {
				t.Fatalf("seed %d word %q: %d rows, want %d", seed, w, len(got), len(want))
			}
			compared++
		}
		c.Close()
		db.Close()
		rd := mustReader(t, r, "s")
		rc, err := rd.conn()
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range fuzzVocab[:20] {
			res, err := rd.Search(ctx, SearchOptions{Query: w, Limit: -1})
			if err != nil {
				t.Fatal(err)
			}
			if want := countRows(t, rc, "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", ftsString(w)); res.TotalMatches != want || want != len(truth[w]) {
				t.Fatalf("seed %d word %q: TotalMatches %d, MATCH %d, truth %d", seed, w, res.TotalMatches, want, len(truth[w]))
			}
			searched++
		}
		st := postingStats(rc.sr)
		t.Logf("seed %d: postings built %d, vocab fallbacks %d, counted %d", seed, st.built, st.vocab, st.counted)
	}
	t.Logf("%d seeds, %d words compared, %d searches", seeds, compared, searched)
}
