package store

import (
	"context"
	"slices"
	"testing"
)

func TestSearchHybrid(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	syncTestRows(t, d, []testRow{
		{thread: "a", role: "user", text: "the cache eviction policy is LRU"},          // 1: lexical and near
		{thread: "a", role: "tool", text: "cache eviction least recently used policy"}, // 2: near, no query word "LRU"
		{thread: "a", role: "user", text: "LRU mentioned alone"},                       // 3: lexical only
		{thread: "a", role: "user", text: "unrelated weather talk", out: true},         // 4
		{thread: "a", role: "assistant", text: "cache eviction policy again"},          // 5: filtered out by role
	})
	vecs := map[int64][]float32{}
	for seq, text := range map[int64]string{1: "the cache eviction policy is LRU", 2: "cache eviction least recently used policy",
		3: "LRU mentioned alone", 4: "unrelated weather talk", 5: "cache eviction policy again"} {
		vecs[seq] = fakeVector(text)
	}
	if err := d.PutVectors("m", vecs); err != nil {
		t.Fatal(err)
	}
	if err := d.PutVectors("other", map[int64][]float32{2: {1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	rd := mustReader(t, r, "s")
	q := fakeVector("LRU cache eviction policy")
	res, err := rd.Search(context.Background(), SearchOptions{Query: "LRU", Roles: []string{"user", "tool"}, QueryVector: q, VectorModel: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if res.TotalMatches != 2 {
		t.Errorf("total %d: counts stay lexical", res.TotalMatches)
	}
	// 1 and 3 are in both lists (3 is the shorter lexical hit, 1 the nearer vector); 2 is
	// vector-only; 4 is far but still one of the 50 nearest; 5 is filtered out by role.
	if got := seqs(res.Hits); !slices.Equal(got, []int64{1, 3, 2, 4}) {
		t.Fatalf("hits %v", got)
	}
	h := res.Hits[2]
	if h.MatchedTerms != 0 || h.Similarity <= 0.5 || h.Excerpt != "cache eviction least recently used policy" || h.Role != "tool" {
		t.Errorf("vector-only hit %+v", h)
	}
	if want := -(1.0/61 + 1.0/62); res.Hits[0].Rank-want > 1e-12 || want-res.Hits[0].Rank > 1e-12 || res.Hits[0].MatchedTerms != 1 {
		t.Errorf("fused hit %+v, rank want %v", res.Hits[0], want)
	}
	if want := -1.0 / 62; h.Rank != want {
		t.Errorf("vector-only rank %v, want %v", h.Rank, want)
	}
	// Another model's vectors (of another dimension) are ignored; no vectors: lexical order.
	res, err = rd.Search(context.Background(), SearchOptions{Query: "LRU", QueryVector: q, VectorModel: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if got := seqs(res.Hits); len(got) != 2 {
		t.Errorf("other model hits %v", got)
	}
	// Limit and context still apply.
	res, err = rd.Search(context.Background(), SearchOptions{Query: "LRU", QueryVector: q, VectorModel: "m", Limit: 1, Context: 1})
	if err != nil || len(res.Hits) != 1 || len(res.Hits[0].After) != 1 {
		t.Errorf("limit 1 context 1: %+v %v", res.Hits, err)
	}
}
