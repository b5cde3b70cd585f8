package proxy

import (
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/smarter-compact/smarter-compact/store"
)

// storedTexts reads fingerprint → text of every row of a session database.
func storedTexts(t *testing.T, root *store.Root, sid string) map[string]string {
	t.Helper()
	root.SettleAll()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(root.Dir(), "sessions", sid+".db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT fingerprint, text FROM messages")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var fp, text string
		if err := rows.Scan(&fp, &text); err != nil {
			t.Fatal(err)
		}
		out[fp] = text
	}
	return out
}

// Once stored, the rows of cached messages give back their text; when the session's
// database loses them (deleted under a live session), nothing is stored without text: the
// write that meets the gap fails, the next request drops the cache and stores every row,
// text and all, as a fresh proxy would.
func TestStoredRowsFreeTheirTextAndAGapIsRefilled(t *testing.T) {
	p := benchProxy(t, 10_000_000)
	const sid = "text-gone"
	h := benchHeader(sid)
	c := benchConvoOf(12)
	for range 2 {
		if _, _, err := p.rewrite(h, c.Body()); err != nil {
			t.Fatal(err)
		}
		c.Add()
	}
	s := p.sessions[sid]
	// what the session's next request does first, once the queued writes landed
	p.root.SettleAll()
	s.mu.Lock()
	p.settleStores(s)
	s.mu.Unlock()
	freed, rows := 0, 0
	for _, msgs := range s.threads {
		for _, m := range msgs {
			for _, r := range m.rows {
				rows++
				if r.text == "" {
					freed++
				}
			}
		}
	}
	if rows == 0 || freed != rows {
		t.Fatalf("%d of %d cached rows freed their text, want all", freed, rows)
	}

	for _, suffix := range []string{".db", ".db-wal", ".db-shm"} {
		os.Remove(filepath.Join(p.root.Dir(), "sessions", sid+suffix))
	}
	if _, _, err := p.rewrite(h, c.Body()); err != nil { // its rows meet the gap
		t.Fatal(err)
	}
	p.root.SettleAll()
	c.Add()
	final := c.Body()
	if _, _, err := p.rewrite(h, final); err != nil {
		t.Fatal(err)
	}
	got := storedTexts(t, p.root, sid)

	ref := benchProxy(t, 10_000_000)
	if _, _, err := ref.rewrite(h, final); err != nil {
		t.Fatal(err)
	}
	want := storedTexts(t, ref.root, sid)
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("the refilled database holds %d rows, a fresh proxy stores %d", len(got), len(want))
	}
	for fp, text := range want {
		if got[fp] != text {
			t.Fatalf("row %s: stored %q, want %q", fp, got[fp], text)
		}
	}
}

// The sessions' caches together stay within the budget: the least recently used sessions
// lose theirs (and keep working: their next request is parsed whole and trims the same).
func TestSessionCachesStayWithinBudget(t *testing.T) {
	p := benchProxy(t, 10_000_000)
	c := benchConvoOf(60)
	body := c.Body()
	p.cacheBudget = int64(len(body)) * 5 // room for about two sessions (a message costs twice its bytes)
	for i := range 6 {
		if _, _, err := p.rewrite(benchHeader(fmt.Sprintf("budget-%d", i)), body); err != nil {
			t.Fatal(err)
		}
	}
	var total int64
	cached := 0
	for sid, s := range p.sessions {
		total += s.cacheCost()
		if len(s.threads) > 0 {
			cached++
		} else if len(s.stores) > 0 {
			// the store jobs name the last request's messages: they must go with the cache
			t.Errorf("session %s lost its cache but still holds %d store jobs", sid, len(s.stores))
		}
	}
	if total > p.cacheBudget {
		t.Fatalf("the caches hold %d bytes, over the budget of %d", total, p.cacheBudget)
	}
	if cached < 1 || len(p.sessions[fmt.Sprintf("budget-%d", 5)].threads) == 0 {
		t.Fatalf("%d sessions kept a cache; the newest must keep its own", cached)
	}
	// a session whose cache was dropped still answers its next request
	c.Add()
	res, _, err := p.rewrite(benchHeader("budget-0"), c.Body())
	if err != nil || res == nil {
		t.Fatalf("the first session after its cache was dropped: %v", err)
	}
}

// Sessions rewritten at once while the budget drops caches: every request gets its view
// (run with -race to check the locking of recount).
func TestSessionCacheBudgetUnderConcurrentRequests(t *testing.T) {
	p := benchProxy(t, 10_000_000)
	c := benchConvoOf(30)
	base := c.Body()
	p.cacheBudget = int64(len(base)) * 4
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 4 {
				res, _, err := p.rewrite(benchHeader(fmt.Sprintf("conc-%d-%d", g, i%2)), base)
				if err == nil && res == nil {
					err = fmt.Errorf("no view")
				}
				if err != nil {
					errs <- fmt.Errorf("goroutine %d request %d: %w", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// R9. The fast-path cache (session.threads) keeps each thread's parsed messages, and every
// message's raw bytes (and its blocks' and members' spans) are sub-slices of the request
// body it was first parsed from. A message reused by later requests therefore pins the
// whole body of the request that introduced it. Claude Code re-sends the full, ever-growing
// history on every request (it never sees the trim, so it never compacts), so a session of
// N requests pins all N bodies: memory grows with the square of the session length (a few
// hundred tool steps of a few kB each already pin hundreds of MB per thread, up to 8 threads
// and 64 sessions).
//
// Regression test from the first review of proxy/ (R1…R11 name its findings).
func TestReviewFastPathCacheDoesNotPinEveryRequestBody(t *testing.T) {
	root := openRoot(t)
	s := DefaultSettings()
	s.TrimAtTokens = 1 << 30 // never trim: only the cache is measured
	s.CompressOverTokens = 0
	p := New(s, allOn{}, root, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h := http.Header{}
	h.Set("X-Claude-Code-Session-Id", "mem")

	chunk := strings.Repeat("0123456789abcdef", 1024) // 16 kB of tool output per step
	msgs := []string{u("task, use tools")}
	var last int
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for step := 0; step < 120; step++ {
		id := fmt.Sprintf("toolu_%d", step)
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"assistant","content":[{"type":"tool_use","id":%q,"name":"Bash","input":{"command":"cat"}}]}`, id),
			fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":%q}]}`, id, fmt.Sprint(step)+chunk))
		body := reviewBody("claude-mythos-5-1", "", msgs...)
		last = len(body)
		if _, _, err := p.rewrite(h, body); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(p) // the proxy (and its sessions) must be live when the heap is measured
	retained := int(after.HeapAlloc) - int(before.HeapAlloc)
	t.Logf("last body %d kB, heap retained after the session %d kB", last>>10, retained>>10)
	if retained > 8*last {
		t.Fatalf("the proxy retains %d MB for one thread whose history is %d MB: every request body is pinned by the messages it introduced", retained>>20, last>>20)
	}
}
