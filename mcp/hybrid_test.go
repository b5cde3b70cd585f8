package mcp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeEmbedder is an OpenAI-compatible /embeddings endpoint that answers each input with the
// vector the test set for that text ([0, 0, 0, 1] otherwise), or fails with 500.
type fakeEmbedder struct {
	mu     sync.Mutex
	vecs   map[string][]float32
	fail   bool
	models []string
}

func (f *fakeEmbedder) start(t *testing.T) string {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.models = append(f.models, req.Model)
		if f.fail {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var out struct {
			Data []item `json:"data"`
		}
		for i, in := range req.Input {
			v := f.vecs[in]
			if v == nil {
				v = []float32{0, 0, 0, 1}
			}
			out.Data = append(out.Data, item{i, v})
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/v1"
}

type hybridAnswer struct {
	Results []struct {
		Seq          int64    `json:"seq"`
		MatchedTerms *int     `json:"matched_terms"`
		Similarity   *float64 `json:"similarity"`
	} `json:"results"`
	TotalMatches   int    `json:"total_matches"`
	Mode           string `json:"mode"`
	ModeNote       string `json:"mode_note"`
	EmbeddingError string `json:"embedding_error"`
	Vectors        *struct {
		Filled  int `json:"filled"`
		Pending int `json:"pending"`
		Skipped int `json:"skipped"`
	} `json:"vectors"`
}

func TestSearchHybrid(t *testing.T) {
	t.Parallel()
	needReader(t)
	r := newRig(t)
	r.addSession(t, "S", r.workspace, 1,
		row{role: "user", kind: "text", text: "Remember the deploy token"},                // 1
		row{role: "tool", kind: "tool_result", name: "Bash", text: "credentials rotated"}, // 2
		row{role: "user", kind: "text", text: "unrelated chatter"},                        // 3
		row{role: "user", kind: "text", text: "  "},                                       // 4: blank
	)
	f := &fakeEmbedder{vecs: map[string][]float32{"deploy token": {1, 0, 0, 0}}}
	url := f.start(t)
	srv := r.embeddingServer(t, url)
	c := httpClient(t, srv)
	search := func(args map[string]any) hybridAnswer {
		t.Helper()
		var a hybridAnswer
		callJSON(t, c, ToolSearch, args, &a)
		return a
	}

	// Vectors on but not built yet: lexical by default, with progress.
	a := search(map[string]any{"query": "deploy token"})
	if a.Mode != "lexical" || a.ModeNote != "" || a.Vectors == nil || a.Vectors.Filled != 0 || a.Vectors.Pending != 3 || a.Vectors.Skipped != 0 {
		t.Errorf("no vectors yet: mode %q note %q vectors %+v", a.Mode, a.ModeNote, a.Vectors)
	}

	db, err := r.writer.Session("S")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutVectors("m", map[int64][]float32{1: {0.5, 0.5, 0, 0}, 2: {0.9, 0.1, 0, 0}, 3: {0, 0, 1, 0}}); err != nil {
		t.Fatal(err)
	}

	// Default mode with vectors: hybrid; the vector-only hit has matched_terms 0.
	a = search(map[string]any{"query": "deploy token"})
	if a.Mode != "hybrid" || a.EmbeddingError != "" || a.TotalMatches != 1 {
		t.Fatalf("mode %q error %q total %d", a.Mode, a.EmbeddingError, a.TotalMatches)
	}
	if len(a.Results) != 3 || a.Results[0].Seq != 1 || a.Results[1].Seq != 2 {
		t.Fatalf("results %+v", a.Results)
	}
	if h := a.Results[1]; h.MatchedTerms == nil || *h.MatchedTerms != 0 || h.Similarity == nil || *h.Similarity < 0.9 {
		t.Errorf("vector-only hit %+v", h)
	}
	if a.Vectors == nil || a.Vectors.Filled != 3 || a.Vectors.Pending != 0 {
		t.Errorf("vectors %+v", a.Vectors)
	}
	f.mu.Lock()
	if f.models[len(f.models)-1] != "m" {
		t.Errorf("query embedded with %q", f.models[len(f.models)-1])
	}
	f.mu.Unlock()

	// Lexical when asked; pattern searches are lexical and carry no vectors.
	if a = search(map[string]any{"query": "deploy token", "mode": "lexical"}); a.Mode != "lexical" || len(a.Results) != 1 {
		t.Errorf("lexical: %+v", a)
	}
	if a = search(map[string]any{"pattern": "deploy"}); a.Mode != "lexical" || a.Vectors != nil {
		t.Errorf("pattern: %+v", a)
	}

	// The endpoint fails: lexical with embedding_error.
	f.mu.Lock()
	f.fail = true
	f.mu.Unlock()
	a = search(map[string]any{"query": "deploy token", "mode": "hybrid"})
	if a.Mode != "lexical" || !strings.Contains(a.EmbeddingError, "http_500") || len(a.Results) != 1 {
		t.Errorf("embedding down: mode %q error %q results %+v", a.Mode, a.EmbeddingError, a.Results)
	}
}
