package mcp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var tinySession = []row{{role: "user", kind: "text", text: "hello"}}

// resolutionRig has, under its repo: B (newest, cwd repo/sub) and A (cwd repo), D registered
// under the repo without a database; C registered elsewhere, F under a sibling directory
// whose name starts with the repo's; E with a database but no registration (an fp- session).
func resolutionRig(t *testing.T) *rig {
	t.Helper()
	r := newRig(t)
	other := filepath.Join(filepath.Dir(r.repo), "elsewhere")
	r.register(t, "A", r.repo, 1)
	r.register(t, "D", r.repo, 2)
	r.register(t, "B", filepath.Join(r.repo, "sub"), 3)
	r.register(t, "C", other, 5)
	r.register(t, "F", r.repo+"2", 6)
	for _, sid := range []string{"A", "B", "C", "E", "F"} {
		r.writeSession(t, sid, tinySession...)
	}
	return r
}

// longSID is a 300-character session id: its database name is hashed (store's sid_file.go).
var longSID = strings.Repeat("x", 300)

// TestResolve covers each row of the contract's table "Which session a call reads".
func TestResolve(t *testing.T) {
	t.Parallel()
	r := resolutionRig(t)
	for _, sid := range []string{"ses_1", ".", "..", ".hidden", longSID} {
		r.writeSession(t, sid, tinySession...)
	}
	tests := []struct {
		name     string
		id       string
		given    bool
		want     []string
		wantNote string // substring; "" means no note
		wantErr  string
	}{
		{name: "absent: the workspace's sessions, newest first", want: []string{"B", "A"}},
		{name: "blank id is an error", id: "  ", given: true, wantErr: "session_id is empty"},
		{name: "empty id is an error", id: "", given: true, wantErr: "session_id is empty"},
		{name: "existing database in another workspace", id: "C", given: true, want: []string{"C"}},
		{name: "existing database without registration", id: "E", given: true, want: []string{"E"}},
		{name: "surrounding whitespace trimmed", id: " C\n", given: true, want: []string{"C"}},
		{name: "id sanitized like the writers do", id: "ses 1", given: true, want: []string{"ses_1"}},
		{name: "alias", id: "current", given: true, want: []string{"B", "A"}, wantNote: `session_id "current" is not a session id`},
		{name: "alias any case", id: "Latest", given: true, want: []string{"B", "A"}, wantNote: `"Latest"`},
		{name: "every alias", id: "recent", given: true, want: []string{"B", "A"}, wantNote: `"recent"`},
		{name: "unknown id with several sessions", id: "made-up", given: true, wantErr: `no session database for session_id "made-up"; this workspace's sessions are B, A`},
		{name: "registered without database is unknown", id: "D", given: true, wantErr: "sessions are B, A"},
		{name: "slash refused", id: "a/b", given: true, wantErr: `session_id "a/b" is refused`},
		{name: "backslash refused", id: `a\b`, given: true, wantErr: "is refused"},
		{name: "dot id read", id: ".", given: true, want: []string{"."}},
		{name: "dot dot id read", id: " .. ", given: true, want: []string{".."}},
		{name: "dot-prefixed id read", id: ".hidden", given: true, want: []string{".hidden"}},
		{name: "long id read", id: longSID, given: true, want: []string{longSID}},
		{name: "traversal refused", id: "../C", given: true, wantErr: "is refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := r.srv.resolve(t.Context(), tt.id, tt.given)
			checkResolution(t, res, err, tt.want, tt.wantNote, tt.wantErr)
		})
	}
}

func checkResolution(t *testing.T, res resolution, err error, want []string, wantNote, wantErr string) {
	t.Helper()
	if wantErr != "" {
		var te toolError
		if !errors.As(err, &te) || !strings.Contains(te.msg, wantErr) {
			t.Fatalf("error %v, want a tool error containing %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.sids, want) {
		t.Errorf("sessions %v, want %v", res.sids, want)
	}
	if wantNote == "" && res.note != "" || !strings.Contains(res.note, wantNote) {
		t.Errorf("note %q, want %q", res.note, wantNote)
	}
}

func TestResolveOneSession(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.addSession(t, "only", r.workspace, 1, tinySession...)
	r.addSession(t, "away", t.TempDir(), 2, tinySession...)
	res, err := r.srv.resolve(t.Context(), "made-up-id", true)
	checkResolution(t, res, err, []string{"only"}, `no session database for session_id "made-up-id"; read this workspace's only session, only, instead`, "")
	res, err = r.srv.resolve(t.Context(), "this", true)
	checkResolution(t, res, err, []string{"only"}, `"this" is not a session id`, "")
	res, err = r.srv.resolve(t.Context(), "away", true)
	checkResolution(t, res, err, []string{"away"}, "", "")
}

func TestResolveNoSessions(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.addSession(t, "away", t.TempDir(), 2, tinySession...)
	_, err := r.srv.resolve(t.Context(), "", false)
	checkResolution(t, resolution{}, err, nil, "", "no session is registered under this workspace ("+r.repo+")")
	_, err = r.srv.resolve(t.Context(), "current", true)
	checkResolution(t, resolution{}, err, nil, "", `no session database for session_id "current", and no session is registered under this workspace`)
}

func TestResolveAtMostTwenty(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var want []string
	for i := range 25 {
		sid := fmt.Sprintf("s%02d", i)
		r.addSession(t, sid, r.repo, i, tinySession...)
		want = append(want, sid)
	}
	slices.Reverse(want)
	res, err := r.srv.resolve(t.Context(), "", false)
	checkResolution(t, res, err, want[:20], "", "")
}

// A workspace reached through a symlink still finds sessions registered with the physical
// path, and the other way round.
func TestResolveSymlinkedWorkspace(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(r.repo, link); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	r.addSession(t, "physical", r.workspace, 1, tinySession...)
	r.addSession(t, "logical", filepath.Join(link, "sub"), 2, tinySession...)
	viaLink := New(r.srv.root, Options{Workspace: filepath.Join(link, "sub", "dir"), Now: func() time.Time { return fixedNow }})
	for name, s := range map[string]*Server{"physical cwd": r.srv, "cwd through the link": viaLink} {
		res, err := s.resolve(t.Context(), "", false)
		if err != nil || !slices.Equal(res.sids, []string{"logical", "physical"}) {
			t.Errorf("%s: %v, %v; want both sessions", name, res.sids, err)
		}
	}
}

// Without a .git above it, the workspace itself is the root.
func TestResolveNoGit(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	if err := os.RemoveAll(filepath.Join(r.repo, ".git")); err != nil {
		t.Fatal(err)
	}
	r.addSession(t, "repo-level", r.repo, 1, tinySession...)
	r.addSession(t, "deeper", filepath.Join(r.workspace, "x"), 2, tinySession...)
	res, err := r.srv.resolve(t.Context(), "", false)
	checkResolution(t, res, err, []string{"deeper"}, "", "")
}

// A .git file (a worktree or submodule) marks the root like a .git folder.
func TestResolveGitFile(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	wt := filepath.Join(r.repo, "sub")
	if err := os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: ../.git/worktrees/sub\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.addSession(t, "outer", r.repo, 1, tinySession...)
	r.addSession(t, "inner", wt, 2, tinySession...)
	res, err := r.srv.resolve(t.Context(), "", false)
	checkResolution(t, res, err, []string{"inner"}, "", "")
}

// Resolution errors reach the model as isError results from both tools, before any
// database is opened.
func TestResolveErrorsThroughTools(t *testing.T) {
	t.Parallel()
	r := resolutionRig(t)
	c := httpClient(t, r.srv)
	tests := []struct {
		id   any
		want string
	}{
		{"made-up", "this workspace's sessions are B, A"},
		{"../x", "is refused"},
		{"  ", "session_id is empty"},
		{17, "session_id must be a string"},
	}
	for _, tt := range tests {
		wantResolutionError(t, c, tt.id, tt.want)
	}
	empty := newRig(t)
	wantResolutionError(t, httpClient(t, empty.srv), nil, "no session is registered under this workspace")
}
