package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"
)

// openSavingsFile is the kept-open handle of sid's savings file; it fails the test when
// there is none.
func openSavingsFile(t *testing.T, r *Root, sid string) *os.File {
	t.Helper()
	r.savings.mu.Lock()
	defer r.savings.mu.Unlock()
	h := r.savings.open[r.sessionFile(sid, savingsSuffix)]
	if h == nil || h.f == nil {
		t.Fatalf("savings file of %s not open", sid)
	}
	return h.f
}

// wantClosed fails the test unless f was closed.
func wantClosed(t *testing.T, what string, f *os.File) {
	t.Helper()
	if _, err := f.Write([]byte("x\n")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("%s: write after close = %v, want os.ErrClosed", what, err)
	}
}

// savingsLines reads sid's savings file and fails the test unless every line is a whole
// record; it returns the records' ThresholdTokens in file order.
func savingsLines(t *testing.T, r *Root, sid string) []int64 {
	t.Helper()
	b, err := os.ReadFile(r.sessionFile(sid, savingsSuffix))
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		var rec SavingsRecord
		if err := json.Unmarshal(line, &rec); err != nil || rec.At == "" {
			t.Fatalf("%s line %d not a whole record (%v): %q", sid, i+1, err, line)
		}
		out = append(out, rec.ThresholdTokens)
	}
	return out
}

func TestAppendSavingsConcurrentWholeLines(t *testing.T) {
	t.Parallel()
	r := newRoot(t)
	r.savings.max = 2 // three sessions over two open files: appends race with closes too
	const goroutines, each = 12, 150
	sids := []string{"a", "b", "c"}
	long := string(bytes.Repeat([]byte("m"), 3000)) // lines longer than a pipe buffer
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				rec := SavingsRecord{At: "2026-12-02T08:00:00Z", Model: long, ThresholdTokens: int64(g*each + i)}
				if err := r.AppendSavings(sids[(g+i)%len(sids)], rec); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, sid := range sids {
		for _, n := range savingsLines(t, r, sid) {
			if seen[n] {
				t.Errorf("record %d twice", n)
			}
			seen[n] = true
		}
	}
	if len(seen) != goroutines*each {
		t.Errorf("%d records, want %d", len(seen), goroutines*each)
	}
	if n := r.savings.openCount(); n > 2 {
		t.Errorf("%d savings files open, want at most 2", n)
	}
	if p := perm(t, r.sessionFile("a", savingsSuffix)); wrongMode(t, p, 0o600) {
		t.Errorf("savings file mode %o, want 600", p)
	}
}

func TestSavingsFilesBound(t *testing.T) {
	t.Parallel()
	r := newRoot(t)
	rec := SavingsRecord{At: "2026-12-02T08:00:00Z", Model: "m"}
	var first []*os.File
	for i := range maxOpenSavings + 8 {
		sid := fmt.Sprintf("s%d", i)
		if err := r.AppendSavings(sid, rec); err != nil {
			t.Fatal(err)
		}
		if i < 8 {
			first = append(first, openSavingsFile(t, r, sid))
		}
	}
	if n := r.savings.openCount(); n != maxOpenSavings {
		t.Errorf("%d savings files open, want %d", n, maxOpenSavings)
	}
	for i, f := range first {
		wantClosed(t, fmt.Sprintf("least recently used s%d", i), f)
	}
	// s8 is the least recently used open one; appending to s0 again closes it
	s8 := openSavingsFile(t, r, "s8")
	if err := r.AppendSavings("s0", rec); err != nil {
		t.Fatal(err)
	}
	wantClosed(t, "s8", s8)
	openSavingsFile(t, r, "s9")
	if got := savingsLines(t, r, "s0"); len(got) != 2 {
		t.Errorf("s0 has %d records, want 2", len(got))
	}
}

func TestWriterParkClosesSavingsFile(t *testing.T) {
	t.Parallel()
	r := newRoot(t)
	d := mustSession(t, r, "w")
	if _, err := d.SyncRows(chain([4]string{"user", "text", "", "x"}), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := r.AppendSavings("w", SavingsRecord{At: "2026-12-02T08:00:00Z"}); err != nil {
		t.Fatal(err)
	}
	f := openSavingsFile(t, r, "w")
	if !d.park() {
		t.Fatal("writer did not park")
	}
	wantClosed(t, "after the writer parked", f)
	if err := r.AppendSavings("w", SavingsRecord{At: "2026-12-02T08:00:01Z"}); err != nil {
		t.Fatal(err)
	}
	f = openSavingsFile(t, r, "w")
	if err := d.close(); err != nil {
		t.Fatal(err)
	}
	wantClosed(t, "after the writer closed", f)
	if got := savingsLines(t, r, "w"); len(got) != 2 {
		t.Errorf("%d records, want 2", len(got))
	}
}

func TestSweepDeletesOpenSavingsFile(t *testing.T) {
	t.Parallel()
	now := time.Now()
	r := newRoot(t)
	if err := r.AppendSavings("old", SavingsRecord{At: "2026-11-01T08:00:00Z", ThresholdTokens: 1}); err != nil {
		t.Fatal(err)
	}
	f := openSavingsFile(t, r, "old")
	path := r.sessionFile("old", savingsSuffix)
	age(t, path, now.AddDate(0, 0, -40))
	rep, err := r.Sweep(30, now)
	if err != nil || !reflect.DeepEqual(rep.SessionsDeleted, []string{"old"}) {
		t.Fatalf("Sweep = %+v, %v", rep, err)
	}
	if exists(path) {
		t.Fatalf("%s survived the sweep", filepath.Base(path))
	}
	wantClosed(t, "after retention deleted it", f)
	// the next record goes to a new file, not the deleted one
	if err := r.AppendSavings("old", SavingsRecord{At: "2026-12-02T08:00:00Z", ThresholdTokens: 2}); err != nil {
		t.Fatal(err)
	}
	if got := savingsLines(t, r, "old"); !reflect.DeepEqual(got, []int64{2}) {
		t.Errorf("records after the sweep %v, want [2]", got)
	}
}

func TestRootCloseClosesSavingsFiles(t *testing.T) {
	t.Parallel()
	r, err := Open(filepath.Join(t.TempDir(), "context"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*os.File
	for _, sid := range []string{"a", "b", "c"} {
		if err := r.AppendSavings(sid, SavingsRecord{At: "2026-12-02T08:00:00Z"}); err != nil {
			t.Fatal(err)
		}
		files = append(files, openSavingsFile(t, r, sid))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		wantClosed(t, fmt.Sprintf("file %d after Root.Close", i), f)
	}
	if n := r.savings.openCount(); n != 0 {
		t.Errorf("%d savings files open after Close", n)
	}
	// a record after Close still lands (open, write, close), as before files were kept open
	if err := r.AppendSavings("a", SavingsRecord{At: "2026-12-02T08:00:01Z"}); err != nil {
		t.Fatal(err)
	}
	if n := r.savings.openCount(); n != 0 {
		t.Errorf("append after Close kept %d files open", n)
	}
	if got := savingsLines(t, r, "a"); len(got) != 2 {
		t.Errorf("%d records, want 2", len(got))
	}
}
