package store

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"testing"
)

// TestSearchMemoryBudget: with a budget one session's caches fit and two do not, searching a
// second session pushes out the first's (least recently used) caches; a session whose caches
// alone exceed the budget keeps no vectors and only its trigram filters; the budget is never
// exceeded, and every answer equals the one with room for everything (or, for a session
// indexed under the small budget, the full scan's).
func TestSearchMemoryBudget(t *testing.T) {
	ctx := context.Background()
	r := newRoot(t)
	var trs []testRow
	for i := range 200 {
		trs = append(trs, testRow{thread: "a", role: []string{"user", "tool"}[i%2], text: fmt.Sprintf("row KEY-%d w%d\nline %d", i, i%17, i)})
	}
	vecs := map[int64][]float32{}
	for i := range 200 {
		vecs[int64(i+1)] = []float32{float32(i % 7), float32(i % 5), 1, float32(i % 3)}
	}
	for _, sid := range []string{"a", "b"} {
		d := mustSession(t, r, sid)
		syncTestRows(t, d, trs)
		if err := d.PutVectors("m", vecs); err != nil {
			t.Fatal(err)
		}
	}
	searches := []SearchOptions{
		{Query: "w3 line", QueryVector: []float32{1, 2, 1, 0}, VectorModel: "m", Limit: 20},
		{Pattern: regexp.MustCompile(`KEY-1\d`), Limit: 20},
		{Pattern: regexp.MustCompile(`w\d+\s`), Roles: []string{"tool"}, Limit: 20},
	}
	run := func(sid string) []SearchResult {
		t.Helper()
		rd := mustReader(t, r, sid)
		var out []SearchResult
		for _, o := range searches {
			res, err := rd.Search(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res)
		}
		return out
	}
	caches := func(sid string) (vectors, grams, texts bool) {
		t.Helper()
		rd := mustReader(t, r, sid)
		c, err := rd.conn()
		if err != nil {
			t.Fatal(err)
		}
		c.sr.vimu.Lock()
		vectors = c.sr.vectors != nil
		c.sr.vimu.Unlock()
		c.sr.gimu.Lock()
		gi := c.sr.grams
		c.sr.gimu.Unlock()
		if gi != nil {
			gi.mu.Lock()
			grams, texts = true, !gi.noTexts
			gi.mu.Unlock()
		}
		return vectors, grams, texts
	}
	want := run("a")
	if v, g, x := caches("a"); !v || !g || !x {
		t.Fatalf("room for everything: vectors %v filters %v texts %v kept, want all", v, g, x)
	}
	searchMem.mu.Lock()
	one := searchMem.used
	searchMem.mu.Unlock()
	// Room for one session's caches and less than either of another's: b's push out both of a's.
	rd := mustReader(t, r, "a")
	c, err := rd.conn()
	if err != nil {
		t.Fatal(err)
	}
	c.sr.vimu.Lock()
	vi := c.sr.vectors
	c.sr.vimu.Unlock()
	c.sr.gimu.Lock()
	gi := c.sr.grams
	c.sr.gimu.Unlock()
	searchMem.mu.Lock()
	vbytes, gbytes := vi.mem.bytes, gi.mem.bytes
	searchMem.mu.Unlock()

	defer searchMem.setLimit(searchMem.setLimit(one + min(vbytes, gbytes)/2))
	if got := run("b"); !reflect.DeepEqual(got, want) {
		t.Fatalf("b: %+v, want %+v", got, want)
	}
	if v, g, _ := caches("a"); v || g {
		t.Errorf("a after b under a budget for one: vectors %v filters %v kept, want pushed out", v, g)
	}
	if v, g, x := caches("b"); !v || !g || !x {
		t.Errorf("b: vectors %v filters %v texts %v kept, want all", v, g, x)
	}
	if got := run("a"); !reflect.DeepEqual(got, want) {
		t.Fatalf("a again: %+v, want %+v", got, want)
	}

	// Room for a's filters, not with its texts, nor for its vectors alone. (A budget its filters
	// do not fit either leaves the session without an index: TestGramIndexTooBig.)
	textBytes := int64(0)
	for _, tr := range trs {
		textBytes += int64(len(tr.text))
	}
	if vbytes <= gbytes {
		t.Fatalf("vectors %d bytes, filters and texts %d: the budget below no longer leaves the vectors out", vbytes, gbytes)
	}
	searchMem.setLimit(gbytes - textBytes/2)
	if got := run("a"); !reflect.DeepEqual(got, want) {
		t.Fatalf("a under a small budget: %+v, want %+v", got, want)
	}
	if v, g, x := caches("a"); v || !g || x {
		t.Errorf("a under a small budget: vectors %v filters %v texts %v kept, want the filters only", v, g, x)
	}
	// Indexed under that budget from the start: the texts are let go while the rows are read.
	d := mustSession(t, r, "c")
	syncTestRows(t, d, trs)
	rd = mustReader(t, r, "c")
	c, err = rd.conn()
	if err != nil {
		t.Fatal(err)
	}
	o := normalize(searches[2])
	got, err := searchPatternScan(ctx, c, o, true)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := searchPatternScan(ctx, c, o, false)
	if err != nil || !reflect.DeepEqual(got, ref) || got.TotalMatches == 0 {
		t.Fatalf("c under a small budget: %+v, full scan %+v (%v)", got, ref, err)
	}
	if _, g, x := caches("c"); !g || x {
		t.Errorf("c under a small budget: filters %v texts %v kept, want the filters only", g, x)
	}
	searchMem.mu.Lock()
	used, limit := searchMem.used, searchMem.limit
	searchMem.mu.Unlock()
	if used > limit {
		t.Errorf("budget %d, %d used", limit, used)
	}
}
