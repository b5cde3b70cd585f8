package mcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/smarter-compact/smarter-compact/store"
)

// maxWorkspaceSessions caps the sessions a call without session_id reads (contract: Which
// session a call reads).
const maxWorkspaceSessions = 20

// sessionAliases are words an agent uses for "this session" before any pointer gave it the
// id; they resolve to the workspace's sessions (contract: Which session a call reads).
var sessionAliases = []string{"current", "this", "these", "latest", "self", "default", "now", "recent"}

// asciiSpace is the whitespace the contract trims from session ids.
const asciiSpace = " \t\n\v\f\r"

// resolution is what a call reads: session ids, newest first, and why when they are not
// the id the call gave.
type resolution struct {
	sids []string
	note string
}

// resolve applies the contract's table "Which session a call reads" to the session_id
// argument (given is false when it is absent). Errors the model can fix are toolErrors. An
// empty or blank session_id is one (contract: Session id, step 3). The ids "." and ".." are
// read like any other: their files are escaped (store's sid_file.go), and the pointer gives
// them to the agent as they are.
func (s *Server) resolve(ctx context.Context, raw string, given bool) (resolution, error) {
	id := strings.Trim(raw, asciiSpace)
	if given && id == "" {
		return resolution{}, toolErrorf("session_id is empty: pass the session_id from the [smarter-compact: …] pointer, or omit session_id to read this workspace's sessions")
	}
	if !given {
		workspace, err := s.callWorkspace(ctx)
		if err != nil {
			return resolution{}, err
		}
		if workspace == "" {
			return resolution{}, toolErrorf("this MCP connection names no workspace (over HTTP the service reads none of its own, and the client declared no MCP roots), so a call without session_id reads nothing: pass the session_id from the [smarter-compact: …] pointer")
		}
		ws, err := s.workspaceSessions(workspace)
		if err != nil {
			return resolution{}, err
		}
		if len(ws) == 0 {
			return resolution{}, toolErrorf("no session is registered under this workspace (%s), so there is nothing to read without a session_id: pass the session_id from the [smarter-compact: …] pointer", gitRoot(workspace))
		}
		return resolution{sids: ws}, nil
	}
	if strings.ContainsAny(id, `/\`) {
		return resolution{}, toolErrorf("session_id %q is refused: a session id never contains / or \\; pass the id the [smarter-compact: …] pointer gave, or omit session_id", truncate(id, 80))
	}
	sid, _ := store.SanitizeSID(id) // id is not empty, so ok
	if fileExists(s.dbPath(sid)) {
		return resolution{sids: []string{sid}}, nil
	}
	workspace, err := s.callWorkspace(ctx)
	if err != nil {
		return resolution{}, err
	}
	ws, err := s.workspaceSessions(workspace)
	if err != nil {
		return resolution{}, err
	}
	alias := slices.Contains(sessionAliases, strings.ToLower(id))
	switch {
	case len(ws) == 0:
		return resolution{}, toolErrorf("no session database for session_id %q, and no session is registered under this workspace (%s): pass the session_id from the [smarter-compact: …] pointer", truncate(id, 80), gitRoot(workspace))
	case alias:
		return resolution{sids: ws, note: fmt.Sprintf("session_id %q is not a session id; read this workspace's sessions instead (sessions_searched, newest first)", id)}, nil
	case len(ws) == 1:
		return resolution{sids: ws, note: fmt.Sprintf("no session database for session_id %q; read this workspace's only session, %s, instead", truncate(id, 80), ws[0])}, nil
	}
	return resolution{}, toolErrorf("no session database for session_id %q; this workspace's sessions are %s (newest first): pass one of them, or omit session_id to read them all", truncate(id, 80), strings.Join(ws, ", "))
}

func (s *Server) dbPath(sid string) string { return s.root.SessionDBPath(sid) }

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// gitRoot is the nearest ancestor of the workspace (itself included) that holds .git (a
// directory, or a file in a worktree); the workspace itself when there is none.
func gitRoot(workspace string) string {
	if workspace == "" {
		return ""
	}
	for d := workspace; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return workspace
		}
		d = parent
	}
}

// workspaceSessions lists sessions registered (sessions/<sid>.json) with a cwd under the
// workspace's git root that have a database, newest registration first, at most 20. A
// registration that cannot be read is skipped with a log line.
func (s *Server) workspaceSessions(workspace string) ([]string, error) {
	root := gitRoot(workspace)
	if root == "" {
		return nil, nil
	}
	roots := withResolved(root)
	entries, err := os.ReadDir(filepath.Join(s.root.Dir(), "sessions"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	type found struct{ sid, at string }
	var list []found
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".trim.json") {
			continue
		}
		sid, ok := s.root.SessionOfFile(strings.TrimSuffix(name, ".json"))
		if !ok {
			continue
		}
		reg, err := s.root.Registration(sid)
		if err != nil {
			s.log.Warn("skipped an unreadable session registration", "session", sid, "err", err)
			continue
		}
		if reg == nil || !underAny(reg.Cwd, roots) || !fileExists(s.dbPath(sid)) {
			continue
		}
		list = append(list, found{sid, reg.RegisteredAt})
	}
	slices.SortFunc(list, func(a, b found) int {
		return cmp.Or(cmp.Compare(b.at, a.at), cmp.Compare(a.sid, b.sid))
	})
	if len(list) > maxWorkspaceSessions {
		list = list[:maxWorkspaceSessions]
	}
	sids := make([]string, len(list))
	for i, f := range list {
		sids[i] = f.sid
	}
	return sids, nil
}

// withResolved is path and, when it differs, path with symlinks resolved: the agent's cwd
// and ours may name the same directory through different links.
func withResolved(path string) []string {
	out := []string{filepath.Clean(path)}
	if r, err := filepath.EvalSymlinks(path); err == nil && filepath.Clean(r) != out[0] {
		out = append(out, filepath.Clean(r))
	}
	return out
}

// underAny reports whether cwd is one of roots or inside one.
func underAny(cwd string, roots []string) bool {
	if cwd == "" || !filepath.IsAbs(cwd) {
		return false
	}
	for _, c := range withResolved(cwd) {
		for _, r := range roots {
			if within(c, r) {
				return true
			}
		}
	}
	return false
}

func within(path, root string) bool {
	if runtime.GOOS == "windows" {
		path, root = strings.ToLower(path), strings.ToLower(root)
	}
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return false
	}
	return rel == "." || rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
