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
// an open file; elsewhere the lines would go to the deleted file) and on Root.Close. Each line
// is still one write with O_APPEND, under the file's lock, so concurrent appends do not
// interleave.
const maxOpenSavings = 32

// savingsFiles is a Root's open savings files, by path. The zero value is ready; it is safe
// for concurrent use. Lock order: savingsFiles.mu, then savingsFile.mu is never taken while
// holding it; a file is closed outside savingsFiles.mu under its own lock.
type savingsFiles struct {
	mu      sync.Mutex
	open    map[string]*savingsFile
	lru     list.List      // of *savingsFile in open, most recently used first
	blocked map[string]int // paths being deleted: appends to these open and close the file
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
		h, victims, err := s.handle(path)
		closeSavings(victims)
		if err != nil {
			return err
		}
		if h == nil { // closed Root or retention deleting path: open, write, close
			return appendOnce(path, line)
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

// handle returns the open file of path, opening it when missing, and the files to close to
// stay within the bound; nil when path is not to be kept open.
func (s *savingsFiles) handle(path string) (*savingsFile, []*savingsFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.blocked[path] > 0 {
		return nil, nil, nil
	}
	if h := s.open[path]; h != nil {
		s.lru.MoveToFront(h.elem)
		return h, nil, nil
	}
	f, err := openAppend(path)
	if err != nil {
		return nil, nil, err
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
	var victims []*savingsFile
	for len(s.open) > max {
		v := s.lru.Remove(s.lru.Back()).(*savingsFile)
		delete(s.open, v.path)
		victims = append(victims, v)
	}
	return h, victims, nil
}

// forget takes path out of the set (s.mu held) and returns its file to close, if open.
func (s *savingsFiles) forget(path string) []*savingsFile {
	h := s.open[path]
	if h == nil {
		return nil
	}
	s.lru.Remove(h.elem)
	delete(s.open, path)
	return []*savingsFile{h}
}

// release closes the file of path, if open (its writer parked or closed); the next append
// opens it again.
func (s *savingsFiles) release(path string) {
	s.mu.Lock()
	victims := s.forget(path)
	s.mu.Unlock()
	closeSavings(victims)
}

// evict closes the file of path and keeps it closed until the returned func runs: retention
// deletes it meanwhile, and appends in between open and close it themselves.
func (s *savingsFiles) evict(path string) (unblock func()) {
	s.mu.Lock()
	if s.blocked == nil {
		s.blocked = map[string]int{}
	}
	s.blocked[path]++
	victims := s.forget(path)
	s.mu.Unlock()
	closeSavings(victims) // waits for a write in flight
	return func() {
		s.mu.Lock()
		if s.blocked[path]--; s.blocked[path] <= 0 {
			delete(s.blocked, path)
		}
		s.mu.Unlock()
	}
}

// closeAll closes every open file (Root.Close); later appends open and close the file.
func (s *savingsFiles) closeAll() error {
	s.mu.Lock()
	s.closed = true
	victims := make([]*savingsFile, 0, len(s.open))
	for _, h := range s.open {
		victims = append(victims, h)
	}
	s.open = nil
	s.lru.Init()
	s.mu.Unlock()
	return closeSavings(victims)
}

// openCount is how many savings files are open (tests).
func (s *savingsFiles) openCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// closeSavings closes hs, each after the write in flight on it, and joins their errors.
func closeSavings(hs []*savingsFile) error {
	var errs []error
	for _, h := range hs {
		h.mu.Lock()
		if h.f != nil {
			errs = append(errs, h.f.Close())
			h.f = nil
		}
		h.mu.Unlock()
	}
	return errors.Join(errs...)
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
