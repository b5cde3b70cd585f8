package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// dashNow is the clock of the dashboard tests: 06:00 at UTC+8 is still 2026-03-09 in UTC.
var dashNow = time.Date(2026, 3, 10, 6, 0, 0, 0, time.FixedZone("UTC+8", 8*3600))

func i64(n int64) *int64 { return &n }

// dashRow is a RowWrite of a user text row in its own thread.
func dashRow(text string, in bool) RowWrite {
	fp := Fingerprint("", "user", "text", "", text)
	return RowWrite{Fingerprint: fp, Thread: fp, Role: "user", Kind: "text", Text: text, InContext: in}
}

// writeDashSession stores rows and events in sessions/<sid>.db through the writer.
func writeDashSession(t testing.TB, r *Root, sid string, rows []RowWrite, events ...Event) {
	t.Helper()
	d := mustSession(t, r, sid)
	if len(rows) > 0 {
		if _, err := d.SyncRows(rows, dashNow); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range events {
		if err := d.AddEvent(e); err != nil {
			t.Fatal(err)
		}
	}
}

// ageSessionFiles sets the mtime of every file of sid that exists.
func ageSessionFiles(t testing.TB, r *Root, sid string, mtime time.Time) {
	t.Helper()
	for _, suffix := range []string{".db", ".db-wal", ".db-shm", ".trim.json", ".json"} {
		p := filepath.Join(r.Dir(), "sessions", sid+suffix)
		if _, err := os.Stat(p); err == nil {
			age(t, p, mtime)
		}
	}
}

// diskBytes sums the sizes of sid's .db, .db-wal and .trim.json as os.Stat sees them.
func diskBytes(t testing.TB, r *Root, sid string) int64 {
	t.Helper()
	var n int64
	for _, suffix := range []string{".db", ".db-wal", ".trim.json"} {
		if fi, err := os.Stat(filepath.Join(r.Dir(), "sessions", sid+suffix)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// dashFixture is a root with sessions written by the writer, a registration and trim states
// for their agents, a version 1 and a version 2 database, an empty one, a newer schema and a
// file that is not a database; each session's files get their own mtime.
func dashFixture(t *testing.T) (r *Root, base time.Time) {
	t.Helper()
	r = newRoot(t)
	ago := func(d time.Duration) time.Time { return dashNow.Add(-d) }
	rows := []RowWrite{dashRow("alpha one", true), dashRow("alpha two", true), dashRow("alpha three", false), dashRow("alpha four", false), dashRow("alpha five", true)}
	writeDashSession(t, r, "alpha", rows,
		Event{At: ago(3 * time.Hour), Kind: "trim", Version: "proxy:a", TokensBefore: i64(150000), TokensAfter: i64(45000), Dropped: i64(2)},
		Event{At: ago(2 * time.Hour), Kind: "usage", Version: "proxy:a", InputTokens: i64(7), CacheReadTokens: i64(100), CacheCreationTokens: i64(20)},
		Event{At: ago(time.Hour), Kind: "usage", Version: "proxy:a", InputTokens: i64(300), CacheReadTokens: i64(40000), CacheCreationTokens: i64(1200), OutputTokens: i64(9)},
		// the newest usage reported no prompt counts: LastPromptTokens is the one before
		Event{At: ago(30 * time.Minute), Kind: "usage", Version: "opencode:1", OutputTokens: i64(5)},
		Event{At: ago(20 * time.Minute), Kind: "fail_open", Version: "proxy:a", Location: "rewrite.go:1", Error: "*json.SyntaxError"},
		Event{At: ago(10 * time.Minute), Kind: "trim", Version: "proxy:a", TokensBefore: i64(90000), TokensAfter: i64(30000), Dropped: i64(4)},
	)
	if err := r.Register(Registration{SessionID: "alpha", Agent: "claude-code", Cwd: "/home/u/alpha"}); err != nil {
		t.Fatal(err)
	}
	// a registration wins over the trim state
	if err := r.SaveTrimState("alpha", []byte(`{"threads":{},"agent":"codex"}`)); err != nil {
		t.Fatal(err)
	}

	writeDashSession(t, r, "beta", []RowWrite{dashRow("beta one", true)},
		Event{At: ago(time.Hour), Kind: "usage", Version: "proxy:b", CacheReadTokens: i64(5000)})
	if err := r.SaveTrimState("beta", []byte(`{"threads":{},"source":"prompt_cache_key","agent":"codex"}`)); err != nil {
		t.Fatal(err)
	}

	// registered without an agent: the trim state names it
	writeDashSession(t, r, "gamma", []RowWrite{dashRow("gamma one", true)})
	if err := r.Register(Registration{SessionID: "gamma", Cwd: "/srv/gamma"}); err != nil {
		t.Fatal(err)
	}
	if err := r.SaveTrimState("gamma", []byte(`{"threads":{},"agent":"opencode"}`)); err != nil {
		t.Fatal(err)
	}

	sessions := filepath.Join(r.Dir(), "sessions")
	buildFixture(t, filepath.Join(sessions, "old1.db"), "schema_v1.sql")
	buildFixture(t, filepath.Join(sessions, "old2.db"), "schema_v2.sql")
	buildFixtureSQL(t, filepath.Join(sessions, "future.db"), "CREATE TABLE x (a); PRAGMA user_version = 9;")
	for name, data := range map[string]string{"empty.db": "", "junk.db": "this is not a database, just text that is long enough", "notes.txt": "x", ".hidden.db": "x"} {
		if err := os.WriteFile(filepath.Join(sessions, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base = time.Now().Add(-time.Hour).Truncate(time.Second)
	for i, sid := range []string{"alpha", "gamma", "beta", "old2", "old1", "empty", "future", "junk"} {
		ageSessionFiles(t, r, sid, base.Add(-time.Duration(i)*time.Minute))
	}
	return r, base
}

func TestSessions(t *testing.T) {
	r, base := dashFixture(t)
	// alpha's .db is older than its WAL: LastActivity is the newest of its files
	age(t, filepath.Join(r.Dir(), "sessions", "alpha.db"), base.Add(-time.Hour))

	got, err := r.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []SessionInfo{
		{SessionID: "alpha", Agent: "claude-code", Cwd: "/home/u/alpha", LastActivity: base,
			Rows: 5, InContext: 3, Trimmed: 2, Trims: 2, Requests: 3, LastPromptTokens: 300 + 40000 + 1200},
		{SessionID: "gamma", Agent: "opencode", Cwd: "/srv/gamma", LastActivity: base.Add(-time.Minute), Rows: 1, InContext: 1},
		{SessionID: "beta", Agent: "codex", LastActivity: base.Add(-2 * time.Minute), Rows: 1, InContext: 1, Requests: 1, LastPromptTokens: 5000},
		// the v2 fixture: one trimmed row, one in context, a trim and no usage columns
		{SessionID: "old2", LastActivity: base.Add(-3 * time.Minute), Rows: 2, InContext: 1, Trimmed: 1, Trims: 1},
		{SessionID: "old1", LastActivity: base.Add(-4 * time.Minute), Rows: 2, InContext: 1, Trimmed: 1},
		{SessionID: "empty", LastActivity: base.Add(-5 * time.Minute)},
		{SessionID: "future", LastActivity: base.Add(-6 * time.Minute), Problem: "written by a newer smarter-compact (newer schema)"},
		{SessionID: "junk", LastActivity: base.Add(-7 * time.Minute), Problem: "not a readable SQLite database"},
	}
	for i := range want {
		want[i].Bytes = diskBytes(t, r, want[i].SessionID)
	}
	if want[0].Bytes <= 4096 { // .db + a WAL + .trim.json
		t.Fatalf("alpha is %d bytes on disk", want[0].Bytes)
	}
	compareSessions(t, got, want)

	t.Run("read only", func(t *testing.T) {
		for _, name := range []string{"old1.db-wal", "old1.db-shm", "old2.db-wal", "future.db-shm", "junk.db-wal", "empty.db-wal"} {
			if _, err := os.Stat(filepath.Join(r.Dir(), "sessions", name)); err == nil {
				t.Errorf("Sessions created %s", name)
			}
		}
		fi, err := os.Stat(filepath.Join(r.Dir(), "sessions", "old2.db"))
		if err != nil || !fi.ModTime().Equal(base.Add(-3*time.Minute)) {
			t.Errorf("old2.db mtime changed: %v, %v", fi.ModTime(), err)
		}
	})
	t.Run("cached", func(t *testing.T) {
		again, err := r.Sessions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		compareSessions(t, again, want)
		r.dash.mu.Lock()
		n := len(r.dash.summaries)
		r.dash.mu.Unlock()
		if n != len(want) {
			t.Errorf("%d summaries cached, want %d", n, len(want))
		}
	})
}

// compareSessions compares every field; LastActivity by instant.
func compareSessions(t *testing.T, got, want []SessionInfo) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d sessions, want %d:\n%+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.LastActivity.Equal(w.LastActivity) {
			t.Errorf("%s: last activity %v, want %v", w.SessionID, g.LastActivity, w.LastActivity)
		}
		g.LastActivity, w.LastActivity = time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("session %d\n got %+v\nwant %+v", i, g, w)
		}
	}
}

func TestSessionsCache(t *testing.T) {
	r := newRoot(t)
	ctx := context.Background()
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	writeDashSession(t, r, "s", []RowWrite{dashRow("one", true)})
	ageSessionFiles(t, r, "s", old)
	rowsOf := func() SessionInfo {
		t.Helper()
		list, err := r.Sessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.SessionID == "s" {
				return s
			}
		}
		t.Fatalf("session s not listed: %+v", list)
		return SessionInfo{}
	}
	if s := rowsOf(); s.Rows != 1 {
		t.Fatalf("rows %d, want 1", s.Rows)
	}

	t.Run("a new row shows", func(t *testing.T) {
		writeDashSession(t, r, "s", []RowWrite{dashRow("two", true)}, Event{Kind: "trim", Version: "proxy:x"})
		ageSessionFiles(t, r, "s", old) // same mtimes as before: the WAL's size tells
		if s := rowsOf(); s.Rows != 2 || s.Trims != 1 {
			t.Fatalf("after a write: %+v", s)
		}
	})

	// A database replaced by junk of the same size with the same mtime is not read again:
	// the summary comes from the cache. A new mtime reads it again. (A fixture without a
	// writer: no WAL, so the .db alone holds the data.)
	dbPath := filepath.Join(r.Dir(), "sessions", "fx.db")
	buildFixture(t, dbPath, "schema_v2.sql")
	age(t, dbPath, old)
	fx := func() SessionInfo {
		t.Helper()
		list, err := r.Sessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.SessionID == "fx" {
				return s
			}
		}
		t.Fatalf("session fx not listed: %+v", list)
		return SessionInfo{}
	}
	if s := fx(); s.Rows != 2 || s.Trims != 1 || s.Problem != "" {
		t.Fatalf("fixture: %+v", s)
	}
	t.Run("same stamp is cached", func(t *testing.T) {
		fi, err := os.Stat(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dbPath, make([]byte, fi.Size()), 0o600); err != nil {
			t.Fatal(err)
		}
		age(t, dbPath, old)
		if s := fx(); s.Rows != 2 || s.Problem != "" {
			t.Fatalf("same size and mtime: %+v, want the cached summary", s)
		}
	})
	t.Run("new mtime reads again", func(t *testing.T) {
		age(t, dbPath, old.Add(time.Second))
		if s := fx(); s.Rows != 0 || s.Problem != "not a readable SQLite database" {
			t.Fatalf("after touching the junk: %+v", s)
		}
	})

	t.Run("unsettled is not cached", func(t *testing.T) {
		// a file changed within dashRacyWindow of the stat may change again without a new
		// mtime: a future mtime is always that recent
		future := time.Now().Add(time.Hour).Truncate(time.Second)
		hot := filepath.Join(r.Dir(), "sessions", "hot.db")
		buildFixture(t, hot, "schema_v1.sql")
		age(t, hot, future)
		list, err := r.Sessions(ctx)
		if err != nil || list[0].SessionID != "hot" || list[0].Rows != 2 {
			t.Fatalf("hot: %+v, %v", list, err)
		}
		fi, _ := os.Stat(hot)
		if err := os.WriteFile(hot, make([]byte, fi.Size()), 0o600); err != nil {
			t.Fatal(err)
		}
		age(t, hot, future)
		list, err = r.Sessions(ctx)
		if err != nil || list[0].SessionID != "hot" || list[0].Problem == "" {
			t.Fatalf("hot after junk with the same stamp: %+v, %v", list, err)
		}
	})

	t.Run("deleted session is gone", func(t *testing.T) {
		if err := os.Remove(dbPath); err != nil {
			t.Fatal(err)
		}
		list, err := r.Sessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.SessionID == "fx" {
				t.Fatalf("deleted session listed: %+v", s)
			}
		}
		r.dash.mu.Lock()
		_, cached := r.dash.summaries["fx"]
		r.dash.mu.Unlock()
		if cached {
			t.Error("the deleted session's summary stays cached")
		}
	})

	t.Run("registration change shows", func(t *testing.T) {
		writeDashSession(t, r, "reg", []RowWrite{dashRow("reg", true)})
		ageSessionFiles(t, r, "reg", old)
		if _, err := r.Sessions(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.Register(Registration{SessionID: "reg", Agent: "codex", Cwd: "/w"}); err != nil {
			t.Fatal(err)
		}
		ageSessionFiles(t, r, "reg", old.Add(-time.Minute))
		list, err := r.Sessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.SessionID == "reg" && (s.Agent != "codex" || s.Cwd != "/w") {
				t.Fatalf("after registering: %+v", s)
			}
		}
	})
}

func TestSessionsErrors(t *testing.T) {
	r := newRoot(t)
	writeDashSession(t, r, "a", []RowWrite{dashRow("a", true)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Sessions(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
	if _, err := r.Daily(ctx, dashNow, 7); !errors.Is(err, context.Canceled) {
		t.Errorf("Daily, cancelled ctx: %v", err)
	}
	// a sessions/*.db whose name is not a session id is listed with a problem
	if err := os.WriteFile(filepath.Join(r.Dir(), "sessions", "bad name.db"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	list, err := r.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var bad *SessionInfo
	for i := range list {
		if list[i].SessionID == "bad name" {
			bad = &list[i]
		}
	}
	if bad == nil || !strings.Contains(bad.Problem, "not a session id") || bad.Bytes != 1 {
		t.Errorf("bad name: %+v", bad)
	}
	if err := os.RemoveAll(filepath.Join(r.Dir(), "sessions")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Sessions(context.Background()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no sessions folder: %v", err)
	}
}

func TestRows(t *testing.T) {
	r := newRoot(t)
	ctx := context.Background()
	rows := []RowWrite{
		{Fingerprint: "f1", Thread: "f1", Role: "user", Kind: "text", Text: "héllo wörld", InContext: false, CutFingerprint: "f3"},
		{Fingerprint: "f2", Thread: "f1", Role: "tool", Kind: "tool_result", Name: "Bash", Text: "line 1\nline 2", BlobID: "0123456789abcdef", InContext: false},
		{Fingerprint: "f3", Thread: "f1", Role: "user", Kind: "text", Text: "the cut turn", InContext: true},
		{Fingerprint: "f4", Thread: "f1", Role: "assistant", Kind: "text", Text: "😀😀😀😀", InContext: true},
		{Fingerprint: "f5", Thread: "f1", Role: "assistant", Kind: "thinking", Text: "a\x00b\xffc", InContext: true},
	}
	writeDashSession(t, r, "s", rows)

	var all []RowInfo
	var after int64
	for page := 0; ; page++ {
		got, total, err := r.Rows(ctx, "s", after, 2, 3)
		if err != nil {
			t.Fatal(err)
		}
		if total != 5 {
			t.Fatalf("page %d: total %d, want 5", page, total)
		}
		if len(got) == 0 {
			if page != 3 {
				t.Fatalf("%d pages of 2 for 5 rows", page)
			}
			break
		}
		if len(got) > 2 {
			t.Fatalf("page %d has %d rows, limit 2", page, len(got))
		}
		all = append(all, got...)
		after = got[len(got)-1].Seq
	}
	want := []RowInfo{
		{Seq: 1, Thread: "f1", Role: "user", Kind: "text", Text: "hél", Chars: 11, TrimmedAtSeq: 3, TrimmedAt: "2026-03-09T22:00:00Z"},
		{Seq: 2, Thread: "f1", Role: "tool", Kind: "tool_result", Name: "Bash", Text: "lin", Chars: 13, BlobID: "0123456789abcdef", TrimmedAt: "2026-03-09T22:00:00Z"},
		{Seq: 3, Thread: "f1", Role: "user", Kind: "text", Text: "the", Chars: 12, InContext: true},
		{Seq: 4, Thread: "f1", Role: "assistant", Kind: "text", Text: "😀😀😀", Chars: 4, InContext: true},
		// a NUL is a rune and an invalid byte one more
		{Seq: 5, Thread: "f1", Role: "assistant", Kind: "thinking", Text: "a\x00b", Chars: 5, InContext: true},
	}
	for i := range want {
		want[i].CreatedAt = "2026-03-09T22:00:00Z"
	}
	if !reflect.DeepEqual(all, want) {
		t.Fatalf("rows\n got %+v\nwant %+v", all, want)
	}

	t.Run("whole text", func(t *testing.T) {
		got, _, err := r.Rows(ctx, "s", 3, 10, 0)
		if err != nil || len(got) != 2 || got[0].Text != "😀😀😀😀" || got[1].Text != "a\x00b\xffc" || got[1].Chars != 5 {
			t.Fatalf("maxChars 0: %+v, %v", got, err)
		}
		got, _, err = r.Rows(ctx, "s", 3, 1, 4)
		if err != nil || len(got) != 1 || got[0].Text != "😀😀😀😀" {
			t.Fatalf("maxChars = length: %+v, %v", got, err)
		}
	})
	t.Run("schema 1", func(t *testing.T) {
		buildFixture(t, filepath.Join(r.Dir(), "sessions", "old1.db"), "schema_v1.sql")
		got, total, err := r.Rows(ctx, "old1", 0, 200, 1000)
		if err != nil || total != 2 || len(got) != 2 {
			t.Fatalf("v1: %d rows of %d, %v", len(got), total, err)
		}
		if g := got[1]; g.Text != "total 0\ndrwx------ ." || g.Name != "Bash" || g.BlobID != "0123456789abcdef" || !g.InContext || g.Chars != 20 {
			t.Errorf("v1 row 2: %+v", g)
		}
		if g := got[0]; g.InContext || g.TrimmedAtSeq != 2 || g.TrimmedAt != "2026-01-02T03:04:05Z" || g.CreatedAt != "2026-01-01T00:00:00Z" {
			t.Errorf("v1 row 1: %+v", g)
		}
		if _, err := os.Stat(filepath.Join(r.Dir(), "sessions", "old1.db-wal")); err == nil {
			t.Error("Rows created old1.db-wal")
		}
	})
	t.Run("errors", func(t *testing.T) {
		if _, _, err := r.Rows(ctx, "missing", 0, 10, 10); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("missing session: %v", err)
		}
		if _, err := os.Stat(filepath.Join(r.Dir(), "sessions", "missing.db")); err == nil {
			t.Error("Rows created missing.db")
		}
		if _, _, err := r.Rows(ctx, "s", 0, 0, 10); err == nil || !strings.Contains(err.Error(), "limit") {
			t.Errorf("limit 0: %v", err)
		}
		if _, _, err := r.Rows(ctx, "../s", 0, 10, 10); err == nil {
			t.Error("an unsanitized sid was read")
		}
		if err := os.WriteFile(filepath.Join(r.Dir(), "sessions", "empty.db"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if got, total, err := r.Rows(ctx, "empty", 0, 10, 10); err != nil || total != 0 || len(got) != 0 {
			t.Errorf("no schema yet: %v, %d, %v", got, total, err)
		}
	})
}

func TestCutRunes(t *testing.T) {
	for _, tc := range []struct {
		in    string
		n     int
		out   string
		chars int
	}{
		{"", 3, "", 0},
		{"abc", 3, "abc", 3},
		{"abcd", 3, "abc", 4},
		{"ééé", 2, "éé", 3},
		{"ééé", 3, "ééé", 3},
		{"\xff\xfe", 1, "\xff", 2},
		{"x", -1, "x", 1},
	} {
		out, chars := cutRunes(tc.in, tc.n)
		if out != tc.out || chars != tc.chars {
			t.Errorf("cutRunes(%q, %d) = %q, %d; want %q, %d", tc.in, tc.n, out, chars, tc.out, tc.chars)
		}
	}
}

func TestEvents(t *testing.T) {
	r := newRoot(t)
	ctx := context.Background()
	at := func(h int) time.Time { return time.Date(2026, 3, 9, h, 0, 0, 0, time.UTC) }
	writeDashSession(t, r, "s", nil,
		Event{At: at(1), Kind: "trim", Version: "proxy:a", TokensBefore: i64(100), TokensAfter: i64(40), Dropped: i64(3)},
		Event{At: at(2), Kind: "usage", Version: "proxy:a", Model: "claude-x", Trimmed: i64(2), InputTokens: i64(5),
			CacheReadTokens: i64(0), CacheCreationTokens: i64(700), OutputTokens: i64(9), Breakpoints: i64(2), BreakpointAt: "system,m-1"},
		Event{At: at(3), Kind: "usage", Version: "proxy:a", Model: "gpt-y"},
		// inserted later with an earlier at: id order is insertion order
		Event{At: at(0), Kind: "fail_open", Version: "proxy:a", Location: "usage.go:7", Error: "*errors.errorString"},
	)
	all, err := r.Events(ctx, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []EventInfo{
		{ID: 1, At: at(1), Kind: "trim", TokensBefore: 100, TokensAfter: 40, Dropped: 3,
			Trimmed: -1, Input: -1, CacheRead: -1, CacheCreation: -1, Output: -1, Breakpoints: -1},
		{ID: 2, At: at(2), Kind: "usage", TokensBefore: -1, TokensAfter: -1, Dropped: -1, Model: "claude-x",
			Trimmed: 2, Input: 5, CacheRead: 0, CacheCreation: 700, Output: 9, Breakpoints: 2},
		{ID: 3, At: at(3), Kind: "usage", TokensBefore: -1, TokensAfter: -1, Dropped: -1, Model: "gpt-y",
			Trimmed: -1, Input: -1, CacheRead: -1, CacheCreation: -1, Output: -1, Breakpoints: -1},
		{ID: 4, At: at(0), Kind: "fail_open", Location: "usage.go:7", Error: "*errors.errorString",
			TokensBefore: -1, TokensAfter: -1, Dropped: -1, Trimmed: -1, Input: -1, CacheRead: -1, CacheCreation: -1, Output: -1, Breakpoints: -1},
	}
	if !reflect.DeepEqual(all, want) {
		t.Fatalf("events\n got %+v\nwant %+v", all, want)
	}
	if p := all[1].PromptTokens(); p != 705 {
		t.Errorf("prompt tokens %d, want 705", p)
	}
	if p := all[2].PromptTokens(); p != -1 {
		t.Errorf("prompt tokens of a request without counts %d, want -1", p)
	}

	t.Run("limit keeps the newest", func(t *testing.T) {
		got, err := r.Events(ctx, "s", 2)
		if err != nil || !reflect.DeepEqual(got, want[2:]) {
			t.Fatalf("limit 2: %+v, %v", got, err)
		}
		got, err = r.Events(ctx, "s", 10)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("limit 10: %+v, %v", got, err)
		}
	})
	t.Run("old schemas", func(t *testing.T) {
		sessions := filepath.Join(r.Dir(), "sessions")
		buildFixture(t, filepath.Join(sessions, "old1.db"), "schema_v1.sql")
		buildFixture(t, filepath.Join(sessions, "old2.db"), "schema_v2.sql")
		if got, err := r.Events(ctx, "old1", 0); err != nil || len(got) != 0 {
			t.Errorf("v1: %+v, %v", got, err)
		}
		got, err := r.Events(ctx, "old2", 0)
		w := []EventInfo{{ID: 1, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Kind: "trim", TokensBefore: 150000, TokensAfter: 40000, Dropped: 12,
			Trimmed: -1, Input: -1, CacheRead: -1, CacheCreation: -1, Output: -1, Breakpoints: -1}}
		if err != nil || !reflect.DeepEqual(got, w) {
			t.Errorf("v2: %+v, %v", got, err)
		}
	})
	t.Run("errors", func(t *testing.T) {
		if _, err := r.Events(ctx, "missing", 0); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("missing: %v", err)
		}
		if _, err := r.Events(ctx, "s", -1); err == nil {
			t.Error("limit -1 accepted")
		}
		buildFixtureSQL(t, filepath.Join(r.Dir(), "sessions", "future.db"), "CREATE TABLE x (a); PRAGMA user_version = 9;")
		if _, err := r.Events(ctx, "future", 0); !errors.Is(err, ErrUnsupportedSchema) {
			t.Errorf("future: %v", err)
		}
	})
}

func TestDaily(t *testing.T) {
	r := newRoot(t)
	ctx := context.Background()
	utc := func(d, h, m int) time.Time { return time.Date(2026, 3, d, h, m, 0, 0, time.UTC) }
	writeDashSession(t, r, "a", nil,
		Event{At: utc(9, 21, 0), Kind: "trim", Version: "proxy:a", TokensBefore: i64(100000), TokensAfter: i64(40000)},
		// 2026-03-10 01:30 at UTC+5 is 03-09 20:30 UTC
		Event{At: time.Date(2026, 3, 10, 1, 30, 0, 0, time.FixedZone("UTC+5", 5*3600)), Kind: "usage", Version: "proxy:a"},
		Event{At: utc(9, 23, 59), Kind: "trim", Version: "proxy:a", TokensBefore: i64(5000)}, // no after: counts, saves nothing
		Event{At: utc(7, 0, 0), Kind: "fail_open", Version: "proxy:a"},
		Event{At: utc(5, 23, 59), Kind: "trim", Version: "proxy:a", TokensBefore: i64(9), TokensAfter: i64(1)}, // before the window
		Event{At: utc(10, 0, 1), Kind: "usage", Version: "proxy:a"},                                            // after now (UTC 03-09 22:00)
	)
	writeDashSession(t, r, "b", nil,
		Event{At: utc(7, 12, 0), Kind: "usage", Version: "proxy:b"},
		Event{At: utc(9, 1, 0), Kind: "trim", Version: "proxy:b", TokensBefore: i64(300), TokensAfter: i64(100)},
	)
	sessions := filepath.Join(r.Dir(), "sessions")
	buildFixture(t, filepath.Join(sessions, "old1.db"), "schema_v1.sql")
	if err := os.WriteFile(filepath.Join(sessions, "junk.db"), []byte("not a database at all, not even close"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := r.Daily(ctx, dashNow, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []Day{
		{Date: "2026-03-06"},
		{Date: "2026-03-07", Requests: 1, FailOpens: 1},
		{Date: "2026-03-08"},
		{Date: "2026-03-09", Trims: 3, TokensSaved: 60000 + 200, Requests: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("daily\n got %+v\nwant %+v", got, want)
	}
	if got, err := r.Daily(ctx, dashNow, 1); err != nil || !reflect.DeepEqual(got, want[3:]) {
		t.Errorf("one day: %+v, %v", got, err)
	}
	for _, d := range []int{0, -1, DailyMaxDays + 1} {
		if _, err := r.Daily(ctx, dashNow, d); err == nil || !strings.Contains(err.Error(), "days must be") {
			t.Errorf("days %d: %v", d, err)
		}
	}

	t.Run("a new event shows", func(t *testing.T) {
		old := time.Now().Add(-time.Hour)
		for _, sid := range []string{"a", "b"} {
			ageSessionFiles(t, r, sid, old)
		}
		if _, err := r.Daily(ctx, dashNow, 4); err != nil { // cached now
			t.Fatal(err)
		}
		writeDashSession(t, r, "b", nil, Event{At: utc(8, 8, 0), Kind: "trim", Version: "proxy:b", TokensBefore: i64(50), TokensAfter: i64(20)})
		ageSessionFiles(t, r, "b", old)
		got, err := r.Daily(ctx, dashNow, 4)
		if err != nil {
			t.Fatal(err)
		}
		if d := got[2]; d != (Day{Date: "2026-03-08", Trims: 1, TokensSaved: 30}) {
			t.Errorf("after a new trim: %+v", d)
		}
	})
}

// TestStatusCached runs the status fixture through the cache: files settled, every window
// read twice, and a cached session that turned to junk under the same stamp still counted.
func TestStatusCached(t *testing.T) {
	r := statusFixture(t)
	ctx := context.Background()
	old := time.Now().Add(-time.Hour)
	entries, err := os.ReadDir(filepath.Join(r.Dir(), "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		age(t, filepath.Join(r.Dir(), "sessions", e.Name()), old)
	}
	first, err := r.Status(ctx, statusNow, 24)
	if err != nil {
		t.Fatal(err)
	}
	if first.Trims != 2 || first.Skipped != 2 || first.Usage.Requests != 11 {
		t.Fatalf("24 h: %+v", first)
	}
	second, err := r.Status(ctx, statusNow.Add(time.Minute), 24)
	if err != nil {
		t.Fatal(err)
	}
	second.Since = first.Since
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("cached status differs:\n%+v\n%+v", first, second)
	}
	// a wider window starts before the cached one: read again
	wide, err := r.Status(ctx, statusNow, 48)
	if err != nil {
		t.Fatal(err)
	}
	if wide.Trims != 3 || wide.MessagesDropped != 999+12 {
		t.Fatalf("48 h after 24 h: trims %d, dropped %d", wide.Trims, wide.MessagesDropped)
	}
	// a narrower one filters what is cached
	narrow, err := r.Status(ctx, statusNow, 1)
	if err != nil {
		t.Fatal(err)
	}
	if narrow.Trims != 1 || narrow.FailOpens != 0 || narrow.Usage.Requests != 11 {
		t.Fatalf("1 h: %+v", narrow)
	}

	// "a" writes a fail-open: its WAL changes, so the next status reads it
	writeStatusSession(t, r, "a", Event{At: statusNow.Add(-time.Minute), Kind: "fail_open", Version: "proxy:aaaaaaaaaaaa", Location: "x.go:1", Error: "E"})
	if st, err := r.Status(ctx, statusNow, 1); err != nil || st.FailOpens != 1 || st.LastErrors[0].Location != "x.go:1" {
		t.Fatalf("after a new event: %+v, %v", st, err)
	}

	// old2 (no writer) turns to junk under its old stamp: still counted from the cache
	p := filepath.Join(r.Dir(), "sessions", "old2.db")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, make([]byte, fi.Size()), 0o600); err != nil {
		t.Fatal(err)
	}
	age(t, p, fi.ModTime())
	if st, err := r.Status(ctx, statusNow, 24); err != nil || st.Skipped != 2 || st.Trims != 2 {
		t.Fatalf("junk under a cached stamp: skipped %d, trims %d, %v", st.Skipped, st.Trims, err)
	}
	age(t, p, fi.ModTime().Add(time.Second))
	if st, err := r.Status(ctx, statusNow, 24); err != nil || st.Skipped != 3 || st.Trims != 1 {
		t.Fatalf("junk with a new mtime: skipped %d, trims %d, %v", st.Skipped, st.Trims, err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Status(ctx, statusNow, 24); err != nil {
		t.Fatal(err)
	}
	r.dash.mu.Lock()
	_, cached := r.dash.events["old2"]
	r.dash.mu.Unlock()
	if cached {
		t.Error("the deleted session's events stay cached")
	}
}

// TestDashboardConcurrent reads while sessions are written (go test -race).
func TestDashboardConcurrent(t *testing.T) {
	r := newRoot(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 3 {
		sid := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			d, err := r.Session(sid)
			if err != nil {
				t.Error(err)
				return
			}
			for i := range 20 {
				if _, err := d.SyncRows([]RowWrite{dashRow(fmt.Sprintf("%s row %d", sid, i), true)}, time.Now()); err != nil {
					t.Error(err)
				}
				if err := d.AddEvent(Event{Kind: "usage", Version: "proxy:c", InputTokens: i64(int64(i))}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for range 3 {
		wg.Go(func() {
			for range 20 {
				if _, err := r.Sessions(ctx); err != nil {
					t.Error(err)
				}
				if _, err := r.Daily(ctx, time.Now(), 7); err != nil {
					t.Error(err)
				}
				if _, err := r.Status(ctx, time.Now(), 24); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	list, err := r.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 {
		t.Fatalf("%d sessions", len(list))
	}
	for _, s := range list {
		if s.Rows != 20 || s.Requests != 20 || s.LastPromptTokens != 19 {
			t.Errorf("%s: %+v", s.SessionID, s)
		}
	}
}

// benchRoot is 200 sessions of 50 rows and a few events each, their files an hour old.
func benchRoot(b *testing.B) *Root {
	b.Helper()
	r := newRoot(b)
	at := time.Now().Add(-2 * time.Hour)
	for s := range 200 {
		sid := fmt.Sprintf("bench-%03d", s)
		rows := make([]RowWrite, 50)
		for i := range rows {
			rows[i] = dashRow(fmt.Sprintf("%s row %d %s", sid, i, strings.Repeat("text ", 40)), i >= 20)
		}
		writeDashSession(b, r, sid, rows,
			Event{At: at, Kind: "trim", Version: "proxy:b", TokensBefore: i64(120000), TokensAfter: i64(36000), Dropped: i64(20)},
			Event{At: at, Kind: "usage", Version: "proxy:b", InputTokens: i64(10), CacheReadTokens: i64(30000), CacheCreationTokens: i64(500)},
		)
		if err := r.Register(Registration{SessionID: sid, Agent: "claude-code", Cwd: "/w/" + sid}); err != nil {
			b.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	entries, err := os.ReadDir(filepath.Join(r.Dir(), "sessions"))
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		age(b, filepath.Join(r.Dir(), "sessions", e.Name()), old)
	}
	return r
}

func BenchmarkSessions200(b *testing.B) {
	r := benchRoot(b)
	ctx := context.Background()
	if list, err := r.Sessions(ctx); err != nil || len(list) != 200 || list[0].Rows != 50 {
		b.Fatalf("%d sessions, %v", len(list), err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Sessions(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSessions200Cold(b *testing.B) {
	r := benchRoot(b)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		r.dash.mu.Lock()
		r.dash.summaries = nil
		r.dash.mu.Unlock()
		if _, err := r.Sessions(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDaily200(b *testing.B) {
	r := benchRoot(b)
	ctx := context.Background()
	now := time.Now()
	if days, err := r.Daily(ctx, now, 30); err != nil || days[29].Trims+days[28].Trims != 200 {
		b.Fatalf("%+v, %v", days, err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Daily(ctx, now, 30); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStatus200(b *testing.B) {
	r := benchRoot(b)
	ctx := context.Background()
	if st, err := r.Status(ctx, time.Now(), 24); err != nil || st.Trims != 200 {
		b.Fatalf("%+v, %v", st, err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Status(ctx, time.Now(), 24); err != nil {
			b.Fatal(err)
		}
	}
}
