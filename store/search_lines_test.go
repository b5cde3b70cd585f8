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
)

// TestPatternCountsMatchLinesTable: a pattern search counts rows and lines from the row texts
// in one pass; the counts equal what the rows and lines tables give read the slow way (each
// row's and line's first 20,000 characters tested one by one), for patterns with and without
// anchors, word boundaries, literal prefixes (the GLOB prefilter, with GLOB's special
// characters) and case folding, over texts with empty lines, trailing newlines, lines and rows
// past 20,000 characters, non-ASCII text, NUL bytes and invalid UTF-8.
func TestPatternCountsMatchLinesTable(t *testing.T) {
	if underWine {
		t.Skip("cannot run under wine: its file I/O is too slow for the search's time budget, which runs out before every session is read")
	}
	r := newRoot(t)
	d := mustSession(t, r, "s")
	rng := rand.New(rand.NewPCG(5, 6))
	words := []string{"error", "Error", "ERROR:", "disk", "full", "é", "naïve", "KEY-7", "0x3f", "retry", "", " ", "\t", "日本",
		"a*b", "[x]", "what?", "nul\x00byte", "é\x80stray", "\xff", "\ufffd"}
	line := func() string {
		var b strings.Builder
		for n := rng.IntN(6); n > 0; n-- {
			b.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(3) > 0 {
				b.WriteByte(' ')
			}
		}
		return b.String()
	}
	var rows []testRow
	for i := range 120 {
		var lines []string
		for n := 1 + rng.IntN(5); n > 0; n-- {
			lines = append(lines, line())
		}
		switch i % 12 {
		case 3: // a line longer than 20,000 characters with a match on both sides of the cut
			lines = append(lines, "error "+strings.Repeat("é", PatternChars-3)+" error disk")
		case 5: // a row past 20,000 characters whose later lines match
			lines = append(lines, strings.Repeat("x", PatternChars+10), "error: disk full", "KEY-7 = 0x3f")
		case 7:
			lines = append(lines, "") // trailing newline
		case 9:
			lines = []string{""}
		}
		roles := []string{"user", "assistant", "tool"}
		rows = append(rows, testRow{thread: fmt.Sprint(i % 3), role: roles[i%3], text: strings.Join(lines, "\n"), out: i%4 == 0})
	}
	syncTestRows(t, d, rows)
	rd := mustReader(t, r, "s")
	ctx := context.Background()
	db, err := rd.pool()
	if err != nil {
		t.Fatal(err)
	}
	// reference counts the slow way: every row and line of the tables, each one's first 20,000
	// characters as SQLite counts them (headChars: substr would stop at a NUL).
	reference := func(re *regexp.Regexp, roles []string, in *bool) (total, lines int) {
		filter, args := where(SearchOptions{Roles: roles, InContext: in}, "m.role", nil)
		for _, q := range []string{
			"SELECT m.text FROM messages m WHERE 1" + filter,
			"SELECT l.text FROM lines l JOIN messages m ON m.seq = l.message_seq WHERE 1" + filter,
		} {
			rs, err := db.QueryContext(ctx, q, args...)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for rs.Next() {
				var s string
				if err := rs.Scan(&s); err != nil {
					t.Fatal(err)
				}
				if re.MatchString(headChars(s, PatternChars)) {
					n++
				}
			}
			rs.Close()
			if strings.Contains(q, "lines l") {
				lines = n
			} else {
				total = n
			}
		}
		return total, lines
	}
	f, tr := false, true
	for _, p := range []string{
		`error`, `(?i)error`, `^error`, `error$`, `^$`, `(?m)^error`, `\berror\b`, `\Berr`, `\Aerror`, `disk\z`,
		`error:? \w+`, `KEY-7 = 0x[0-9a-f]+`, `é+`, `(?i)NAÏVE`, `日本`, `x*`, `.`, `(?s)error.disk`, `error\sdisk`,
		`[^e]rror`, `retry|disk`, `full$|^disk`, `a\*b`, `\[x\]`, `what\?`, `byte`, `nul`, `é`, `éstray`, `stray`, `\x{fffd}`,
		`x\]`, `\*`,
	} {
		re := mustRegexp(t, p)
		for _, c := range []struct {
			roles []string
			in    *bool
		}{{nil, nil}, {[]string{"user", "tool"}, nil}, {nil, &f}, {[]string{"assistant"}, &tr}} {
			res, err := rd.Search(ctx, SearchOptions{Pattern: re, Roles: c.roles, InContext: c.in, Limit: -1})
			if err != nil || res.TimedOut {
				t.Fatalf("%s: %+v, %v", p, res, err)
			}
			total, lines := reference(re, c.roles, c.in)
			if res.TotalMatches != total || res.LineMatches != lines {
				t.Errorf("%q roles %v in %v: total %d lines %d, want %d %d", p, c.roles, c.in, res.TotalMatches, res.LineMatches, total, lines)
			}
		}
	}
}

func TestHeadChars(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 2, "ab"},
		{"éé", 1, "é"},
		{"日本語", 2, "日本"},
		{"a\x80\x80b", 2, "a\x80"}, // a stray continuation byte is one character
		{"\xc3\x80\x80x", 1, "\xc3\x80\x80"},
		{"ab", 5, "ab"},
	} {
		if got := headChars(c.in, c.n); got != c.want {
			t.Errorf("headChars(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// TestSearchKeysOnlyThenDetails: a KeysOnly search followed by Details gives the hits a full
// search gives.
func TestSearchKeysOnlyThenDetails(t *testing.T) {
	r := newRoot(t)
	rows := append(slices.Clone(searchRows),
		testRow{thread: "a", role: "tool", text: "binary\x00 then NEEDLE after a NUL"},
		testRow{thread: "a", role: "tool", text: strings.Repeat("ü", PatternChars-20) + " NEEDLE near the end\nNEEDLE on line 2"})
	syncTestRows(t, mustSession(t, r, "s"), rows)
	rd := mustReader(t, r, "s")
	ctx := context.Background()
	f := false
	for _, o := range []SearchOptions{
		{Query: "staging deploy"},
		{Query: "staging", Context: 2, Roles: []string{"user"}},
		{Query: "deploy", InContext: &f, Limit: 1},
		{Pattern: mustRegexp(t, `(?i)staging`), Context: 1},
		{Pattern: mustRegexp(t, `error: \w+`)},
		{Pattern: mustRegexp(t, `NEEDLE \w+`), Context: 1},
	} {
		full, err := rd.Search(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		ko := o
		ko.KeysOnly = true
		keys, err := rd.Search(ctx, ko)
		if err != nil {
			t.Fatal(err)
		}
		if keys.TotalMatches != full.TotalMatches || keys.LineMatches != full.LineMatches || len(keys.Hits) != len(full.Hits) || len(keys.Hits) == 0 {
			t.Fatalf("%+v: keys %+v, full %+v", o, keys, full)
		}
		for _, h := range keys.Hits {
			if h.Excerpt != "" || h.Role != "" || h.Before != nil || h.After != nil {
				t.Errorf("%+v: KeysOnly hit has details: %+v", o, h)
			}
		}
		if err := rd.Details(ctx, o, keys.Hits); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(keys.Hits, full.Hits) {
			t.Errorf("%+v: details %+v, want %+v", o, keys.Hits, full.Hits)
		}
		if o.Pattern != nil {
			for _, h := range full.Hits {
				if !o.Pattern.MatchString(h.Excerpt) {
					t.Errorf("%s: excerpt of %d does not show the match: %q", o.Pattern, h.Seq, h.Excerpt)
				}
			}
		}
	}
}
