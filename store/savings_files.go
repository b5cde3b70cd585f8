package store

import (
	"container/list"
	"errors"
	"os"
	"strings"
	"sync"
)

// Open savings files (issue 18): AppendSavings runs on the request path for every usage
// event, and opening and closing sessions/<sid>.savings.jsonl each time cost two system calls
// and a path lookup per line. A Root keeps at most maxOpenSavings of these files open for
// appending, least recently used closed first. A session's file is also closed when its
// writer parks or closes (writers.go), before retention deletes it (Windows refuses to delete
// an open file; elsewhere the lines would go to the deleted file) and on Root.Close.
//
// Each line is one write with O_APPEND, and a path has at most one open handle at any moment:
// a handle is closed while savingsFiles.mu is held, so no second one can be opened beside it,
// and the open-write-close of a path that is not kept open runs under that lock too. O_APPEND
// alone is not enough: under wine two handles appending to one file overwrite each other's
// lines (the CI run of stop 22 found a torn record), and Windows documents no atomicity for
// appends from separate handles.
const maxOpenSavings = 32

// savingsFiles is a Root's open savings files, by path. The zero value is ready; it is safe
// for concurrent use. Lock order: savingsFiles.mu before savingsFile.mu (a file is closed
// holding both); a write holds only its file's lock.
type savingsFiles struct {
	mu      sync.Mutex
	open    map[string]*savingsFile
	lru     list.List   // of *savingsFile in open, most recently used first
	blocked blockCounts // paths being deleted: appends to these open and close the file
	closed  bool
	max     int // 0: maxOpenSavings (tests lower it)
}

// savingsFile is one open savings file.
type savingsFile struct {
	path string
	elem *list.Element // in savingsFiles.lru, under savingsFiles.mu

	mu sync.Mutex // one write at a time
	f  *os.File   // nil once closed
}

// appendLine writes line (one whole record with its newline) to the file at path in one
// write, creating it mode 600, through the kept-open handle when there is one.
func (s *savingsFiles) appendLine(path string, line []byte) error {
	for {
		h, err := s.handle(path, line)
		if err != nil || h == nil {
			return err
		}
		h.mu.Lock()
		if h.f == nil { // closed between handle and here: take a fresh one
			h.mu.Unlock()
			continue
		}
		_, err = h.f.Write(line)
		h.mu.Unlock()
		return err
	}
}

// handle returns the open file of path, opening it when missing and closing the least
// recently used ones beyond the bound. When path is not to be kept open (closed Root, or
// retention deleting it) it writes line itself with an open-write-close, under s.mu so that
// it never runs beside another handle of path, and returns nil.
func (s *savingsFiles) handle(path string, line []byte) (*savingsFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.blocked[path] > 0 {
		return nil, appendOnce(path, line)
	}
	if h := s.open[path]; h != nil {
		s.lru.MoveToFront(h.elem)
		return h, nil
	}
	f, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	if s.open == nil {
		s.open = map[string]*savingsFile{}
	}
	h := &savingsFile{path: path, f: f}
	h.elem = s.lru.PushFront(h)
	s.open[path] = h
	max := s.max
	if max <= 0 {
		max = maxOpenSavings
	}
	for len(s.open) > max {
		v := s.lru.Remove(s.lru.Back()).(*savingsFile)
		delete(s.open, v.path)
		v.close() // under s.mu: v.path gets no new handle until v's is closed
	}
	return h, nil
}

// forget takes path out of the set and closes its file, if open; s.mu is held.
func (s *savingsFiles) forget(path string) {
	h := s.open[path]
	if h == nil {
		return
	}
	s.lru.Remove(h.elem)
	delete(s.open, path)
	h.close()
}

// release closes the file of path, if open (its writer parked or closed); the next append
// opens it again.
func (s *savingsFiles) release(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(path)
}

// evict closes the file of path and keeps it closed until the returned func runs: retention
// deletes it meanwhile, and appends in between open and close it themselves.
func (s *savingsFiles) evict(path string) (unblock func()) {
	s.mu.Lock()
	unblock = s.blocked.add(&s.mu, path)
	s.forget(path) // waits for a write in flight
	s.mu.Unlock()
	return unblock
}

// closeAll closes every open file (Root.Close); later appends open and close the file.
func (s *savingsFiles) closeAll() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for _, h := range s.open {
		errs = append(errs, h.close())
	}
	s.open = nil
	s.lru.Init()
	return errors.Join(errs...)
}

// openCount is how many savings files are open (tests).
func (s *savingsFiles) openCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// close closes h's file after the write in flight on it; later writers find f nil and take
// a fresh handle.
func (h *savingsFile) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return nil
	}
	err := h.f.Close()
	h.f = nil
	return err
}

func openAppend(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, fileMode)
}

// appendOnce opens path, writes line in one write and closes it.
func appendOnce(path string, line []byte) error {
	f, err := openAppend(path)
	if err != nil {
		return err
	}
	_, werr := f.Write(line)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

// savingsOfDB is the savings file beside the session database at dbPath.
func savingsOfDB(dbPath string) string {
	return strings.TrimSuffix(dbPath, ".db") + savingsSuffix
}
