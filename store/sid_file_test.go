package store

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFileStem(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 300)
	for _, tt := range []struct{ sid, want string }{
		{"ses_1", "ses_1"},
		{"a.b..c", "a.b..c"},
		{".", "%2E"},
		{"..", "%2E."},
		{".hidden", "%2Ehidden"},
		{strings.Repeat("b", maxStemID), strings.Repeat("b", maxStemID)},
	} {
		if got := fileStem(tt.sid); got != tt.want {
			t.Errorf("fileStem(%q) = %q, want %q", tt.sid, got, tt.want)
		}
	}
	stem := fileStem(long)
	if len(stem) > maxStemID || !strings.HasPrefix(stem, strings.Repeat("a", stemPrefix)+"%") || !hashedStem(stem) {
		t.Errorf("fileStem(300 × a) = %q (%d bytes)", stem, len(stem))
	}
	if fileStem(long+"b") == stem {
		t.Error("two long ids with the same head share a stem")
	}
	if s := fileStem("." + long); !strings.HasPrefix(s, "%2E") {
		t.Errorf("a long dot id's stem %q keeps the dot", s)
	}
}

// TestSessionFileNames: ids the contract's rule lets through but a file system does not
// take well are stored, listed under the id the agent was told, and swept. Before, "." and
// ".." were stored as the dot files "..db" and "...db", dot ids were missing from the list,
// and a 300-character id failed with ENAMETOOLONG and stored nothing.
func TestSessionFileNames(t *testing.T) {
	t.Parallel()
	r := newRoot(t)
	ctx := context.Background()
	long := strings.Repeat("L", 300)
	sids := []string{".", "..", ".hidden", long, "plain"}
	for i, sid := range sids {
		row := RowWrite{Fingerprint: strings.Repeat("f", 31) + string(rune('0'+i)), Thread: "t", Role: "user", Kind: "text", Text: "hello " + sid[:1], InContext: true}
		writeDashSession(t, r, sid, []RowWrite{row})
		if err := r.Register(Registration{SessionID: sid, Agent: "claude-code", Cwd: "/w", RegisteredAt: "2026-01-01T00:00:00Z"}); err != nil {
			t.Fatalf("register %.20q: %v", sid, err)
		}
		if err := r.SetForce(sid); err != nil {
			t.Fatalf("force %.20q: %v", sid, err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(r.Dir(), "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || len(e.Name()) > 255 {
			t.Errorf("file name %q", e.Name())
		}
	}
	infos, err := r.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, in := range infos {
		listed = append(listed, in.SessionID)
		if in.Agent != "claude-code" {
			t.Errorf("session %.20q: agent %q, want the registration's", in.SessionID, in.Agent)
		}
	}
	slices.Sort(listed)
	want := slices.Clone(sids)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("Sessions lists %q, want %q", listed, want)
	}
	for _, sid := range sids {
		if !r.HasSession(sid) || !r.Force(sid) {
			t.Errorf("%.20q: HasSession %v, Force %v", sid, r.HasSession(sid), r.Force(sid))
		}
		rows, total, err := r.Rows(ctx, sid, 0, 10, 1000)
		if err != nil || total != 1 || len(rows) != 1 {
			t.Errorf("%.20q: rows %d of %d, %v", sid, len(rows), total, err)
		}
	}

	// the sweep deletes them whole, the long id's .sid with them
	old := time.Now().Add(-40 * 24 * time.Hour)
	for _, e := range entries {
		age(t, filepath.Join(r.Dir(), "sessions", e.Name()), old)
	}
	rep, err := r.Sweep(30, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.SessionsDeleted) != len(sids) {
		t.Errorf("swept %q, want %d sessions", rep.SessionsDeleted, len(sids))
	}
	if left, _ := os.ReadDir(filepath.Join(r.Dir(), "sessions")); len(left) != 0 {
		t.Errorf("left after the sweep: %v", left)
	}
}

// TestLegacyDotDatabase: a database a dot id got before the escape rule (sessions/.x.db) is
// still the session's. Alone it is read and written in place; beside the escaped %2Ex.db (an
// older version wrote it after this one made the escaped one), session .x is listed once, with
// the counts of the database its reads open, and the dashboard's other listings agree.
func TestLegacyDotDatabase(t *testing.T) {
	t.Parallel()
	row := func(fp, text string) RowWrite {
		return RowWrite{Fingerprint: strings.Repeat(fp, 32), Thread: "t", Role: "user", Kind: "text", Text: text, InContext: true}
	}
	for _, tc := range []struct {
		name    string
		escaped []RowWrite // session .x's rows, written before the legacy file appears; nil: no escaped database
		legacy  []RowWrite // the rows of the database renamed to .x.db
		events  []Event
		check   func(t *testing.T, ctx context.Context, r *Root, dir string)
	}{
		{name: "alone, still opens", legacy: []RowWrite{row("e", "old row")}, check: func(t *testing.T, ctx context.Context, r2 *Root, dir string) {
			if !r2.HasSession(".x") {
				t.Fatal("the legacy .x.db is not found for session .x")
			}
			writeDashSession(t, r2, ".x", []RowWrite{row("d", "new row")})
			if _, total, err := r2.Rows(ctx, ".x", 0, 10, 100); err != nil || total != 2 {
				t.Fatalf("rows of .x: %d, %v; want the old and the new row in one database", total, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "%2Ex.db")); err == nil {
				t.Error("a second database was made beside the legacy one")
			}
			infos, err := r2.Sessions(ctx)
			if err != nil || len(infos) != 1 || infos[0].SessionID != ".x" {
				t.Fatalf("Sessions = %+v, %v; want .x", infos, err)
			}
		}},
		{name: "beside the escaped one", escaped: []RowWrite{row("a", "new row")}, legacy: []RowWrite{row("b", "old row"), row("c", "old row 2")},
			events: []Event{{Kind: "usage"}}, check: func(t *testing.T, ctx context.Context, r2 *Root, _ string) {
				if _, total, err := r2.Rows(ctx, ".x", 0, 10, 100); err != nil || total != 1 {
					t.Fatalf("rows of .x: %d, %v; want the escaped database's one row", total, err)
				}
				infos, err := r2.Sessions(ctx)
				if err != nil || len(infos) != 1 || infos[0].SessionID != ".x" || infos[0].Rows != 1 {
					t.Fatalf("Sessions = %+v, %v; want .x once, with the 1 row its page shows", infos, err)
				}
				files, err := r2.listSessionFiles()
				if err != nil {
					t.Fatal(err)
				}
				if len(files) != 1 || files[0].sid != ".x" || files[0].stamp.db.size <= 0 {
					t.Fatalf("listSessionFiles (Daily, Status and savings list from it): %+v", files)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRoot(t)
			if tc.escaped != nil {
				writeDashSession(t, r, ".x", tc.escaped, tc.events...)
			}
			writeDashSession(t, r, "legacy-src", tc.legacy, tc.events...)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(r.Dir(), "sessions")
			if err := os.Rename(filepath.Join(dir, "legacy-src.db"), filepath.Join(dir, ".x.db")); err != nil {
				t.Fatal(err)
			}
			r2 := openRoot(t, r.Dir())
			tc.check(t, context.Background(), r2, dir)
		})
	}
}
