package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// health.json keeps the health record across restarts and for `status` with the service
// down. Why a small JSON file and not SQLite: the record must survive what breaks the
// session databases (a full disk, a read-only or corrupt file, a lock), so it shares none of
// their machinery (no WAL, no journal, no busy timeout, no schema); it is a few kilobytes,
// written at most once per healthSaveEvery, read whole, and a person can read it.
//
// It is written atomically (a temp file renamed over it, mode 600) and always padded with
// spaces to healthFileSize. When the atomic write fails (the disk is full: the temp file
// needs new blocks), the record is written over the old file in place, into blocks the file
// already holds, so a disk that filled up after the service started still gets the record
// that says so. Torn by a crash in that fallback, the file fails to parse and LoadHealth
// says so; the next save writes it whole.

// HealthFileName is the health record's file in the context root.
const HealthFileName = "health.json"

const (
	// healthFileSize is the size health.json is padded to: room for every kind's sources.
	healthFileSize = 64 << 10
	// healthSaveEvery bounds how often health.json is written.
	healthSaveEvery = time.Second
)

// healthFile saves a record to path. mu guards the flags; writeMu serializes the writes,
// which run without h.mu or mu held (lock order: Health.mu, then healthFile.mu).
type healthFile struct {
	path string
	h    *Health

	mu      sync.Mutex
	timer   *time.Timer
	pending bool // a save is scheduled
	last    error
	closed  bool

	writeMu sync.Mutex
}

// KeepHealth makes the root's health record persistent in <root>/health.json: it loads what
// the file holds (sources older than seven days are dropped), writes it back at once (so the
// file exists, padded, before a disk fills up) and then within healthSaveEvery of every
// change, and once more on Close. serve calls it; other users of the store keep the record
// in memory. A file that cannot be read or parsed is replaced, and its error returned after
// the record is set up; a failed write is returned and kept in HealthSnapshot.SaveError.
func (r *Root) KeepHealth() error {
	h := r.health
	path := filepath.Join(r.dir, HealthFileName)
	snap, lerr := readHealthFile(path)
	if errors.Is(lerr, fs.ErrNotExist) {
		lerr = nil
	}
	h.mu.Lock()
	if lerr == nil && snap != nil {
		h.restoreLocked(*snap)
	}
	f := &healthFile{path: path, h: h}
	h.file = f
	h.mu.Unlock()
	werr := f.save()
	if lerr != nil {
		return fmt.Errorf("health record %s was unreadable and starts again: %w", path, lerr)
	}
	return werr
}

// Health returns the root's health record (in memory, and in health.json after KeepHealth).
func (r *Root) Health() *Health { return r.health }

// LoadHealth reads <dir>/health.json, a context root's saved health record, with each
// source's Active computed at now (what `status` shows with the service down). A missing
// file wraps fs.ErrNotExist.
func LoadHealth(dir string, now time.Time) (HealthSnapshot, error) {
	path := filepath.Join(dir, HealthFileName)
	snap, err := readHealthFile(path)
	if err != nil {
		return HealthSnapshot{}, err
	}
	s := *snap
	s.File, s.Active = path, 0
	for i := range s.Kinds {
		ks := &s.Kinds[i]
		ks.Active = 0
		if ks.Entries == nil {
			ks.Entries = []HealthEntry{}
		}
		for j := range ks.Entries {
			e := &ks.Entries[j]
			e.Active = isActive(*e, now)
			if e.Active {
				ks.Active++
			}
		}
		s.Active += ks.Active
	}
	return s, nil
}

func readHealthFile(path string) (*HealthSnapshot, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s HealthSnapshot
	if err := json.Unmarshal(bytes.TrimRight(b, " \n"), &s); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return &s, nil
}

// restoreLocked loads a saved record into h (h.mu held).
func (h *Health) restoreLocked(s HealthSnapshot) {
	now := h.now()
	kept := false
	for _, ks := range s.Kinds {
		k := &healthKind{count: ks.Count, last: ks.Last, lastText: ks.LastText}
		for _, e := range ks.Entries {
			if now.Sub(e.Last) > healthKeep || len(k.entries) == healthEntries {
				continue
			}
			c := e
			c.Active = false
			k.entries = append(k.entries, &c)
			if c.Resolved.IsZero() {
				h.open.Add(1)
			}
		}
		if len(k.entries) > 0 {
			kept = true
		}
		h.kinds[ks.Kind] = k
	}
	if kept && !s.Since.IsZero() {
		h.since = s.Since
	} else {
		clear(h.kinds) // nothing recent: the counts start again now
	}
	h.gen = s.Generation + 1
}

// dirty schedules a save within healthSaveEvery (Health.mu held: it must not block).
func (f *healthFile) dirty() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending || f.closed {
		return
	}
	f.pending = true
	f.timer = time.AfterFunc(healthSaveEvery, func() { _ = f.save() })
}

// save writes the record now.
func (f *healthFile) save() error {
	f.mu.Lock()
	f.pending = false
	f.mu.Unlock()
	f.writeMu.Lock()
	defer f.writeMu.Unlock()
	snap := f.h.Snapshot()
	snap.File, snap.SaveError = "", ""
	b, err := json.MarshalIndent(snap, "", " ")
	if err == nil {
		err = writeHealthFile(f.path, b)
	}
	f.mu.Lock()
	changed := (f.last == nil) != (err == nil)
	f.last = err
	f.mu.Unlock()
	if changed {
		// SaveError is part of the record's view: the dashboard shows it
		f.h.mu.Lock()
		f.h.gen++
		f.h.mu.Unlock()
	}
	return err
}

func (f *healthFile) errText() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		return ""
	}
	return f.last.Error()
}

// closeFile stops saving the record after one last save (Root.Close); nothing when the
// record is kept in memory only.
func (h *Health) closeFile() error {
	h.mu.Lock()
	f := h.file
	h.mu.Unlock()
	if f == nil {
		return nil
	}
	return f.close()
}

// close stops the timer and saves once more.
func (f *healthFile) close() error {
	f.mu.Lock()
	f.closed = true
	if f.timer != nil {
		f.timer.Stop()
	}
	f.mu.Unlock()
	return f.save()
}

// writeHealthFile writes b padded to healthFileSize: atomically, else in place over the
// old file's blocks (a full disk).
func writeHealthFile(path string, b []byte) error {
	b = append(b, '\n')
	if len(b) < healthFileSize {
		b = append(b, bytes.Repeat([]byte{' '}, healthFileSize-len(b))...)
	}
	err := writeFileAtomic(path, b)
	if err == nil {
		return nil
	}
	if ierr := overwriteInPlace(path, b); ierr != nil {
		return fmt.Errorf("save health record: %w (writing in place: %v)", err, ierr)
	}
	return nil
}

// overwriteInPlace writes b over the start of the existing file path, padded to its size
// with spaces; it fails when the file is missing or shorter than b.
func overwriteInPlace(path string, b []byte) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < int64(len(b)) {
		return fmt.Errorf("the file holds %d bytes, the record needs %d", fi.Size(), len(b))
	}
	if n := int(fi.Size()) - len(b); n > 0 {
		b = append(b, bytes.Repeat([]byte{' '}, n)...)
	}
	_, err = f.WriteAt(b, 0)
	return err
}
