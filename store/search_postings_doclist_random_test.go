package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fuzzVocab: words sharing prefixes (prefix compression), short and long terms.
var fuzzVocab = func() []string {
	v := strings.Fields("a ab abc abcd abcde abd abda b ba bab babe c ca cab x xx xxx xxxy y yz z zz zzz q0 q00 q000 q1 1 11 111 2 20 200")
	v = append(v, strings.Repeat("l", 90), strings.Repeat("l", 91), strings.Repeat("l", 90)+"m", "pre"+strings.Repeat("k", 300))
	return v
}()

// TestDoclistFuzzRawSQL builds random external-content FTS5 tables like the contract's (rows
// only appended, through plain SQL so that seqs can have huge gaps and the page size can be
// small), in many transactions, with merges, optimize and rebuild, and compares readDoclist
// for every vocabulary word with the instances counted in Go from the texts.
func TestDoclistFuzzRawSQL(t *testing.T) {
	seeds := 12
	if s := os.Getenv("DLFUZZ_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	stats := map[string]int{}
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 99))
		path := filepath.Join(t.TempDir(), "f.db")
		db, err := sql.Open("sqlite3", sqliteURI(path, "_busy_timeout=5000"))
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := c.ExecContext(ctx, q, args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		exec("CREATE TABLE messages (seq INTEGER PRIMARY KEY, text TEXT)")
		exec("CREATE VIRTUAL TABLE messages_fts USING fts5 (text, content='messages', content_rowid='seq')")
		pgsz := []int{64, 100, 200, 1000, 1000, 4000}[rng.IntN(6)]
		exec("INSERT INTO messages_fts(messages_fts, rank) VALUES('pgsz', ?)", pgsz)
		exec("INSERT INTO messages_fts(messages_fts, rank) VALUES('automerge', ?)", []int{0, 2, 4, 8, 16}[rng.IntN(5)])
		exec("INSERT INTO messages_fts(messages_fts, rank) VALUES('crisismerge', ?)", []int{2, 16, 64}[rng.IntN(3)])
		truth := map[string]map[int64]uint32{}
		seq := int64(0)
		gaps := rng.IntN(2) == 0
		batches := 10 + rng.IntN(60)
		// zipf-ish word choice
		pick := func() string {
			i := int(float64(len(fuzzVocab)) * rng.Float64() * rng.Float64() * rng.Float64())
			return fuzzVocab[i]
		}
		check := func(stage string) {
			t.Helper()
			for _, w := range append(slices.Clone(fuzzVocab), "absent", "a0", "zzzzz", "") {
				want := truth[w]
				got, tf, err := readDoclist(ctx, c, w)
				if errors.Is(err, errNoPostings) {
					stats["refused "+stage]++
					if stats["logged "+err.Error()[:20]] == 0 {
						t.Logf("seed %d %s word %q: refused: %v", seed, stage, w, err)
						stats["logged "+err.Error()[:20]]++
					}
					continue
				}
				if err != nil {
					t.Fatalf("seed %d %s word %q: %v", seed, stage, w, err)
				}
				stats["compared "+stage]++
				ok := len(got) == len(want) && slices.IsSorted(got)
				for i := range got {
					if !ok {
						break
					}
					ok = want[got[i]] == tf[i]
				}
				if !ok {
					var ws []int64
					for s := range want {
						ws = append(ws, s)
					}
					slices.Sort(ws)
					t.Fatalf("seed %d pgsz %d %s word %q: got %d rows %v…, want %d rows %v…", seed, pgsz, stage, w, len(got), got[:min(8, len(got))], len(ws), ws[:min(8, len(ws))])
				}
			}
		}
		for b := range batches {
			exec("BEGIN")
			n := 1 + rng.IntN(40)
			for range n {
				if gaps && rng.IntN(10) == 0 {
					seq += 1 + rng.Int64N([]int64{200, 1 << 20, 1 << 40, 1 << 55}[rng.IntN(4)])
				} else {
					seq++
				}
				var toks []string
				for range rng.IntN(40) {
					toks = append(toks, pick())
				}
				if rng.IntN(30) == 0 { // a long poslist: tens of KB
					w := fuzzVocab[rng.IntN(len(fuzzVocab))]
					for range 2000 + rng.IntN(8000) {
						toks = append(toks, w)
					}
				}
				if rng.IntN(20) == 0 { // a word far into a row: positions with multi-byte varints
					for range 20000 {
						toks = append(toks, "pad")
					}
					toks = append(toks, pick())
				}
				rng.Shuffle(len(toks), func(i, j int) { toks[i], toks[j] = toks[j], toks[i] })
				text := strings.Join(toks, []string{" ", ", ", " - ", "\n"}[rng.IntN(4)])
				for _, tk := range toks {
					if truth[tk] == nil {
						truth[tk] = map[int64]uint32{}
					}
					truth[tk][seq]++
				}
				exec("INSERT INTO messages(seq, text) VALUES(?, ?)", seq, text)
				exec("INSERT INTO messages_fts(rowid, text) VALUES(?, ?)", seq, text)
			}
			exec("COMMIT")
			if rng.IntN(8) == 0 {
				check(fmt.Sprint("batch", b))
			}
			switch rng.IntN(25) {
			case 0:
				exec("INSERT INTO messages_fts(messages_fts, rank) VALUES('merge', ?)", 1+rng.IntN(20))
				check("merge")
			case 1:
				exec("INSERT INTO messages_fts(messages_fts, rank) VALUES('merge', ?)", -(1 + rng.IntN(20)))
				check("merge-neg")
			case 2:
				exec("INSERT INTO messages_fts(messages_fts) VALUES('optimize')")
				check("optimize")
			case 3:
				exec("INSERT INTO messages_fts(messages_fts) VALUES('rebuild')")
				check("rebuild")
			}
		}
		check("end")
		var nseg int
		var block []byte
		c.QueryRowContext(ctx, "SELECT block FROM messages_fts_data WHERE id = 10").Scan(&block)
		segs, _ := parseStructure(block)
		nseg = len(segs)
		stats["segments"] += nseg
		c.Close()
		db.Close()
	}
	t.Logf("%d seeds: %v", seeds, stats)
}
