// Package embedtest holds the fake embedding model shared by the tests of store (its vector
// index and hybrid search) and store/embedding (the fake endpoint the worker calls), so both
// sides of a test embed a text to the same vector.
//
// It imports nothing of this module, so store's own tests may import it; only tests may.
package embedtest

import (
	"hash/fnv"
	"strings"
)

// Vector is a bag-of-words embedding of text, 16 float32 dims: each lower-cased word (with
// its surrounding punctuation trimmed) adds 1 to one dim chosen by its FNV-1a hash, so texts
// sharing words are near by cosine. It is never the zero vector.
func Vector(text string) []float32 {
	v := make([]float32, 16)
	for _, w := range strings.Fields(strings.ToLower(text)) {
		h := fnv.New32a()
		h.Write([]byte(strings.Trim(w, ".,;:!?\"'")))
		v[h.Sum32()%16]++
	}
	v[15] += 0.01 // never the zero vector
	return v
}
