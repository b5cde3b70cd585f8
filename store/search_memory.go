package store

import (
	"container/list"
	"sync"
)

// Search memory budget: the pooled readers' search caches (each session's decoded vectors,
// vectors_index.go, its pattern index with the row texts, search_trigrams.go, and its word
// postings, search_postings.go) hold at most SearchMemory bytes together in a process. A
// cache that a search grows past the budget pushes out the least recently used others; a
// session whose cache alone is larger is searched without keeping it (its vectors decoded for
// the search and let go, its texts read from SQLite with only the trigram filters kept, its
// postings used for the search and let go). Results never depend on what is kept.
//
// DefaultSearchMemory holds the 768-dim vectors and the texts of a 50,000-row session with
// room to spare (about 154 MB and 35 MB).
const DefaultSearchMemory = 256 << 20

// searchMem is the process's budget; tests lower its limit.
var searchMem = searchMemory{limit: DefaultSearchMemory}

// searchMemory is an LRU account of the caches' sizes. Safe for concurrent use. Its mu is
// taken after a cache's own mu and before a reader's vimu or gimu (the drops).
type searchMemory struct {
	mu    sync.Mutex
	limit int64
	used  int64
	lru   list.List // of *memEntry, most recently used first
}

// memEntry is one cache's place in the budget. The zero value is not in it yet.
type memEntry struct {
	elem  *list.Element
	bytes int64
	drop  func() // takes the cache from its reader (called under searchMemory.mu)
}

// use records that e's cache, dropped by drop when pushed out, was just used and holds bytes
// now, and pushes out the least recently used other caches while the budget is exceeded. It
// reports whether e fits; when it does not, e is out of the budget and its caller lets the
// cache go (or keeps less and calls use again).
func (m *searchMemory) use(e *memEntry, bytes int64, drop func()) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(e)
	if bytes > m.limit {
		return false
	}
	for m.used+bytes > m.limit {
		old := m.lru.Back().Value.(*memEntry)
		m.removeLocked(old)
		old.drop()
	}
	e.bytes, e.drop = bytes, drop
	e.elem = m.lru.PushFront(e)
	m.used += bytes
	return true
}

// budget is the limit in bytes.
func (m *searchMemory) budget() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.limit
}

// forget takes e out of the budget (its reader closed or replaced the cache).
func (m *searchMemory) forget(e *memEntry) {
	m.mu.Lock()
	m.removeLocked(e)
	m.mu.Unlock()
}

func (m *searchMemory) removeLocked(e *memEntry) {
	if e.elem != nil {
		m.lru.Remove(e.elem)
		e.elem = nil
		m.used -= e.bytes
	}
}

// setLimit changes the budget (tests) and returns the old one; caches are pushed out at their
// next use.
func (m *searchMemory) setLimit(n int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.limit
	m.limit = n
	return old
}

// forgetCaches takes sr's caches out of the budget (sr is closing).
func (sr *sharedReader) forgetCaches() {
	sr.gimu.Lock()
	gi := sr.grams
	sr.gimu.Unlock()
	sr.vimu.Lock()
	vi := sr.vectors
	sr.vimu.Unlock()
	sr.pimu.Lock()
	pi := sr.posts
	sr.pimu.Unlock()
	if gi != nil {
		searchMem.forget(&gi.mem)
	}
	if vi != nil {
		searchMem.forget(&vi.mem)
	}
	if pi != nil {
		searchMem.forget(&pi.mem)
	}
}
