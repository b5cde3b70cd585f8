package store

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The health record (issue 15 Deliver 2, issue 16 Deliver 1): upstream failures, store write
// failures, fail-opens and thresholds the trim cannot get under, counted store-wide and
// outside every session database, which may be the thing failing. It lives in memory first;
// serve also keeps it in <root>/health.json (health_file.go), so `status` reads it with the
// service down. Each kind keeps its total, the newest text and time, and the newest
// healthEntries sources (a session, an upstream host, a fault location), each with its own
// count, newest text and what to do.

// HealthKind is a kind of problem the health record counts.
type HealthKind string

const (
	// HealthUpstream: the upstream could not be reached, timed out, or answered 4xx/5xx;
	// the key is the upstream host.
	HealthUpstream HealthKind = "upstream"
	// HealthStoreWrite: a write to the store failed (rows, an event, the trim state, a
	// blob); the key is the session id ("blobs" for blobs).
	HealthStoreWrite HealthKind = "store_write"
	// HealthFailOpen: a rewrite fault sent a request upstream unchanged; the key is the
	// fault's type and location.
	HealthFailOpen HealthKind = "fail_open"
	// HealthTrimStuck: a request stays at or over the trim threshold after the trim did
	// what it could, so every request of the session cuts again (and rewrites the prompt
	// cache) or goes out oversized; the key is the session id.
	HealthTrimStuck HealthKind = "trim_stuck"
)

// HealthKinds are the kinds in the order the record shows them.
var HealthKinds = []HealthKind{HealthUpstream, HealthStoreWrite, HealthFailOpen, HealthTrimStuck}

const (
	// healthEntries is how many sources a kind keeps, the newest.
	healthEntries = 8
	// HealthActiveFor is how long a source stays active after its newest failure, unless a
	// success resolved it first: what the banner and the tray's error state show.
	HealthActiveFor = 10 * time.Minute
	// healthKeep: sources older than this are dropped when the record is loaded.
	healthKeep = 7 * 24 * time.Hour
	// healthTextMax bounds each text kept (error, hint, key), in bytes.
	healthTextMax = 400
)

// Problem is one failure as a caller reports it. Texts must hold no secret and no request
// or response body: an error type, a status, the API's error message, a path.
type Problem struct {
	Kind    HealthKind
	Key     string // the source: upstream host, session id, fault type and location
	Session string // the session id when known
	// Class is a short machine name of the cause ("connection_refused", "http_5xx",
	// "disk_full", "read_only", "corrupt", …); one announcement per condition (Report).
	Class string
	Text  string // the newest error text
	Hint  string // what to do
	// Wide marks a condition of the whole store or upstream rather than of one source
	// (a full disk): Report announces it once for all sources, not once per source.
	Wide bool
}

// HealthEntry is one source of a kind as the record keeps it.
type HealthEntry struct {
	Key      string    `json:"key"`
	Session  string    `json:"session,omitempty"`
	Class    string    `json:"class"`
	Text     string    `json:"text"`
	Hint     string    `json:"hint"`
	Count    int64     `json:"count"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	Resolved time.Time `json:"resolved,omitzero"` // the first success after Last; zero when none yet
	// Active: failing now (set in snapshots): Last within HealthActiveFor and not resolved.
	Active bool `json:"active"`
}

// HealthKindState is one kind's totals and sources, newest first.
type HealthKindState struct {
	Kind     HealthKind    `json:"kind"`
	Count    int64         `json:"count"` // failures since the record's Since
	Last     time.Time     `json:"last,omitzero"`
	LastText string        `json:"lastText,omitempty"`
	Active   int           `json:"active"` // sources active now
	Entries  []HealthEntry `json:"entries"`
}

// HealthSnapshot is the whole record at one moment (GET /api/health, `status --json`'s
// "health", <root>/health.json).
type HealthSnapshot struct {
	Since      time.Time         `json:"since"`      // when the counts started
	Generation uint64            `json:"generation"` // grows with every change
	Active     int               `json:"active"`     // sources active now, all kinds
	Kinds      []HealthKindState `json:"kinds"`      // HealthKinds order
	// SaveError is why health.json could not be written last time ("" when it was, or
	// when the record is not saved at all).
	SaveError string `json:"saveError,omitempty"`
	File      string `json:"file,omitempty"` // health.json's path; "" when kept in memory only
}

// Kind returns the snapshot's state of k (zero when absent).
func (s HealthSnapshot) Kind(k HealthKind) HealthKindState {
	for _, ks := range s.Kinds {
		if ks.Kind == k {
			return ks
		}
	}
	return HealthKindState{Kind: k}
}

// ActiveEntries returns the active sources of every kind, newest first.
func (s HealthSnapshot) ActiveEntries() []HealthActive {
	var out []HealthActive
	for _, ks := range s.Kinds {
		for _, e := range ks.Entries {
			if e.Active {
				out = append(out, HealthActive{Kind: ks.Kind, HealthEntry: e})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b HealthActive) int { return b.Last.Compare(a.Last) })
	return out
}

// HealthActive is an active source with its kind.
type HealthActive struct {
	Kind HealthKind `json:"kind"`
	HealthEntry
}

// Health is the health record. Its methods are safe for concurrent use; Resolve on a record
// with nothing active costs one atomic load (it runs on every successful request).
type Health struct {
	now func() time.Time

	mu        sync.Mutex
	since     time.Time
	gen       uint64
	kinds     map[HealthKind]*healthKind
	announced map[string]announcement // conditions announced (Report)
	subs      map[chan struct{}]struct{}
	file      *healthFile // nil: memory only

	// open counts sources not resolved (whatever their age), so Resolve can skip the lock.
	open atomic.Int64
}

type healthKind struct {
	count    int64
	last     time.Time
	lastText string
	entries  []*HealthEntry // newest Last first
}

// NewHealth returns an empty record kept in memory only (Root.Health of a root not saving
// one). now nil means time.Now.
func NewHealth(now func() time.Time) *Health {
	if now == nil {
		now = time.Now
	}
	h := &Health{now: now, kinds: map[HealthKind]*healthKind{}, announced: map[string]announcement{}, subs: map[chan struct{}]struct{}{}}
	h.since = now()
	return h
}

// Report records p and returns whether it announces a condition: true on the first failure
// of its kind and class (and source, unless Wide), and again after that condition cleared (a
// success of the same source, or of any source when Wide) once HealthActiveFor has passed
// since it was last announced. The caller says what to do
// (p.Hint) at warning level when true, and logs at debug level otherwise: a full disk
// says so once, not once per request.
func (h *Health) Report(p Problem) (announce bool) {
	if h == nil || p.Kind == "" {
		return false
	}
	now := h.now()
	p.Key, p.Text, p.Hint, p.Session = clip(p.Key), clip(p.Text), clip(p.Hint), clip(p.Session)
	h.mu.Lock()
	k := h.kinds[p.Kind]
	if k == nil {
		k = &healthKind{}
		h.kinds[p.Kind] = k
	}
	k.count++
	k.last, k.lastText = now, p.Text
	var e *HealthEntry
	for i, x := range k.entries {
		if x.Key == p.Key {
			e = x
			k.entries = slices.Delete(k.entries, i, i+1)
			break
		}
	}
	if e == nil {
		e = &HealthEntry{Key: p.Key, First: now}
		h.open.Add(1)
	} else if !e.Resolved.IsZero() {
		e.Resolved = time.Time{}
		h.open.Add(1)
	}
	e.Session, e.Class, e.Text, e.Hint = p.Session, p.Class, p.Text, p.Hint
	e.Count++
	e.Last = now
	k.entries = slices.Insert(k.entries, 0, e)
	if len(k.entries) > healthEntries {
		for _, x := range k.entries[healthEntries:] {
			if x.Resolved.IsZero() {
				h.open.Add(-1)
			}
		}
		k.entries = k.entries[:healthEntries]
	}
	cond := announceKey(p.Kind, p.Class, p.Key, p.Wide)
	a, seen := h.announced[cond]
	// A condition that cleared is announced again, but not within HealthActiveFor of the
	// last time: a disk that is nearly full lets a write through now and then.
	if announce = !seen || a.cleared && now.Sub(a.at) >= HealthActiveFor; announce {
		h.announced[cond] = announcement{at: now}
	}
	h.changedLocked()
	h.mu.Unlock()
	return announce
}

// announcement is when a condition was last announced and whether it cleared since.
type announcement struct {
	at      time.Time
	cleared bool
}

func announceKey(kind HealthKind, class, key string, wide bool) string {
	if wide {
		return string(kind) + "\x00" + class
	}
	return string(kind) + "\x00" + class + "\x00" + key
}

// Resolve records a success of key (an upstream host that answered, a session whose write
// went through, a session back under its threshold): its source stops being active and its
// conditions may be announced again, as may the kind's store-wide ones.
func (h *Health) Resolve(kind HealthKind, key string) {
	if h == nil || h.open.Load() == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	k := h.kinds[kind]
	if k == nil {
		return
	}
	for _, e := range k.entries {
		if e.Key == key && e.Resolved.IsZero() {
			e.Resolved = h.now()
			h.open.Add(-1)
			prefix := string(kind) + "\x00"
			for c, a := range h.announced {
				// this source's conditions, and the kind's wide ones (no third part)
				if strings.HasPrefix(c, prefix) && (strings.HasSuffix(c, "\x00"+key) || strings.Count(c, "\x00") == 1) {
					a.cleared = true
					h.announced[c] = a
				}
			}
			h.changedLocked()
			return
		}
	}
}

// changedLocked bumps the generation, wakes the subscribers and schedules the save (h.mu
// held).
func (h *Health) changedLocked() {
	h.gen++
	for c := range h.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	if h.file != nil {
		h.file.dirty()
	}
}

// Generation grows with every change of the record (a report, a resolution): the
// dashboard's poll compares it.
func (h *Health) Generation() uint64 {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen
}

// Changed returns a channel that receives (coalesced, never blocking the reporter) after
// every change; it is closed when ctx ends.
func (h *Health) Changed(ctx context.Context) <-chan struct{} {
	c := make(chan struct{}, 1)
	if h == nil {
		return c
	}
	h.mu.Lock()
	h.subs[c] = struct{}{}
	h.mu.Unlock()
	out := make(chan struct{})
	go func() {
		defer close(out)
		defer func() {
			h.mu.Lock()
			delete(h.subs, c)
			h.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-c:
				select {
				case out <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// Snapshot returns a copy of the record, with each source's Active computed at now.
func (h *Health) Snapshot() HealthSnapshot {
	if h == nil {
		return HealthSnapshot{Kinds: emptyKinds()}
	}
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	s := HealthSnapshot{Since: h.since, Generation: h.gen}
	if h.file != nil {
		s.File, s.SaveError = h.file.path, h.file.errText()
	}
	for _, kind := range HealthKinds {
		ks := HealthKindState{Kind: kind, Entries: []HealthEntry{}}
		if k := h.kinds[kind]; k != nil {
			ks.Count, ks.Last, ks.LastText = k.count, k.last, k.lastText
			for _, e := range k.entries {
				c := *e
				c.Active = isActive(c, now)
				if c.Active {
					ks.Active++
				}
				ks.Entries = append(ks.Entries, c)
			}
		}
		s.Active += ks.Active
		s.Kinds = append(s.Kinds, ks)
	}
	return s
}

func emptyKinds() []HealthKindState {
	out := make([]HealthKindState, 0, len(HealthKinds))
	for _, k := range HealthKinds {
		out = append(out, HealthKindState{Kind: k, Entries: []HealthEntry{}})
	}
	return out
}

// isActive: failed within HealthActiveFor and not resolved since.
func isActive(e HealthEntry, now time.Time) bool {
	return e.Resolved.IsZero() && now.Sub(e.Last) < HealthActiveFor
}

// clip bounds a text to healthTextMax bytes at a rune boundary.
func clip(s string) string {
	if len(s) <= healthTextMax {
		return s
	}
	cut := healthTextMax
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
