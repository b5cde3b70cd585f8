package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// sessionSuffixes are the files of one session (contract: Retention), longest match first:
// .trim.json before .json.
// .sid holds a long id (sid_file.go).
var sessionSuffixes = []string{".trim.json", savingsSuffix, ".log.jsonl", ".db-wal", ".db-shm", ".db", ".json", ".force", sidSuffix}

// blobGrace keeps blobs younger than this out of the orphan pass: the proxy writes a blob
// before the row that references it commits, and a sweep can run in between.
const blobGrace = time.Hour

// sweepInterval is how often the retention pass runs at most (.ttl-stamp).
const sweepInterval = 24 * time.Hour

// SweepReport says what one Sweep did. Ran is false when ttlDays was 0 or the last sweep was
// less than 24 h ago. BlobPassSkipped is true when a remaining session database could not be
// read, so no blob was deleted. Deferred lists the files (absolute paths) another handle
// still held after the retries (Windows: a reader in another process); their session is not
// in SessionsDeleted, and the next Sweep is due at once and tries them again.
type SweepReport struct {
	Ran             bool
	SessionsDeleted []string
	BlobsDeleted    int
	BlobPassSkipped bool
	Deferred        []string
}

// sessionSuffix splits a sessions/ file name into its stem (the session id, or its file
// stem by sid_file.go's rule) and suffix; ok is false for names without a session suffix,
// which the sweep leaves alone. Dot names are the files of dot ids written before the rule.
func sessionSuffix(name string) (sid, suffix string, ok bool) {
	for _, s := range sessionSuffixes {
		if strings.HasSuffix(name, s) && len(name) > len(s) {
			return name[:len(name)-len(s)], s, true
		}
	}
	return "", "", false
}

// Sweep runs the retention pass (contract: Retention) when ttlDays > 0 and .ttl-stamp is
// missing or older than 24 h by now: it sets the stamp's mtime to now, deletes every session
// whose newest file (by mtime) is more than ttlDays days older than now, closing a cached
// writer first, and then deletes blobs/<id>.txt files that no remaining session's
// messages.blob_id references and that are older than one hour. When a remaining session
// database cannot be read (or has a newer schema) the blob pass is skipped. Files that could
// not be deleted are reported in the joined error; the pass goes on past them. A file another
// handle holds (Windows) is retried briefly, then left for the next pass: it is listed in
// Deferred, not an error, and .ttl-stamp is set back so that the next Sweep runs.
func (r *Root) Sweep(ttlDays int, now time.Time) (SweepReport, error) {
	var rep SweepReport
	if ttlDays <= 0 {
		return rep, nil
	}
	due, err := r.claimSweep(now)
	if !due || err != nil {
		return rep, err
	}
	rep.Ran = true

	groups, sids, err := r.sessionGroups()
	if err != nil {
		return rep, err
	}
	cutoff := now.UTC().AddDate(0, 0, -ttlDays)
	var errs []error
	var remaining []string
	for _, sid := range sids {
		g := groups[sid]
		if !g.newest.Before(cutoff) {
			if g.hasDB {
				remaining = append(remaining, r.sessionFileRaw(sid, ".db"))
			}
			continue
		}
		deferred, err := r.deleteSession(sid, g.files)
		if err != nil {
			errs = append(errs, err)
		}
		if len(deferred) > 0 {
			rep.Deferred = append(rep.Deferred, deferred...)
			continue
		}
		rep.SessionsDeleted = append(rep.SessionsDeleted, sid)
	}
	errs = append(errs, r.sweepBlobs(remaining, now, &rep)...)
	if len(rep.Deferred) > 0 {
		// due again at the next call (serve sweeps hourly and at start)
		if err := touch(filepath.Join(r.dir, ".ttl-stamp"), now.Add(-sweepInterval)); err != nil {
			errs = append(errs, fmt.Errorf("retention sweep: %w", err))
		}
	}
	return rep, errors.Join(errs...)
}

// claimSweep says whether a sweep is due by now (.ttl-stamp missing or at least
// sweepInterval old) and, when it is, sets the stamp's mtime to now. It is a step of its
// own because it is the once-a-day gate: nothing else of the pass runs when it says no.
// Its errors are wrapped "retention sweep: ".
func (r *Root) claimSweep(now time.Time) (bool, error) {
	stamp := filepath.Join(r.dir, ".ttl-stamp")
	fi, err := os.Stat(stamp)
	switch {
	case err == nil:
		if now.Sub(fi.ModTime()) < sweepInterval {
			return false, nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("retention sweep: %w", err)
	}
	if err := touch(stamp, now); err != nil {
		return false, fmt.Errorf("retention sweep: %w", err)
	}
	return true, nil
}

// sessionGroup is the files of one session in sessions/, with the newest mtime among them
// and whether one is its database.
type sessionGroup struct {
	files  []string
	newest time.Time
	hasDB  bool
}

// sessionGroups reads sessions/ and groups its regular files with a session suffix by sid,
// returning the groups and their sids sorted. A step of its own because it is the one
// listing of sessions/ the pass decides from; files deleted meanwhile are left out, and a
// failed listing is wrapped "retention sweep: ".
func (r *Root) sessionGroups() (map[string]*sessionGroup, []string, error) {
	sessionsDir := filepath.Join(r.dir, "sessions")
	entries, err := os.ReadDir(sessionsDir)
	if err != nil {
		return nil, nil, fmt.Errorf("retention sweep: %w", err)
	}
	groups := make(map[string]*sessionGroup)
	for _, e := range entries {
		sid, suffix, ok := sessionSuffix(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // deleted since ReadDir
		}
		g := groups[sid]
		if g == nil {
			g = &sessionGroup{}
			groups[sid] = g
		}
		g.files = append(g.files, filepath.Join(sessionsDir, e.Name()))
		if info.ModTime().After(g.newest) {
			g.newest = info.ModTime()
		}
		if suffix == ".db" {
			g.hasDB = true
		}
	}
	sids := make([]string, 0, len(groups))
	for sid := range groups {
		sids = append(sids, sid)
	}
	sort.Strings(sids)
	return groups, sids, nil
}

// sweepBlobs is the orphan pass: it deletes blobs/<id>.txt files that no database of
// remaining references and that are at least blobGrace old, counting them in
// rep.BlobsDeleted. When a database of remaining cannot be read it deletes nothing and sets
// rep.BlobPassSkipped. A step of its own because it runs only after the expired sessions
// are gone; it returns the errors to join after theirs, going on past a blob it could not
// delete.
func (r *Root) sweepBlobs(remaining []string, now time.Time, rep *SweepReport) []error {
	refs := make(map[string]bool)
	for _, path := range remaining {
		if err := blobRefs(path, refs); err != nil {
			rep.BlobPassSkipped = true
			return []error{fmt.Errorf("retention sweep: blob pass skipped: %w", err)}
		}
	}
	blobsDir := filepath.Join(r.dir, "blobs")
	blobs, err := os.ReadDir(blobsDir)
	if err != nil {
		return []error{fmt.Errorf("retention sweep: %w", err)}
	}
	var errs []error
	for _, e := range blobs {
		id, ok := strings.CutSuffix(e.Name(), ".txt")
		if !ok || !ValidBlobID(id) || refs[id] || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < blobGrace {
			continue
		}
		path := filepath.Join(blobsDir, e.Name())
		held, err := removeHeld(path)
		if held {
			rep.Deferred = append(rep.Deferred, path) // the next pass decides again
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("retention sweep: %w", err))
			continue
		}
		rep.BlobsDeleted++
	}
	return errs
}

// sessionFileRaw is sessionFile for a sid taken from a file name, which need not be sanitized.
func (r *Root) sessionFileRaw(sid, suffix string) string {
	return filepath.Join(r.dir, "sessions", sid+suffix)
}

// deleteSession closes the pooled reader, the cached writer and the open savings file of
// sid, if any, and removes its files (Windows refuses to delete an open file; elsewhere an
// open savings file would take lines after it was deleted), the database first: when another
// handle still holds it, the session's other files stay too, so that the next pass finds
// the session whole. deferred lists the files left because they were held.
func (r *Root) deleteSession(stem string, files []string) (deferred []string, err error) {
	sid, ok := r.SessionOfFile(stem)
	if !ok {
		sid = stem
	}
	defer r.readers.evict(sid)()
	r.mu.Lock()
	e := r.sessions[sid]
	r.mu.Unlock()
	if e != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.db != nil {
			_ = e.db.close()
			e.db = nil
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, savingsSuffix) {
			defer r.savings.evict(f)()
		}
	}
	files = slices.Clone(files)
	// the database, then its -wal and -shm, then the rest, in a stable order
	rank := func(f string) int {
		switch {
		case strings.HasSuffix(f, ".db"):
			return 0
		case strings.HasSuffix(f, ".db-wal"), strings.HasSuffix(f, ".db-shm"):
			return 1
		}
		return 2
	}
	slices.SortStableFunc(files, func(a, b string) int { return rank(a) - rank(b) })
	var errs []error
	for _, f := range files {
		held, err := removeHeld(f)
		if held {
			deferred = append(deferred, f)
			if rank(f) == 0 {
				return deferred, errors.Join(errs...) // keep the session whole
			}
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("retention sweep: %w", err))
		}
	}
	return deferred, errors.Join(errs...)
}

// blobRefs adds the blob ids a session database references to refs, reading it read-only.
// A version 0 database (created, schema not yet committed) has none.
//
// The read must not make the session look used: openSnapshot opens it without creating
// files and puts back the -shm mtime the read changed.
func blobRefs(path string, refs map[string]bool) (err error) {
	db, restore, err := openSnapshot(path, "sqlite3")
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		restore()
	}()
	ctx := context.Background()
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if v == 0 {
		return nil
	}
	if v < 0 || v > SchemaVersion {
		return fmt.Errorf("read %s: %w", path, unsupported(v))
	}
	rows, err := db.QueryContext(ctx, "SELECT DISTINCT blob_id FROM messages WHERE blob_id IS NOT NULL")
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		refs[id] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// touch creates path (mode 600) when missing and sets its mtime to t.
func touch(path string, t time.Time) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, fileMode)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chtimes(path, t, t)
}
