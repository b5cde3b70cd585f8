package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clock is a settable time for the health record.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestHealthReportResolveAnnounce(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	h := NewHealth(c.now)
	p := Problem{Kind: HealthUpstream, Key: "api.example", Class: "connection_refused", Text: "dial tcp: connection refused", Hint: "start it"}
	if !h.Report(p) {
		t.Fatal("the first failure of a condition must announce")
	}
	c.t = c.t.Add(time.Second)
	if h.Report(p) {
		t.Fatal("the second failure of the same condition announced again")
	}
	s := h.Snapshot()
	up := s.Kind(HealthUpstream)
	if up.Count != 2 || up.Active != 1 || s.Active != 1 || len(up.Entries) != 1 || up.Entries[0].Count != 2 || !up.Entries[0].Active {
		t.Fatalf("after two reports: %+v", up)
	}
	if up.LastText != p.Text || up.Entries[0].Hint != "start it" || !up.Last.Equal(c.t) {
		t.Errorf("last text/hint/time: %+v", up)
	}
	gen := h.Generation()
	h.Resolve(HealthUpstream, "api.example")
	if h.Generation() == gen {
		t.Error("Resolve did not change the generation")
	}
	if s := h.Snapshot(); s.Active != 0 || s.Kind(HealthUpstream).Entries[0].Resolved.IsZero() {
		t.Fatalf("after Resolve the source is still active: %+v", s.Kind(HealthUpstream))
	}
	gen = h.Generation()
	h.Resolve(HealthUpstream, "api.example") // nothing open: no change
	if h.Generation() != gen {
		t.Error("a Resolve with nothing to resolve changed the generation")
	}
	// cleared, but announced less than HealthActiveFor ago: no second announcement yet
	c.t = c.t.Add(time.Minute)
	if h.Report(p) {
		t.Error("a condition that cleared a minute after its announcement was announced again at once")
	}
	h.Resolve(HealthUpstream, "api.example")
	c.t = c.t.Add(HealthActiveFor)
	if !h.Report(p) {
		t.Error("a condition that cleared was not announced again after HealthActiveFor")
	}
	// an old failure stops being active without a success
	c.t = c.t.Add(HealthActiveFor + time.Second)
	if s := h.Snapshot(); s.Active != 0 {
		t.Errorf("a failure older than HealthActiveFor is still active: %+v", s)
	}
}

func TestHealthWideAndBounded(t *testing.T) {
	h := NewHealth(nil)
	announced := 0
	for i := range 3 * healthEntries {
		if h.Report(Problem{Kind: HealthStoreWrite, Key: fmt.Sprintf("s%02d", i), Class: "disk_full", Wide: true, Text: "database or disk is full"}) {
			announced++
		}
	}
	if announced != 1 {
		t.Errorf("a full disk over %d sessions was announced %d times, want once", 3*healthEntries, announced)
	}
	st := h.Snapshot().Kind(HealthStoreWrite)
	if st.Count != 3*healthEntries || len(st.Entries) != healthEntries || st.Entries[0].Key != fmt.Sprintf("s%02d", 3*healthEntries-1) {
		t.Fatalf("count %d, %d entries, newest %q: want every failure counted and the newest %d sources kept", st.Count, len(st.Entries), st.Entries[0].Key, healthEntries)
	}
	if h.open.Load() != healthEntries {
		t.Errorf("open sources %d, want %d (evicted ones are not open)", h.open.Load(), healthEntries)
	}
	// a non-wide condition announces per source
	if !h.Report(Problem{Kind: HealthStoreWrite, Key: "a", Class: "read_only"}) || !h.Report(Problem{Kind: HealthStoreWrite, Key: "b", Class: "read_only"}) {
		t.Error("read_only of two sessions: each must be announced")
	}
	long := strings.Repeat("é", healthTextMax)
	h.Report(Problem{Kind: HealthFailOpen, Key: "k", Text: long})
	if got := h.Snapshot().Kind(HealthFailOpen).LastText; len(got) > healthTextMax+len("…") || !strings.HasSuffix(got, "…") {
		t.Errorf("a long text is kept as %d bytes", len(got))
	}
}

func TestHealthFileRoundTrip(t *testing.T) {
	r := newRoot(t)
	if err := r.KeepHealth(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(r.Dir(), HealthFileName)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("KeepHealth did not write the file at once: %v", err)
	}
	if fi.Size() != healthFileSize {
		t.Errorf("health.json is %d bytes, want it padded to %d", fi.Size(), healthFileSize)
	}
	if fi.Mode().Perm() != fileMode && os.PathSeparator == '/' {
		t.Errorf("health.json mode %o, want %o", fi.Mode().Perm(), fileMode)
	}
	r.Health().Report(Problem{Kind: HealthUpstream, Key: "api.example", Class: "http_5xx", Text: "HTTP 529 overloaded_error: Overloaded", Hint: "wait"})
	r.Health().Report(Problem{Kind: HealthFailOpen, Key: "parse@proxy/x.go:1", Session: "s1", Class: "parse", Text: "fail-open parse"})
	r2 := reopen(t, r) // Close saves
	snap, err := LoadHealth(r2.Dir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if up := snap.Kind(HealthUpstream); up.Count != 1 || up.Active != 1 || up.Entries[0].Text != "HTTP 529 overloaded_error: Overloaded" {
		t.Errorf("LoadHealth upstream: %+v", up)
	}
	if err := r2.KeepHealth(); err != nil {
		t.Fatal(err)
	}
	s := r2.Health().Snapshot()
	if s.Kind(HealthFailOpen).Count != 1 || s.Active != 2 || s.File != path {
		t.Errorf("the restarted record: %+v", s)
	}
	// a record written over the old file in place reads back as well
	b, _ := os.ReadFile(path)
	if err := overwriteInPlace(path, []byte(`{"since":"2026-12-01T00:00:00Z","kinds":[]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadHealth(r2.Dir(), time.Now()); err != nil {
		t.Errorf("a record written in place does not load: %v", err)
	}
	if err := overwriteInPlace(path, append(b, make([]byte, 10)...)); err == nil {
		t.Error("overwriteInPlace wrote a record longer than the file")
	}
}

func TestHealthFileUnreadableStartsAgain(t *testing.T) {
	r := newRoot(t)
	path := filepath.Join(r.Dir(), HealthFileName)
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := r.KeepHealth()
	if err == nil || !strings.Contains(err.Error(), "starts again") {
		t.Fatalf("KeepHealth over a broken file: %v, want an error that says it starts again", err)
	}
	if _, err := LoadHealth(r.Dir(), time.Now()); err != nil {
		t.Errorf("the replaced file does not load: %v", err)
	}
}

func TestWriteClass(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errors.New("sync rows: database or disk is full"), "disk_full"},
		{fmt.Errorf("x: %w", os.ErrPermission), "read_only"},
		{errors.New("attempt to write a readonly database"), "read_only"},
		{errors.New("database disk image is malformed"), "corrupt"},
		{errors.New("file is not a database"), "corrupt"},
		{errors.New("database is locked"), "locked"},
		{ErrQueueFull, "queue_full"},
		{fmt.Errorf("open: %w", unsupported(4)), "newer_schema"},
		{errClosed, "gone"},
		{errors.New("something else"), "failed"},
	} {
		if got := writeClass(tc.err); got != tc.want {
			t.Errorf("writeClass(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
