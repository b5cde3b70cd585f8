package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

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
