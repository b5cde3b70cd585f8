package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func mustRegexp(t testing.TB, p string) *regexp.Regexp {
	t.Helper()
	re, err := regexp.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	return re
}

func regexpQuote(s string) string { return regexp.QuoteMeta(s) }

func firstWord(s string) string { return strings.Fields(s)[0] }

// hashFiles returns the SHA-256 of each existing path ("" for a missing one).
func hashFiles(t testing.TB, paths ...string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			if os.IsNotExist(err) {
				m[p] = ""
				continue
			}
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		m[p] = hex.EncodeToString(s[:])
	}
	return m
}

// searchRows is the search fixture: thread a (main) and thread b (a subagent), seq = index+1.
var searchRows = []testRow{
	{thread: "a", role: "user", text: "deploy the service to staging with KEY-7"},                                            // 1
	{thread: "a", role: "assistant", kind: "tool_use", name: "Bash", text: `{"cmd":"deploy --now"}`},                         // 2
	{thread: "a", role: "tool", kind: "tool_result", name: "Bash", text: "deploy log\nerror: disk full\nerror: retry later"}, // 3
	{thread: "b", role: "user", text: "unrelated thread mentions staging"},                                                   // 4
	{thread: "a", role: "user", text: "what about staging and the deploy key?", out: true},                                   // 5
	{thread: "a", role: "assistant", text: "done", out: true},                                                                // 6
	{thread: "a", role: "user", text: "staging deploy\nDeploy staging again\nstaging only"},                                  // 7
	{thread: "b", role: "assistant", text: `she said "hi" twice`},                                                            // 8
}

func seqs(hits []Hit) []int64 {
	var s []int64
	for _, h := range hits {
		s = append(s, h.Seq)
	}
	return s
}

func TestSearchQuery(t *testing.T) {
	r := newRoot(t)
	syncTestRows(t, mustSession(t, r, "s"), searchRows)
	rd := mustReader(t, r, "s")
	ctx := context.Background()
	f, tr := false, true

	for _, c := range []struct {
		name         string
		o            SearchOptions
		seqs         []int64 // hit order
		matched      []int
		total, lines int
	}{
		// Rows with both words first (bm25 orders them), then rows with one.
		{"any word, more words first", SearchOptions{Query: "deploy staging"}, nil, []int{2, 2, 2, 1, 1, 1}, 6, 4},
		{"case and punctuation", SearchOptions{Query: "DEPLOY, Deploy"}, nil, []int{1, 1, 1, 1, 1}, 5, 6},
		{"token match: KEY-7 is the tokens key 7", SearchOptions{Query: "KEY-7"}, []int64{1}, []int{1}, 1, 1},
		{"key alone", SearchOptions{Query: "key"}, nil, nil, 2, 2},
		{"roles", SearchOptions{Query: "deploy staging", Roles: []string{"tool", "assistant"}}, nil, []int{1, 1}, 2, 0},
		{"in context only", SearchOptions{Query: "deploy staging", InContext: &tr}, nil, nil, 5, 3},
		{"trimmed only", SearchOptions{Query: "deploy staging", InContext: &f}, []int64{5}, []int{2}, 1, 1},
		{"roles and trimmed", SearchOptions{Query: "staging", Roles: []string{"assistant"}, InContext: &f}, nil, nil, 0, 0},
		{"limit applies to hits only", SearchOptions{Query: "deploy staging", Limit: 2}, nil, []int{2, 2}, 6, 4},
		{"counts only", SearchOptions{Query: "deploy", Limit: -1}, nil, nil, 5, 6},
		{"no match", SearchOptions{Query: "kubernetes"}, nil, nil, 0, 0},
		{"embedded quotes", SearchOptions{Query: `"hi"`}, []int64{8}, []int{1}, 1, 1},
		{"fts syntax is literal", SearchOptions{Query: `NEAR(deploy staging) OR * col:x`}, nil, nil, 4, 0},
		{"separators only", SearchOptions{Query: "- …"}, nil, nil, 0, 0},
		{"separator word ignored for lines", SearchOptions{Query: "error -"}, []int64{3}, []int{1}, 1, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := searchCounts(t, rd, ctx, c.o, c.total, c.lines, c.seqs)
			if c.matched != nil {
				var m []int
				for _, h := range res.Hits {
					m = append(m, h.MatchedTerms)
				}
				if !slices.Equal(m, c.matched) {
					t.Errorf("matched terms %v, want %v", m, c.matched)
				}
			}
			want := c.total
			switch {
			case c.o.Limit < 0:
				want = 0
			case c.o.Limit > 0:
				want = min(want, c.o.Limit)
			}
			if len(res.Hits) != want {
				t.Errorf("%d hits, want %d", len(res.Hits), want)
			}
			for i, h := range res.Hits {
				if i > 0 && h.MatchedTerms == res.Hits[i-1].MatchedTerms && h.Rank < res.Hits[i-1].Rank {
					t.Errorf("hit %d rank %v after %v", h.Seq, h.Rank, res.Hits[i-1].Rank)
				}
				if (c.o.InContext != nil && h.InContext != *c.o.InContext) || (len(c.o.Roles) > 0 && !slices.Contains(c.o.Roles, h.Role)) {
					t.Errorf("hit %+v outside the filters", h)
				}
				want := searchRows[h.Seq-1]
				if h.Role != want.role || h.Name != want.name || h.InContext == want.out || h.Excerpt != want.text {
					t.Errorf("hit %+v, want row %+v", h, want)
				}
			}
		})
	}

	t.Run("details", func(t *testing.T) {
		res, err := rd.Search(ctx, SearchOptions{Query: "disk"})
		if err != nil || len(res.Hits) != 1 {
			t.Fatal(res, err)
		}
		h := res.Hits[0]
		if h.Seq != 3 || h.Kind != "tool_result" || h.Name != "Bash" || h.Role != "tool" || !h.InContext || h.Thread == "" || h.Rank >= 0 {
			t.Errorf("hit %+v", h)
		}
	})
	t.Run("query and pattern", func(t *testing.T) {
		if _, err := rd.Search(ctx, SearchOptions{Query: "x", Pattern: mustRegexp(t, "x")}); err == nil {
			t.Error("both accepted")
		}
		if _, err := rd.Search(ctx, SearchOptions{}); err == nil {
			t.Error("neither accepted")
		}
	})
}

func TestSearchContext(t *testing.T) {
	r := newRoot(t)
	syncTestRows(t, mustSession(t, r, "s"), searchRows)
	rd := mustReader(t, r, "s")
	ctx := context.Background()
	nbSeqs := func(ns []Neighbour) []int64 {
		var s []int64
		for _, n := range ns {
			s = append(s, n.Seq)
		}
		return s
	}
	for _, c := range []struct {
		query         string
		context       int
		before, after []int64
	}{
		{"disk", 1, []int64{2}, []int64{5}},       // thread a: 1 2 3 5 6 7
		{"disk", 2, []int64{1, 2}, []int64{5, 6}}, // in seq order, any role, in or out of context
		{"disk", 99, []int64{1, 2}, []int64{5, 6, 7}},
		{"unrelated", 3, nil, []int64{8}}, // thread b only
		{"disk", 0, nil, nil},
	} {
		t.Run(fmt.Sprintf("%s %d", c.query, c.context), func(t *testing.T) {
			res, err := rd.Search(ctx, SearchOptions{Query: c.query, Context: c.context})
			if err != nil || len(res.Hits) != 1 {
				t.Fatal(res, err)
			}
			h := res.Hits[0]
			if !slices.Equal(nbSeqs(h.Before), c.before) || !slices.Equal(nbSeqs(h.After), c.after) {
				t.Errorf("before %v after %v, want %v %v", nbSeqs(h.Before), nbSeqs(h.After), c.before, c.after)
			}
			for _, n := range append(h.Before, h.After...) {
				want := searchRows[n.Seq-1]
				if n.Role != want.role || n.Name != want.name || n.Excerpt != want.text {
					t.Errorf("neighbour %+v, want %+v", n, want)
				}
			}
		})
	}
}

func TestSearchPattern(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	long := strings.Repeat("é", PatternChars-10) + "NEEDLE at 19990" // within the first 20,000 characters (not bytes)
	tooFar := strings.Repeat("x", PatternChars) + "NEEDLE past 20000"
	rows := append(slices.Clone(searchRows),
		testRow{thread: "a", role: "tool", kind: "tool_result", text: long},                      // 9
		testRow{thread: "a", role: "tool", kind: "tool_result", text: "line\n" + tooFar},         // 10
		testRow{thread: "a", role: "tool", kind: "tool_result", text: tooFar + "\nNEEDLE again"}, // 11
	)
	syncTestRows(t, d, rows)
	rd := mustReader(t, r, "s")
	ctx := context.Background()
	f := false
	for _, c := range []struct {
		name         string
		o            SearchOptions
		seqs         []int64
		total, lines int
	}{
		{"newest first", SearchOptions{Pattern: mustRegexp(t, `(?i)staging`)}, []int64{7, 5, 4, 1}, 4, 6},
		{"^ per line in the line count", SearchOptions{Pattern: mustRegexp(t, `^error: \w+`)}, nil, 0, 2},
		{"(?m) for rows", SearchOptions{Pattern: mustRegexp(t, `(?m)^error: \w+`)}, []int64{3}, 1, 2},
		{"$ per line", SearchOptions{Pattern: mustRegexp(t, `again$`)}, nil, 0, 2},
		{"first 20,000 characters", SearchOptions{Pattern: mustRegexp(t, `NEEDLE`)}, []int64{9}, 1, 2},
		{"filters", SearchOptions{Pattern: mustRegexp(t, `(?i)deploy`), Roles: []string{"user"}, InContext: &f}, []int64{5}, 1, 1},
		{"limit", SearchOptions{Pattern: mustRegexp(t, `(?i)staging`), Limit: 2}, []int64{7, 5}, 4, 6},
		{"counts only", SearchOptions{Pattern: mustRegexp(t, `(?i)staging`), Limit: -1}, nil, 4, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := searchCounts(t, rd, ctx, c.o, c.total, c.lines, c.seqs)
			for _, h := range res.Hits {
				if h.MatchedTerms != 0 || h.Rank != -float64(h.Seq) || h.Role != rows[h.Seq-1].role {
					t.Errorf("hit %+v", h)
				}
				if !c.o.Pattern.MatchString(h.Excerpt) {
					t.Errorf("excerpt of %d does not show the match: %q", h.Seq, h.Excerpt)
				}
			}
		})
	}

	t.Run("excerpt around the match", func(t *testing.T) {
		res, err := rd.Search(ctx, SearchOptions{Pattern: mustRegexp(t, `NEEDLE at`)})
		if err != nil || len(res.Hits) != 1 {
			t.Fatal(res, err)
		}
		ex := res.Hits[0].Excerpt
		if !strings.HasPrefix(ex, "…é") || strings.HasSuffix(ex, "…") || !strings.HasSuffix(ex, "NEEDLE at 19990") || !utf8.ValidString(ex) {
			t.Errorf("excerpt %q", ex)
		}
		if n := utf8.RuneCountInString(ex); n != ExcerptChars+1 {
			t.Errorf("excerpt has %d characters, want %d", n, ExcerptChars+1)
		}
	})
}

func TestSearchPatternBudget(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	rows := benchRows(nil, 300)
	if _, err := d.SyncRows(rows, time.Now()); err != nil {
		t.Fatal(err)
	}
	rd := mustReader(t, r, "s")
	full, err := rd.Search(context.Background(), SearchOptions{Pattern: mustRegexp(t, `end of row`)})
	if err != nil || full.TimedOut || full.TotalMatches != 300 || full.LineMatches != 300 {
		t.Fatalf("unbudgeted = %+v, %v", full, err)
	}
	res, err := rd.Search(context.Background(), SearchOptions{Pattern: mustRegexp(t, `end of row`), Budget: time.Nanosecond})
	// Lines are counted in the same pass as rows: both counts stop where the budget ran out.
	if err != nil || !res.TimedOut || res.TotalMatches >= 300 || res.LineMatches != res.TotalMatches {
		t.Errorf("budgeted = total %d lines %d timedOut %v, %v; want a partial count", res.TotalMatches, res.LineMatches, res.TimedOut, err)
	}
	if len(res.Hits) == 0 || res.Hits[0].Seq != 300 {
		t.Errorf("budgeted hits %v, want the newest first", seqs(res.Hits))
	}
}

func TestExcerpt(t *testing.T) {
	for _, c := range []struct {
		text string
		pos  int
		n    int
		want string
	}{
		{"short text", 6, 600, "short text"},
		{"abcdefghij", 5, 4, "…efgh…"},
		{"abcdefghij", 9, 4, "…ghij"},
		{"abcdefghij", 0, 4, "abcd…"},
		{"ééééé", 3, 2, "…éé…"}, // mid-rune offset moves back to the rune start
	} {
		if got := excerpt(c.text, c.pos, c.n); got != c.want {
			t.Errorf("excerpt(%q, %d, %d) = %q, want %q", c.text, c.pos, c.n, got, c.want)
		}
	}
}

// searchCounts runs rd.Search(o) and checks its totals (and that it did not time out) and,
// when seqs is not nil, the seqs of its hits.
func searchCounts(t *testing.T, rd *Reader, ctx context.Context, o SearchOptions, total, lines int, wantSeqs []int64) SearchResult {
	t.Helper()
	res, err := rd.Search(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.TotalMatches != total || res.LineMatches != lines || res.TimedOut {
		t.Errorf("total %d lines %d timedOut %v, want %d %d", res.TotalMatches, res.LineMatches, res.TimedOut, total, lines)
	}
	if wantSeqs != nil && !slices.Equal(seqs(res.Hits), wantSeqs) {
		t.Errorf("hits %v, want %v", seqs(res.Hits), wantSeqs)
	}
	return res
}
