// Package storetest holds the test helpers shared by the tests of store (package store_test),
// store/embedding, mcp, web and app: a context root in t.TempDir() opened through the
// production store.Open (WAL on), sessions seeded with rows, blobs, registrations and
// events through the real writer, and the status summary's JSON form to decode answers into.
//
// It must import nothing of this module but store, and only tests may import it.
package storetest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

// OpenRoot opens a context root at <t.TempDir()>/context through store.Open and closes it
// when the test ends.
func OpenRoot(tb testing.TB) *store.Root {
	tb.Helper()
	return OpenRootAt(tb, filepath.Join(tb.TempDir(), "context"))
}

// OpenRootAt opens the context root at dir through store.Open and closes it when the test
// ends. A second Root on the same dir stands in for another process.
func OpenRootAt(tb testing.TB, dir string) *store.Root {
	tb.Helper()
	r, err := store.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = r.Close() })
	return r
}

// Session opens the writer of sessions/<sid>.db, creating it.
func Session(tb testing.TB, r *store.Root, sid string) *store.DB {
	tb.Helper()
	d, err := r.Session(sid)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// Row is one messages row to seed.
type Row struct {
	// Thread names the row's thread: rows with the same Thread chain by fingerprint, and the
	// thread's key is the fingerprint of its first row, as the proxy stores them.
	Thread                 string
	Role, Kind, Name, Text string // Kind "" is text
	Trimmed                bool   // in_context = 0
	Blob                   bool   // Text is also written as a blob and the row's blob_id set
	// CutBy is 1 + the index of the row whose fingerprint cut this trimmed row; 0 for none.
	CutBy int
}

// Writes turns rows into the store.RowWrite values the proxy would send, writing the blobs of
// rows with Blob set.
func Writes(tb testing.TB, r *store.Root, rows []Row) []store.RowWrite {
	tb.Helper()
	first := map[string]string{}
	prev := map[string]string{}
	ws := make([]store.RowWrite, 0, len(rows))
	for _, x := range rows {
		if x.Kind == "" {
			x.Kind = "text"
		}
		fp := store.Fingerprint(prev[x.Thread], x.Role, x.Kind, x.Name, x.Text)
		if first[x.Thread] == "" {
			first[x.Thread] = fp
		}
		prev[x.Thread] = fp
		w := store.RowWrite{Fingerprint: fp, Thread: first[x.Thread], Role: x.Role, Kind: x.Kind, Name: x.Name, Text: x.Text, InContext: !x.Trimmed}
		if x.Blob {
			id, err := r.WriteBlob(x.Text)
			if err != nil {
				tb.Fatal(err)
			}
			w.BlobID = id
		}
		ws = append(ws, w)
	}
	for i, x := range rows {
		if x.CutBy > 0 && x.CutBy <= len(ws) && x.Trimmed {
			ws[i].CutFingerprint = ws[x.CutBy-1].Fingerprint
		}
	}
	return ws
}

// SyncRows stores rows in sessions/<sid>.db through the real writer at now (seq = index + 1
// in a fresh session) and returns what it wrote. No rows creates the database only.
func SyncRows(tb testing.TB, r *store.Root, sid string, now time.Time, rows []Row) []store.RowWrite {
	tb.Helper()
	d := Session(tb, r, sid)
	ws := Writes(tb, r, rows)
	if len(ws) > 0 {
		if _, err := d.SyncRows(ws, now); err != nil {
			tb.Fatal(err)
		}
	}
	return ws
}

// Seed is a session to write: its registration (when Agent or Cwd is set), rows and events.
type Seed struct {
	SID          string
	Agent, Cwd   string
	RegisteredAt string // ISO 8601; "" leaves the registration's own default
	Rows         []Row
	Events       []store.Event
	Now          time.Time // the rows' write time; zero is time.Now()
}

// SeedSession writes s and returns the rows as written.
func SeedSession(tb testing.TB, r *store.Root, s Seed) []store.RowWrite {
	tb.Helper()
	if s.Agent != "" || s.Cwd != "" {
		Register(tb, r, store.Registration{SessionID: s.SID, Agent: s.Agent, Cwd: s.Cwd, RegisteredAt: s.RegisteredAt})
	}
	now := s.Now
	if now.IsZero() {
		now = time.Now()
	}
	ws := SyncRows(tb, r, s.SID, now, s.Rows)
	if len(s.Events) > 0 {
		d := Session(tb, r, s.SID)
		for _, e := range s.Events {
			if err := d.AddEvent(e); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return ws
}

// Register writes sessions/<sid>.json.
func Register(tb testing.TB, r *store.Root, reg store.Registration) {
	tb.Helper()
	if err := r.Register(reg); err != nil {
		tb.Fatal(err)
	}
}

// StatusJSON is store.Status as its JSON keys are named (seed 001: `smarter-compact status
// --json` and context_status hold it), for the tests of app and mcp to decode an answer
// through. It is declared apart from store.Status so that a renamed key fails them.
type StatusJSON struct {
	Hours                int               `json:"hours"`
	Sessions             int               `json:"sessions"`
	Trims                int               `json:"trims"`
	TokensSaved          int64             `json:"tokensSaved"`
	MessagesDropped      int64             `json:"messagesDropped"`
	FailOpens            int               `json:"failOpens"`
	LastErrors           []store.FailOpen  `json:"lastErrors"`
	Latest               map[string]string `json:"latest"`
	CheckoutProxyVersion *string           `json:"checkout_proxy_version"`
	ProxyStale           *bool             `json:"proxy_stale"`
	Note                 string            `json:"note"`
	Usage                struct {
		Requests          int            `json:"requests"`
		WithCacheCounts   int            `json:"withCacheCounts"`
		CacheReadTokens   int64          `json:"cacheReadTokens"`
		HitRatio          *float64       `json:"hitRatio"`
		NewCut            map[string]any `json:"newCut"`
		Other             map[string]any `json:"other"`
		Breakpoints       map[string]int `json:"breakpoints"`
		BreakpointLayouts map[string]int `json:"breakpointLayouts"`
	} `json:"usage"`
}
