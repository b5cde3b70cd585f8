package proxy

import "github.com/smarter-compact/smarter-compact/store"

// compactJSON is a tool input's row text: compact JSON in the key order received
// (DESIGN.md §6), written as JSON.stringify would.
func compactJSON(raw []byte) (string, error) { return store.CompactJSON(raw) }
