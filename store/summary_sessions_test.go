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

// writeDashSession stores rows (written at dashNow) and events in sessions/<sid>.db through
// the writer.
func writeDashSession(t testing.TB, r *Root, sid string, rows []RowWrite, events ...Event) {
	t.Helper()
	writeSessionAt(t, r, sid, dashNow, rows, events...)
}

// holds reports whether the cache keeps session sid's summary and its events.
func (c *dashCache) holds(sid string) (summary, events bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, summary = c.summaries[sid]
	_, events = c.events[sid]
	return summary, events
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
	// The first row is the agent's injected context, the second the prompt the user typed.
	rows := []RowWrite{dashRow("  <system-reminder>alpha one</system-reminder>", true), dashRow("alpha\n\n  two:\tfix the build", true), dashRow("alpha three", false), dashRow("alpha four", false), dashRow("alpha five", true)}
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
	for name, data := range map[string]string{"empty.db": "", "junk.db": "this is not a database, just text that is long enough", "notes.txt": "x", ".DS_Store": "x"} {
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
		{SessionID: "alpha", Agent: "claude-code", Cwd: "/home/u/alpha", FirstPrompt: "alpha two: fix the build", LastActivity: base,
			Rows: 5, InContext: 3, Trimmed: 2, Trims: 2, Requests: 3, LastPromptTokens: 300 + 40000 + 1200},
		{SessionID: "gamma", Agent: "opencode", Cwd: "/srv/gamma", FirstPrompt: "gamma one", LastActivity: base.Add(-time.Minute), Rows: 1, InContext: 1},
		{SessionID: "beta", Agent: "codex", FirstPrompt: "beta one", LastActivity: base.Add(-2 * time.Minute), Rows: 1, InContext: 1, Requests: 1, LastPromptTokens: 5000},
		// the v2 fixture: one trimmed row, one in context, a trim and no usage columns
		{SessionID: "old2", FirstPrompt: "Remember KEY-7 = 0x3f2a.", LastActivity: base.Add(-3 * time.Minute), Rows: 2, InContext: 1, Trimmed: 1, Trims: 1},
		{SessionID: "old1", FirstPrompt: "Remember KEY-7 = 0x3f2a.", LastActivity: base.Add(-4 * time.Minute), Rows: 2, InContext: 1, Trimmed: 1},
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

func TestPromptStart(t *testing.T) {
	long := strings.Repeat("é", FirstPromptChars+5)
	for _, tt := range []struct{ in, want string }{
		{"  fix\n\tthe   build ", "fix the build"},
		{"", ""},
		{long, strings.Repeat("é", FirstPromptChars-1) + "…"},
		{long[:2*FirstPromptChars], long[:2*FirstPromptChars]},
	} {
		if got := promptStart(tt.in); got != tt.want {
			t.Errorf("promptStart(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSessionsCache(t *testing.T) {
	skipOnWindows(t, "a file SQLite holds open cannot be deleted, replaced or overwritten here (sharing violation, access denied, user-mapped section): retry_test.go covers what the store does about it")
	r := newRoot(t)
	ctx := context.Background()
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	writeDashSession(t, r, "s", []RowWrite{dashRow("one", true)})
	ageSessionFiles(t, r, "s", old)
	rowsOf := func() SessionInfo {
		t.Helper()
		return listedSession(t, r, ctx, "s")
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
		return listedSession(t, r, ctx, "fx")
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
		if summary, _ := r.dash.holds("fx"); summary {
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
	skipOnWindows(t, "a file SQLite holds open cannot be deleted, replaced or overwritten here (sharing violation, access denied, user-mapped section): retry_test.go covers what the store does about it")
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
	ageSessions(b, r, time.Now().Add(-time.Hour))
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

// listedSession is session sid as r.Sessions lists it; the test fails when it is not listed.
func listedSession(t *testing.T, r *Root, ctx context.Context, sid string) SessionInfo {
	t.Helper()
	list, err := r.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.SessionID == sid {
			return s
		}
	}
	t.Fatalf("session %s not listed: %+v", sid, list)
	return SessionInfo{}
}
