package store

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// The listing of sessions/*.db with the size and mtime stamps of each session's files, and the
// cache of summaries and events read at those stamps.

// dashRacyWindow: a file changed this recently before it was stat'ed may change again
// without its mtime moving (a coarse file system clock, a WAL rewritten in place at the same
// size), so what was read from it is not reused; it is read again on the next call.
const dashRacyWindow = 2 * time.Second

// fileStamp is a file's size and mtime (Unix nanoseconds); size -1 when it is missing.
type fileStamp struct{ size, mtime int64 }

var noFile = fileStamp{size: -1}

// stampEntry stamps a directory entry (nil: missing); a link or other non-regular entry
// is stat'ed through.
func stampEntry(dir string, e fs.DirEntry) fileStamp {
	if e == nil {
		return noFile
	}
	var fi fs.FileInfo
	var err error
	if e.Type().IsRegular() {
		fi, err = e.Info()
	} else {
		fi, err = os.Stat(filepath.Join(dir, e.Name()))
	}
	if err != nil {
		return noFile
	}
	return stampOf(fi)
}

// sessionStamp is one state of a session's files: what was read at a stamp holds while
// none of them changes size or mtime. reg (the registration) gives Agent and Cwd; savings
// is the savings records (savings.go).
type sessionStamp struct{ db, wal, trim, reg, savings fileStamp }

// sessionFiles is one sessions/<sid>.db as listed now.
type sessionFiles struct {
	sid   string
	stamp sessionStamp
	// settled: every file was last changed at least dashRacyWindow before the stat, so a
	// later change shows in the stamp; only then is what was read cached.
	settled bool
}

// lastActivity is the newest mtime of .db, .db-wal, .trim.json and .savings.jsonl.
func (f *sessionFiles) lastActivity() time.Time {
	var n int64
	for _, s := range []fileStamp{f.stamp.db, f.stamp.wal, f.stamp.trim, f.stamp.savings} {
		if s.size >= 0 && s.mtime > n {
			n = s.mtime
		}
	}
	return time.Unix(0, n)
}

// bytes is the size of .db, .db-wal and .trim.json.
func (f *sessionFiles) bytes() int64 {
	var n int64
	for _, s := range []fileStamp{f.stamp.db, f.stamp.wal, f.stamp.trim} {
		n += max(s.size, 0)
	}
	return n
}

// listSessionFiles stats the files of every sessions/*.db (dot files and other names left
// out), in name order. A sid that checkSID refuses is listed too; its readers report it. A
// legacy dot database (.x.db) is left out while its escaped one (%2Ex.db) exists: that is the
// one the session's reads and writes use, so the id is listed once; retention still ages the
// legacy files on their own.
// Only files the listing holds are stat'ed: a stat per file, none for a missing one.
func (r *Root) listSessionFiles() ([]sessionFiles, error) {
	dir := filepath.Join(r.dir, "sessions")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	settledBefore := time.Now().Add(-dashRacyWindow).UnixNano()
	byName := make(map[string]fs.DirEntry, len(entries))
	for _, e := range entries {
		byName[e.Name()] = e
	}
	out := make([]sessionFiles, 0, len(entries)/2)
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".db") || !e.Type().IsRegular() {
			continue
		}
		stem := strings.TrimSuffix(name, ".db")
		f := sessionFiles{sid: stem} // a stem that is no session's shows as one with a problem
		if sid, ok := r.SessionOfFile(stem); ok {
			f.sid = sid
			if stem != fileStem(sid) && byName[fileStem(sid)+".db"] != nil {
				continue // a legacy dot name beside its escaped one, which the session's reads open (sessionStem)
			}
		}
		f.stamp = sessionStamp{
			db:      stampEntry(dir, e),
			wal:     stampEntry(dir, byName[name+"-wal"]),
			trim:    stampEntry(dir, byName[stem+".trim.json"]),
			reg:     stampEntry(dir, byName[stem+".json"]),
			savings: stampEntry(dir, byName[stem+savingsSuffix]),
		}
		if f.stamp.db.size < 0 {
			continue // deleted since the listing
		}
		f.settled = true
		for _, s := range []fileStamp{f.stamp.db, f.stamp.wal, f.stamp.trim, f.stamp.reg, f.stamp.savings} {
			if s.size >= 0 && s.mtime > settledBefore {
				f.settled = false
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// dashCache holds what the dashboard reads of each session (Sessions and Daily: a summary;
// Status: its events since a window start), each with the stamp it was read at. The zero
// value is ready; it is safe for concurrent use.
type dashCache struct {
	mu        sync.Mutex
	summaries map[string]*summaryEntry
	events    map[string]*eventsEntry
	savings   map[string]*savingsEntry
}

type summaryEntry struct {
	stamp sessionStamp
	sum   sessionSummary
}

type eventsEntry struct {
	stamp  sessionStamp
	since  string        // events holds every event at or after since
	events []statusEvent // read-only once cached
	err    error         // a lasting reason the database cannot be read (cacheableErr)
}

// prune drops the entries of sessions not in files (deleted since).
func (c *dashCache) prune(files []sessionFiles) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.summaries)+len(c.events)+len(c.savings) == 0 {
		return
	}
	live := make(map[string]bool, len(files))
	for i := range files {
		live[files[i].sid] = true
	}
	for sid := range c.summaries {
		if !live[sid] {
			delete(c.summaries, sid)
		}
	}
	for sid := range c.events {
		if !live[sid] {
			delete(c.events, sid)
		}
	}
	for sid := range c.savings {
		if !live[sid] {
			delete(c.savings, sid)
		}
	}
}

// cacheableErr reports an error that lasts until the file changes (so its stamp does): a
// newer schema or a file that is not a database. A lock, a timeout or a vanished file may
// clear on their own and are read again.
func cacheableErr(err error) bool {
	re := AsReadError(err)
	return re != nil && !re.Transient()
}

// cachedStatusEvents is statusEvents through the cache: events read for an earlier since
// serve any later one (the window moves forward with now), filtered here.
func (r *Root) cachedStatusEvents(ctx context.Context, f *sessionFiles, since string) ([]statusEvent, error) {
	c := &r.dash
	c.mu.Lock()
	e := c.events[f.sid]
	c.mu.Unlock()
	if e != nil && e.stamp == f.stamp && since >= e.since {
		if e.err != nil {
			return nil, e.err
		}
		var out []statusEvent
		for i := range e.events {
			if e.events[i].at >= since {
				out = append(out, e.events[i])
			}
		}
		return out, nil
	}
	events, err := r.statusEvents(ctx, f.sid, since)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if f.settled && (err == nil || cacheableErr(err)) {
		c.mu.Lock()
		if c.events == nil {
			c.events = map[string]*eventsEntry{}
		}
		c.events[f.sid] = &eventsEntry{stamp: f.stamp, since: since, events: slices.Clip(events), err: err}
		c.mu.Unlock()
	}
	return events, err
}
