package mcp

import (
	"strings"
	"testing"
)

func reviewHybridServer(t *testing.T, url string) (func(map[string]any) hybridAnswer, *rig) {
	t.Helper()
	r := newRig(t)
	r.addSession(t, "S", r.workspace, 1,
		row{role: "user", kind: "text", text: "Remember the deploy token"}, // 1
		row{role: "user", kind: "text", text: "unrelated chatter"},         // 2
	)
	db, err := r.writer.Session("S")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutVectors("m", map[int64][]float32{1: {1, 0, 0, 0}, 2: {0, 0, 1, 0}}); err != nil {
		t.Fatal(err)
	}
	srv := r.embeddingServer(t, url)
	c := httpClient(t, srv)
	return func(args map[string]any) hybridAnswer {
		t.Helper()
		var a hybridAnswer
		callJSON(t, c, ToolSearch, args, &a)
		return a
	}, r
}

// Contract (Search): "Vector-only hits carry similarity and matched_terms: 0." hitJSON drops
// similarity when it is exactly 0 (an orthogonal vector), so such a hit has none.
func TestReviewVectorOnlyHitCarriesSimilarity(t *testing.T) {
	t.Parallel()
	needReader(t)
	f := &fakeEmbedder{vecs: map[string][]float32{"deploy token": {1, 0, 0, 0}}}
	search, _ := reviewHybridServer(t, f.start(t))
	a := search(map[string]any{"query": "deploy token"})
	if a.Mode != "hybrid" || len(a.Results) != 2 {
		t.Fatalf("mode %q results %+v", a.Mode, a.Results)
	}
	for _, h := range a.Results {
		if h.MatchedTerms != nil && *h.MatchedTerms == 0 && h.Similarity == nil {
			t.Errorf("vector-only hit seq %d has no similarity", h.Seq)
		}
	}
}

// embedding_error goes to the agent: it must not carry credentials of the endpoint URL.
func TestReviewEmbeddingErrorHidesURLPassword(t *testing.T) {
	t.Parallel()
	needReader(t)
	f := &fakeEmbedder{fail: true}
	url := f.start(t)
	url = strings.Replace(url, "http://", "http://user:s3cr3t-key@", 1)
	search, _ := reviewHybridServer(t, url)
	a := search(map[string]any{"query": "deploy token"})
	if a.EmbeddingError == "" {
		t.Fatalf("expected an embedding error: %+v", a)
	}
	if strings.Contains(a.EmbeddingError, "s3cr3t-key") {
		t.Errorf("embedding_error leaks the URL password: %q", a.EmbeddingError)
	}
}
