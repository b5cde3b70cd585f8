package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// genPatternText is a row text over a small alphabet (so generated patterns often match):
// lines of short tokens with multi-byte characters, invalid UTF-8, NULs, and now and then a
// row longer than PatternChars characters whose tail holds matches the row head does not.
func genPatternText(rng *rand.Rand) string {
	atoms := []string{"a", "b", "ab", "ba", "KEY", "-7", "é", "世界", " ", " ", "\t", "x1", "\xff", "\x00", "aaa", "Ab", "_"}
	var b strings.Builder
	lines := 1 + rng.IntN(5)
	if rng.IntN(100) == 0 {
		b.WriteString(strings.Repeat("é", PatternChars-2)) // a long row: the rest is past the head
		lines = 3
	}
	for l := range lines {
		if l > 0 {
			b.WriteByte('\n')
		}
		for range rng.IntN(12) {
			b.WriteString(atoms[rng.IntN(len(atoms))])
		}
	}
	return b.String()
}

// genPattern is a random regexp over the same alphabet: literals, classes, repetitions,
// alternations, groups, case folding and empty-width assertions.
func genPattern(rng *rand.Rand, depth int) string {
	lits := []string{"a", "b", "ab", "aab", "KEY", "KEY-7", "-7", "é", "世", "界", "x1", " ", "ba", "bab", "aaa", "Ab"}
	if depth <= 0 {
		return regexp.QuoteMeta(lits[rng.IntN(len(lits))])
	}
	switch rng.IntN(18) {
	case 12:
		return genPattern(rng, depth-1) + []string{`\d`, `\w+`, `[a-z]{2}`, `\S`, `[[:alpha:]]+`, `[^ab]`}[rng.IntN(6)] + genPattern(rng, depth-1)
	case 13:
		return []string{`\d+`, `\w`, `[A-Z]\w*`, `[é世]`, `\pL{3}`}[rng.IntN(5)]
	case 14: // may match a \n: counted line by line
		return genPattern(rng, depth-1) + []string{`\s`, `(?s).`, `[^x]`, `\n`, `\D`}[rng.IntN(5)] + genPattern(rng, depth-1)
	case 15:
		return `\b\w+` + genPattern(rng, depth-1) + `\B`
	case 16:
		return "(?i)" + genPattern(rng, depth-1) + `\d`
	case 0:
		return genPattern(rng, depth-1) + "|" + genPattern(rng, depth-1)
	case 1:
		return "(" + genPattern(rng, depth-1) + ")+"
	case 2:
		return "(?:" + genPattern(rng, depth-1) + ")*"
	case 3:
		return "(?:" + genPattern(rng, depth-1) + ")?"
	case 4:
		return "[ab]" + genPattern(rng, depth-1)
	case 5:
		return "(?i)" + genPattern(rng, depth-1)
	case 6:
		return "^" + genPattern(rng, depth-1)
	case 7:
		return genPattern(rng, depth-1) + "$"
	case 8:
		return `\b` + genPattern(rng, depth-1) + `\w`
	case 9:
		return "(?:" + genPattern(rng, depth-1) + "){2,}" + genPattern(rng, depth-1)
	case 10:
		return genPattern(rng, depth-1) + `.\d*` + genPattern(rng, depth-1)
	}
	return genPattern(rng, depth-1) + genPattern(rng, depth-1)
}

// TestPatternPrefilterMatchesFullScan: over generated rows and patterns (literals, classes,
// repetitions, assertions, some that may match a \n), with every filter, limit and KeysOnly, a
// pattern search on the fast path (the texts held in memory, the trigram prefilter, lines
// counted in one pass) returns exactly what the full scan of every row read from SQLite with
// each line tested on its own returns (hits with their excerpts, both counts), also after rows
// are added to a session the index has already read, and when the memory budget keeps only
// the filters.
func TestPatternPrefilterMatchesFullScan(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(18, 4))
	r := newRoot(t)
	d := mustSession(t, r, "s")
	roles := []string{"user", "assistant", "tool"}
	addRows := func(n int) {
		var trs []testRow
		for i := range n {
			trs = append(trs, testRow{thread: fmt.Sprint("t", rng.IntN(2)), role: roles[rng.IntN(3)], text: fmt.Sprintf("%s %d", genPatternText(rng), i),
				out: rng.IntN(3) == 0})
		}
		syncTestRows(t, d, trs)
	}
	addRows(300)
	yes, no := true, false
	filters := []SearchOptions{{}, {Roles: []string{"user", "tool"}}, {Roles: []string{"assistant"}, InContext: &yes}, {InContext: &no}}
	defer func(n int) { scanPartRows = n }(scanPartRows)
	scanPartRows = 50 // the texts scanned in parts, merged
	prefiltered, local := 0, 0
	for round := range 4 {
		rd := mustReader(t, r, "s")
		c, err := rd.conn()
		if err != nil {
			t.Fatal(err)
		}
		if round == 3 {
			// A budget the texts do not fit and the filters do (with the rows added since):
			// filters only, texts read from SQLite.
			c.sr.gimu.Lock()
			gi := c.sr.grams
			c.sr.gimu.Unlock()
			gi.mu.Lock()
			filters := gi.bytes
			for _, s := range gi.texts {
				filters -= int64(len(s))
			}
			gi.mu.Unlock()
			defer searchMem.setLimit(searchMem.setLimit(filters * 3 / 2))
		}
		for i := range 100 {
			p := genPattern(rng, 1+rng.IntN(3))
			re, err := regexp.Compile(p)
			if err != nil {
				t.Fatalf("generated pattern %q: %v", p, err)
			}
			if len(patternTrigrams(re)) > 0 {
				prefiltered++
			}
			if newLineCounter(re).local {
				local++
			}
			o := filters[i%len(filters)]
			o.Pattern = re
			o.Limit = []int{-1, 1, 8, 1000}[rng.IntN(4)]
			o.KeysOnly = rng.IntN(4) == 0
			// An equivalence test, not a timing one: the default 1 s budget ran out for the
			// full scan of one pattern under wine on a loaded machine (a CI run's flake).
			o.Budget = time.Minute
			o = normalize(o)
			got, err := searchPatternScan(ctx, c, o, true)
			if err != nil {
				t.Fatal(err)
			}
			want, err := searchPatternScan(ctx, c, o, false)
			if err != nil {
				t.Fatal(err)
			}
			if got.TimedOut || want.TimedOut {
				t.Fatalf("pattern %q timed out", p)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d pattern %q %+v:\nprefiltered %d/%d hits %v\nfull scan   %d/%d hits %v", round, p, o,
					got.TotalMatches, got.LineMatches, seqs(got.Hits), want.TotalMatches, want.LineMatches, seqs(want.Hits))
			}
		}
		if round == 3 {
			c.sr.gimu.Lock()
			gi := c.sr.grams
			c.sr.gimu.Unlock()
			if gi == nil || !gi.noTexts {
				t.Fatalf("round 3: index %v, want the filters only", gi != nil)
			}
		}
		if err := rd.Close(); err != nil {
			t.Fatal(err)
		}
		addRows(60) // the pooled reader's index reads only these
	}
	if prefiltered < 80 {
		t.Errorf("only %d of 400 generated patterns had required trigrams: the test barely exercises the prefilter", prefiltered)
	}
	if local < 150 || local > 350 {
		t.Errorf("%d of 400 generated patterns counted lines in one pass: the test barely exercises one of the two ways", local)
	}
}

// TestPatternTrigrams: the literals every match holds, and none from what may be absent.
func TestPatternTrigrams(t *testing.T) {
	str := func(gs []uint32) []string {
		var out []string
		for _, g := range gs {
			out = append(out, string([]byte{byte(g >> 16), byte(g >> 8), byte(g)}))
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		{`KEY-7`, []string{"-7", "EY-", "KEY", "Y-7"}[1:]},
		{`w12\d\dxa+ w`, []string{"a w", "w12"}},
		{`abc+de`, []string{"abc", "cde"}},
		{`(ab)+cd`, nil},
		{`(?:abcd)+`, []string{"abc", "bcd"}},
		{`x(abc|abd)`, nil},
		{`(?i)KEY`, nil},
		{`abc?`, nil},
		{`ab\x{fffd}cd`, nil},
		{`é世`, []string{"\xa9\xe4\xb8", "\xc3\xa9\xe4", "\xe4\xb8\x96"}},
		{`a{3,}b`, []string{"aaa"}[:0]},
	} {
		got := str(patternTrigrams(regexp.MustCompile(c.pattern)))
		want := slices.Clone(c.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%q: trigrams %q, want %q", c.pattern, got, want)
		}
	}
}

// TestGramIndexRefreshStopsAtDeadline: a refresh past its deadline stops after a block of rows
// and says so; the next one goes on from there.
func TestGramIndexRefreshStopsAtDeadline(t *testing.T) {
	ctx := context.Background()
	r := newRoot(t)
	d := mustSession(t, r, "s")
	var trs []testRow
	for i := range 2*refreshEvery + 10 {
		trs = append(trs, testRow{thread: "a", role: "user", text: fmt.Sprint("row KEY-", i)})
	}
	syncTestRows(t, d, trs)
	rd := mustReader(t, r, "s")
	c, err := rd.conn()
	if err != nil {
		t.Fatal(err)
	}
	gi, complete, err := c.sr.gramIndex(ctx, c, time.Now().Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := len(gi.seqs)
	gi.mu.Unlock()
	if complete || n != refreshEvery {
		t.Fatalf("past the deadline: complete %v after %d rows, want false after %d", complete, n, refreshEvery)
	}
	gi, complete, err = c.sr.gramIndex(ctx, c, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	n, last := len(gi.seqs), gi.seqs[len(gi.seqs)-1]
	gi.mu.Unlock()
	if !complete || n != len(trs) || last != int64(len(trs)) {
		t.Fatalf("then: complete %v with %d rows up to %d, want all %d", complete, n, last, len(trs))
	}
	res, err := rd.Search(ctx, SearchOptions{Pattern: regexp.MustCompile(`KEY-51\b`)})
	if err != nil || res.TotalMatches != 1 || len(res.Hits) != 1 || res.Hits[0].Seq != 52 {
		t.Fatalf("search %+v, %v", res, err)
	}
}

// TestLineCounterIndex: the literal search scan uses finds what strings.Index finds, whichever
// two bytes of the literal it looks for first (with and without byte counts), near the ends of the text and across its 8-byte
// steps.
func TestLineCounterIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	alphabet := "ab\x00\xff\n"
	gen := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 20000 {
		s, need := gen(rng.IntN(40)), gen(1+rng.IntN(5))
		lc := &lineCounter{lits: []string{need}}
		var freq [256]uint64
		for i := range freq {
			freq[i] = uint64(rng.IntN(4))
		}
		lc.tune(&freq)
		if rng.IntN(4) == 0 {
			lc.tune(nil)
		}
		if got, want := lc.index(s), strings.Index(s, need); got != want {
			t.Fatalf("index(%q) of %q (bytes %v) = %d, want %d", s, need, lc.pair, got, want)
		}
	}
}

// TestGramIndexChunks: each row's filter, stored in the index's chunks (small rows, many
// chunks, and one row whose filter is larger than a chunk), is the filter of its own text:
// every bit of every distinct trigram set and no other, none of them sharing words.
func TestGramIndexChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 5))
	text := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(1 + rng.IntN(255))
		}
		return string(b)
	}
	var texts []string
	for i := range 3000 {
		n := 1 + rng.IntN(400)
		if i == 1500 {
			n = 1 << 21 // about 2M distinct trigrams: a filter of 2^23 bits, 128 Ki words
		}
		texts = append(texts, text(n))
	}
	gi := &gramIndex{}
	for i, s := range texts {
		gi.add(int64(i+1), "user", s)
	}
	if len(gi.words) < 10 {
		t.Fatalf("%d chunks: the test no longer exercises several", len(gi.words))
	}
	big := false
	for i, s := range texts {
		lb := gi.logBits[i]
		want := make([]uint64, 1<<(lb-6))
		for j := 0; j+2 < len(s); j++ {
			b := gramBit(trigram(s[j], s[j+1], s[j+2]), lb)
			want[b/64] |= 1 << (b % 64)
		}
		off := gi.offs[i]
		chunk := gi.words[off>>16]
		if int(off&0xffff)+len(want) > len(chunk) {
			t.Fatalf("row %d: filter of %d words at %d past its chunk of %d", i, len(want), off&0xffff, len(chunk))
		}
		if got := chunk[off&0xffff : int(off&0xffff)+len(want)]; !slices.Equal(got, want) {
			t.Fatalf("row %d: its filter is not its text's", i)
		}
		big = big || len(want) > gramChunkWords
	}
	if !big {
		t.Fatal("no filter larger than a chunk: the test no longer exercises one")
	}
}

// TestGramIndexDropsTextsEarly: an index whose rows so far, at that size per row, would be
// past half the search memory budget for the session's rows lets the texts go at once, before
// it is that large itself (when they would have pushed the other caches out first); one that
// fits in half keeps them.
func TestGramIndexDropsTextsEarly(t *testing.T) {
	ctx := context.Background()
	r := newRoot(t)
	d := mustSession(t, r, "s")
	var trs []testRow
	for i := range 8 * refreshEvery {
		trs = append(trs, testRow{thread: "a", role: "user", text: fmt.Sprintf("row %d %s", i, strings.Repeat("text ", 40))})
	}
	syncTestRows(t, d, trs)
	for _, c := range []struct {
		name   string
		budget func(full int64) int64
		texts  bool
	}{
		{"fits", func(full int64) int64 { return 3 * full }, true},
		{"past half the budget", func(full int64) int64 { return full * 3 / 2 }, false},
		{"past the budget", func(full int64) int64 { return full / 2 }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			full := &gramIndex{}
			for i, tr := range trs {
				full.add(int64(i+1), tr.role, tr.text)
			}
			defer searchMem.setLimit(searchMem.setLimit(c.budget(full.bytes)))
			rd := mustReader(t, r, "s")
			defer rd.Close()
			conn, err := rd.conn()
			if err != nil {
				t.Fatal(err)
			}
			conn.sr.gimu.Lock()
			conn.sr.grams = nil
			conn.sr.gimu.Unlock()
			// Stopped by its deadline after the first block of rows: an eighth of the index.
			gi, complete, err := conn.sr.gramIndex(ctx, conn, time.Now().Add(-time.Second))
			if err != nil {
				t.Fatal(err)
			}
			texts, bytes := !gi.noTexts, gi.bytes
			gi.mu.Unlock()
			if complete || bytes > full.bytes/4 {
				t.Fatalf("complete %v with %d of %d bytes: the refresh did not stop after a block", complete, bytes, full.bytes)
			}
			if texts != c.texts {
				t.Fatalf("texts kept %v after an eighth of the rows, want %v", texts, c.texts)
			}
		})
	}
}

// TestGramIndexTooBig: a session whose filters alone are past the search memory budget is
// searched by the full scan with nothing kept (an index outside the budget would leave the
// process's memory unbounded), later searches do not index it again under that budget, and
// a larger budget indexes it.
func TestGramIndexTooBig(t *testing.T) {
	ctx := context.Background()
	r := newRoot(t)
	d := mustSession(t, r, "s")
	var trs []testRow
	for i := range 4 * refreshEvery {
		trs = append(trs, testRow{thread: "a", role: "user", text: fmt.Sprintf("row KEY-%d %s", i, strings.Repeat("text ", 20))})
	}
	syncTestRows(t, d, trs)
	full := &gramIndex{noTexts: true}
	for i, tr := range trs {
		full.add(int64(i+1), tr.role, tr.text)
	}
	defer searchMem.setLimit(searchMem.setLimit(full.bytes / 2))
	rd := mustReader(t, r, "s")
	defer rd.Close()
	c, err := rd.conn()
	if err != nil {
		t.Fatal(err)
	}
	o := normalize(SearchOptions{Pattern: regexp.MustCompile(`KEY-5\d\b`), Budget: time.Minute})
	want, err := searchPatternScan(ctx, c, o, false)
	if err != nil || want.TotalMatches != 10 {
		t.Fatalf("full scan %+v, %v", want, err)
	}
	kept := func() (bool, int64) {
		c.sr.gimu.Lock()
		defer c.sr.gimu.Unlock()
		return c.sr.grams != nil, c.sr.gramsTooBig
	}
	for i := range 2 {
		got, err := searchPatternScan(ctx, c, o, true)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("search %d: %+v, %v; full scan %+v", i, got, err, want)
		}
		if k, tooBig := kept(); k || tooBig != full.bytes/2 {
			t.Fatalf("search %d under a budget the filters do not fit: index kept %v, too big under %d", i, k, tooBig)
		}
	}
	searchMem.setLimit(4 * full.bytes)
	got, err := searchPatternScan(ctx, c, o, true)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("under a larger budget: %+v, %v; full scan %+v", got, err, want)
	}
	if k, _ := kept(); !k {
		t.Fatal("under a budget the filters fit: no index kept")
	}
}
