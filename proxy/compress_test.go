package proxy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

func TestCompressedToolResultIsStoredWholeAndServedFromABlob(t *testing.T) {
	s := testSettings(1_000_000)
	s.CompressOverTokens = 200
	r := newRig(t, s, fakeupstream.Options{})
	c := r.client(t, "comp", "claude-mythos-5-1")
	c.userTurn("read the big log, use tools", output(300, 0))
	c.userTurn("thanks", output(1, 0))
	reqs := r.accepted(t)
	last := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(last, "[smarter-compact: tool result compressed, ") {
		t.Fatal("the large tool result was not compressed")
	}
	if strings.Contains(last, "step 0 line 100:") {
		t.Fatal("a middle line of the result reached the model")
	}
	db := sessionDB(t, r, "comp")
	var text, blob string
	must(t, db.QueryRow(`SELECT text, blob_id FROM messages WHERE kind = 'tool_result' AND blob_id IS NOT NULL`).Scan(&text, &blob))
	full := output(300, 0)(0)
	if text != full {
		t.Fatalf("the row holds %d chars, want the full %d", len(text), len(full))
	}
	b, err := os.ReadFile(filepath.Join(r.root.Dir(), "blobs", blob+".txt"))
	must(t, err)
	if string(b) != full {
		t.Fatal("the blob is not the full text")
	}
	if !strings.Contains(last, `smart_compact_get(id=\"`+blob+`\")`) {
		t.Fatal("the header does not name the blob")
	}
	// the same result renders the same bytes on every request (cache-stable)
	if a, b := compressedContent(t, reqs[1].Body), compressedContent(t, reqs[len(reqs)-1].Body); a == "" || a != b {
		t.Fatal("the compressed result changed between requests")
	}
}

// compressedContent returns the first tool_result content that carries the compressed header.
func compressedContent(t *testing.T, body []byte) string {
	for _, m := range decodeJSON(t, body)["messages"].([]any) {
		blocks, _ := m.(map[string]any)["content"].([]any)
		for _, b := range blocks {
			if s, ok := b.(map[string]any)["content"].(string); ok && strings.HasPrefix(s, "[smarter-compact: tool result compressed") {
				return s
			}
		}
	}
	return ""
}
