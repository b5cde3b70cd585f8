package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Registration is sessions/<sid>.json, written by the SessionStart hook and the OpenCode plugin
// (contract: Location). RegisteredAt is ISO 8601 UTC (2026-10-29T17:00:00Z).
type Registration struct {
	SessionID    string `json:"session_id"`
	Agent        string `json:"agent"`
	Cwd          string `json:"cwd"`
	Bank         string `json:"bank,omitempty"`
	RegisteredAt string `json:"registered_at"`
}

// Register writes sessions/<reg.SessionID>.json atomically with mode 600, replacing an earlier
// registration. SessionID must already be sanitized (SanitizeSID); an empty RegisteredAt is
// set to the current time.
func (r *Root) Register(reg Registration) error {
	if err := checkSID(reg.SessionID); err != nil {
		return fmt.Errorf("register session: %w", err)
	}
	if reg.RegisteredAt == "" {
		reg.RegisteredAt = formatTime(time.Now())
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(reg); err != nil {
		return fmt.Errorf("register session: %w", err)
	}
	if err := writeFileAtomic(r.sessionFile(reg.SessionID, ".json"), bytes.TrimSuffix(buf.Bytes(), []byte("\n"))); err != nil {
		return fmt.Errorf("register session: %w", err)
	}
	return nil
}

// Registration reads sessions/<sid>.json; it returns nil, nil when the session is not
// registered, and an error when the file is not valid JSON.
func (r *Root) Registration(sid string) (*Registration, error) {
	b, err := r.readSessionFile(sid, ".json", "read registration")
	if b == nil {
		return nil, err
	}
	var reg Registration
	if err := json.Unmarshal(b, &reg); err != nil {
		return nil, fmt.Errorf("read registration %s: %w", r.sessionFile(sid, ".json"), err)
	}
	return &reg, nil
}

// Force reports whether the /smarter-compact flag sessions/<sid>.force exists (contract:
// Location). An invalid sid has no flag.
func (r *Root) Force(sid string) bool {
	if checkSID(sid) != nil {
		return false
	}
	_, err := os.Stat(r.sessionFile(sid, ".force"))
	return err == nil
}

// SetForce creates the empty flag sessions/<sid>.force (mode 600).
func (r *Root) SetForce(sid string) error {
	if err := checkSID(sid); err != nil {
		return err
	}
	path := r.sessionFile(sid, ".force")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, fileMode)
	if err != nil {
		return fmt.Errorf("set force flag: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("set force flag: %w", err)
	}
	return os.Chmod(path, fileMode)
}

// ClearForce deletes sessions/<sid>.force; a missing flag is not an error.
func (r *Root) ClearForce(sid string) error {
	if err := checkSID(sid); err != nil {
		return err
	}
	if err := removeFile(r.sessionFile(sid, ".force")); err != nil {
		return fmt.Errorf("clear force flag: %w", err)
	}
	return nil
}

// LoadTrimState returns the bytes of sessions/<sid>.trim.json, or nil, nil when absent. The
// shape is the proxy's (contract: Location, "proxy-private").
func (r *Root) LoadTrimState(sid string) ([]byte, error) {
	return r.readSessionFile(sid, ".trim.json", "load trim state")
}

// readSessionFile returns the bytes of sessions/<sid><suffix>, or nil, nil when it is
// absent; a read error is wrapped with what.
func (r *Root) readSessionFile(sid, suffix, what string) ([]byte, error) {
	if err := checkSID(sid); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(r.sessionFile(sid, suffix))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return b, nil
}

// SaveTrimState writes sessions/<sid>.trim.json atomically (temp file + rename, mode 600).
func (r *Root) SaveTrimState(sid string, b []byte) error {
	if err := checkSID(sid); err != nil {
		return err
	}
	path := r.sessionFile(sid, ".trim.json")
	if err := writeFileAtomic(path, b); err != nil {
		return r.noteWrite(sid, path, fmt.Errorf("save trim state: %w", err))
	}
	return nil
}

// writeFileAtomic writes data to a dot-named temp file next to path (the retention sweep
// leaves dot files alone), sets mode 600 and renames it over path. A reader sees the old
// file or the new one, never a part. It does not fsync: the trim state and blobs are written
// on the request path, where a flush costs 1-9 ms (measured: a new cut went from about 8 to
// about 35 ms), and each is rebuilt after a power cut (the next request cuts again; a lost
// blob's full text is still in its row). installer.WriteFileAtomic, for files a user keeps,
// does fsync.
func writeFileAtomic(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = removeFile(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Chmod(tmp, fileMode); err != nil {
		return err
	}
	return renameFile(tmp, path) // retried while a reader holds the old file (Windows)
}
