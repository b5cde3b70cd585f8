package installer

// Install and Uninstall: the install diff, the snapshots and the three tiers of undo (seed
// 004, InstallDiff; DESIGN.md §8). Files on disk under StateDir:
//
//	<agent>.json            the InstallDiff
//	<agent>/<n>.snapshot    each file as it was before the first install
//	<agent>/index.json      which snapshot is which file, so that tier 2 works without the diff

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pmezard/go-difflib/difflib"
)

// ErrNotInstalled is what Agent.Plan wraps when the agent itself is not on this machine.
var ErrNotInstalled = errors.New("not installed")

const diffVersion = 1

// snapshotIndex lists an agent's snapshots by the file they copy (<agent>/index.json).
type snapshotIndex struct {
	Files []snapshotEntry `json:"files"`
}

type snapshotEntry struct {
	Path     string `json:"path"`
	Existed  bool   `json:"existed"`
	Snapshot string `json:"snapshot,omitempty"` // file name in <StateDir>/<agent>/
}

func (x *snapshotIndex) find(path string) (snapshotEntry, bool) {
	i := slices.IndexFunc(x.Files, func(e snapshotEntry) bool { return e.Path == path })
	if i < 0 {
		return snapshotEntry{}, false
	}
	return x.Files[i], true
}

func diffPath(env Env, agent string) string    { return filepath.Join(env.StateDir, agent+".json") }
func snapshotDir(env Env, agent string) string { return filepath.Join(env.StateDir, agent) }
func indexPath(env Env, agent string) string {
	return filepath.Join(snapshotDir(env, agent), "index.json")
}

// Install wires every agent (DESIGN.md §8). Per agent it plans, then writes each changed file
// atomically with its mode kept, after a snapshot of each file that existed (taken once: a
// second install keeps the first snapshot and the first Old values) and the InstallDiff. An
// agent that is not installed is skipped; one whose plan fails (a file that does not parse)
// gets Err and nothing of it is written. A second install with nothing to change writes
// nothing, except when there is no record and the files already hold our wiring (the state
// directory was lost): then it writes a record whose ops remove that wiring (Old unknown, so
// absent) and no snapshot of the wired files. dryRun fills Files and Diff and writes nothing
// at all.
func Install(env Env, agents []Agent, dryRun bool) Report {
	var r Report
	for _, a := range agents {
		r.Agents = append(r.Agents, install(env, a, dryRun))
	}
	return r
}

func install(env Env, a Agent, dryRun bool) AgentReport {
	name := a.Name()
	rep := AgentReport{Agent: name}
	plan, err := a.Plan(env)
	if errors.Is(err, ErrNotInstalled) {
		rep.Skipped = err.Error()
		return rep
	}
	if err != nil {
		rep.Err = err
		return rep
	}
	rep.Notes = slices.Clone(plan.Notes)
	if env.StateDir == "" {
		rep.Err = errors.New("install: no state directory to keep the install diff in")
		return rep
	}
	prev, err := readDiff(env, name)
	if err != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%v: starting a new one (snapshots from before are kept)", err))
	}
	index, err := readIndex(env, name)
	if err != nil {
		rep.Err = err
		return rep
	}
	oldIndex := snapshotIndex{Files: slices.Clone(index.Files)}
	// No record, yet the files may hold our wiring (the state directory was lost): what is
	// ours gets recorded, so that uninstall has tier 1 rather than nothing.
	var adopted map[string][]Op
	if prev == nil {
		adopted = adoptWiring(env, a)
	}
	recorded := false // a file recorded that install does not write
	diff := InstallDiff{Version: diffVersion, Agent: name, InstalledAt: installTime(env).UTC().Format(time.RFC3339)}
	if prev != nil {
		diff = *prev
		diff.Files = slices.Clone(prev.Files)
	}
	for k, v := range plan.Upstreams {
		if _, ok := diff.Upstreams[k]; !ok { // the first install saw the user's own upstream
			if diff.Upstreams == nil {
				diff.Upstreams = map[string]string{}
			}
			diff.Upstreams[k] = v
		}
	}
	rep.Upstreams = diff.Upstreams

	type write struct {
		path          string
		before, after []byte
		mode          os.FileMode
	}
	var writes []write
	var snapshots []snapshotEntry // new ones, with their bytes below
	var snapshotBytes [][]byte
	next := nextSnapshot(index)
	for _, fe := range plan.Files {
		ours := adopted[fe.Path]
		if bytes.Equal(fe.Before, fe.After) && (fe.Before == nil) == (fe.After == nil) {
			if len(ours) > 0 && !slices.ContainsFunc(diff.Files, func(df DiffFile) bool { return df.Path == fe.Path }) {
				// No snapshot: a copy of the wired file would only put our wiring back.
				diff.Files = append(diff.Files, DiffFile{Path: fe.Path, Existed: true, Ops: slices.Clone(ours)})
				recorded = true
			}
			continue
		}
		rep.Files = append(rep.Files, fe.Path)
		rep.Diff += unifiedDiff(fe.Path, fe.Before, fe.After)
		mode := fe.Mode
		if mode == 0 {
			mode = fileMode(fe.Path, 0o600)
		}
		writes = append(writes, write{fe.Path, fe.Before, fe.After, mode})
		ops := keptOps(fe.Ops)
		if len(ours) > 0 {
			// Our values already there have no Old worth restoring: the ops remove them.
			ops = mergeOps(ours, ops)
		}
		if i := slices.IndexFunc(diff.Files, func(df DiffFile) bool { return df.Path == fe.Path }); i >= 0 {
			df := &diff.Files[i]
			df.Ops = mergeOps(df.Ops, ops)
			// The snapshot stands for "before us" only while nobody else edited the file
			// since our last write; otherwise uninstall must undo op by op.
			if df.AfterSHA256 != "" && df.AfterSHA256 == sha256Hex(fe.Before) {
				df.AfterSHA256 = sha256Hex(fe.After)
			} else {
				df.AfterSHA256 = ""
			}
			continue
		}
		df := DiffFile{Path: fe.Path, Existed: fe.Before != nil, AfterSHA256: sha256Hex(fe.After), Ops: ops}
		if e, ok := index.find(fe.Path); ok {
			// A snapshot left by an install whose diff was lost: it is older than our
			// edits, so keep it rather than copying our own edits.
			df.Existed = e.Existed
			if e.Snapshot != "" {
				df.Snapshot = filepath.Join(snapshotDir(env, name), e.Snapshot)
			}
		} else if len(ours) > 0 {
			// The file holds our wiring from an install whose record was lost: no snapshot
			// (it would only put that wiring back) and no hash, so uninstall undoes the ops.
			df.Existed, df.AfterSHA256 = true, ""
		} else {
			e := snapshotEntry{Path: fe.Path, Existed: fe.Before != nil}
			if fe.Before != nil {
				e.Snapshot = strconv.Itoa(next) + ".snapshot"
				next++
				df.Snapshot = filepath.Join(snapshotDir(env, name), e.Snapshot)
			}
			index.Files = append(index.Files, e)
			snapshots = append(snapshots, e)
			snapshotBytes = append(snapshotBytes, fe.Before)
		}
		diff.Files = append(diff.Files, df)
	}
	if len(adopted) > 0 {
		rep.Notes = append(rep.Notes, "no install record in "+env.StateDir+", but the agent's files already hold smarter-compact's wiring: recorded it, so that uninstall removes it")
	}
	if len(writes) == 0 && !recorded {
		if prev != nil {
			rep.Notes = append(rep.Notes, "already installed: nothing to change")
		} else {
			rep.Notes = append(rep.Notes, "nothing to change")
		}
		return rep
	}
	if dryRun {
		return rep
	}

	// State first: a crash after this leaves a diff (or at least snapshots) that uninstall
	// can use; a crash before it has changed nothing.
	dir := snapshotDir(env, name)
	prevDiff, hadDiff, _ := readFile(diffPath(env, name))
	undoState := func() {
		if hadDiff {
			_ = writeFileAtomic(diffPath(env, name), prevDiff, 0o600)
		} else {
			_ = removeFile(diffPath(env, name))
		}
		for _, e := range snapshots {
			if e.Snapshot != "" {
				_ = removeFile(filepath.Join(dir, e.Snapshot))
			}
		}
		if len(oldIndex.Files) == 0 {
			_ = os.RemoveAll(dir)
		} else {
			_ = writeJSON(indexPath(env, name), oldIndex)
		}
	}
	if err := writeState(dir, snapshots, snapshotBytes, indexPath(env, name), index, diffPath(env, name), diff); err != nil {
		undoState()
		rep.Err = fmt.Errorf("%w (nothing was changed)", err)
		return rep
	}
	for i, w := range writes {
		if err := writeFileAtomic(w.path, w.after, w.mode); err != nil {
			// Put back what was written, so the agent's files stay as they were.
			for _, u := range writes[:i] {
				if u.before == nil {
					_ = removeFile(u.path)
				} else {
					_ = writeFileAtomic(u.path, u.before, u.mode)
				}
			}
			undoState()
			rep.Err = fmt.Errorf("%w (the agent's files were put back as they were)", err)
			return rep
		}
	}
	return rep
}

// writeState writes the new snapshots, the snapshot index and the install diff.
func writeState(dir string, snapshots []snapshotEntry, snapshotBytes [][]byte, indexFile string, index snapshotIndex, diffFile string, diff InstallDiff) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("make %s: %w", dir, err)
	}
	for i, e := range snapshots {
		if e.Snapshot == "" {
			continue
		}
		if err := writeFileAtomic(filepath.Join(dir, e.Snapshot), snapshotBytes[i], 0o600); err != nil {
			return fmt.Errorf("snapshot %s: %w", e.Path, err)
		}
	}
	if err := writeJSON(indexFile, index); err != nil {
		return err
	}
	return writeJSON(diffFile, diff)
}

// readDiff reads an agent's InstallDiff: (nil, nil) when there is none, an error naming the
// file when it is unreadable.
func readDiff(env Env, agent string) (*InstallDiff, error) {
	path := diffPath(env, agent)
	b, ok, err := readFile(path)
	if err != nil || !ok {
		if err != nil {
			return nil, fmt.Errorf("install record %s is unreadable (%v)", path, err)
		}
		return nil, nil
	}
	var d InstallDiff
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("install record %s is corrupt (%v)", path, err)
	}
	if d.Version != diffVersion || d.Agent != agent {
		return nil, fmt.Errorf("install record %s is corrupt (version %d, agent %q)", path, d.Version, d.Agent)
	}
	return &d, nil
}

// readIndex reads an agent's snapshot index; none is an empty index.
func readIndex(env Env, agent string) (snapshotIndex, error) {
	var x snapshotIndex
	b, ok, err := readFile(indexPath(env, agent))
	if err != nil {
		return x, fmt.Errorf("snapshot index: %w", err)
	}
	if !ok {
		return x, nil
	}
	if err := json.Unmarshal(b, &x); err != nil {
		return x, fmt.Errorf("snapshot index %s is corrupt (%v): move it away, then run the command again", indexPath(env, agent), err)
	}
	return x, nil
}

func nextSnapshot(x snapshotIndex) int {
	n := 1
	for _, e := range x.Files {
		if k, err := strconv.Atoi(strings.TrimSuffix(e.Snapshot, ".snapshot")); err == nil && k >= n {
			n = k + 1
		}
	}
	return n
}

func snapshotPath(env Env, agent, snap string) string {
	if filepath.IsAbs(snap) {
		return snap
	}
	return filepath.Join(snapshotDir(env, agent), snap)
}

// writeJSON writes v indented, without HTML escaping, 0600.
func writeJSON(path string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return writeFileAtomic(path, buf.Bytes(), 0o600)
}

func isIndex(tok string) bool {
	_, err := strconv.Atoi(tok)
	return err == nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func installTime(env Env) time.Time {
	if env.Now != nil {
		return env.Now()
	}
	return time.Now()
}

// unifiedDiff is a unified diff of one file with "--- path" and "+++ path" headers ("" when
// a equals b). A missing last line end shows as in diff(1).
func unifiedDiff(path string, a, b []byte) string {
	s, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: diffLines(a), B: diffLines(b), FromFile: path, ToFile: path, Context: 3,
	})
	if err != nil {
		return fmt.Sprintf("--- %s\n+++ %s\n(no diff: %v)\n", path, path, err)
	}
	return s
}

func diffLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	lines := strings.SplitAfter(string(b), "\n")
	if lines[len(lines)-1] == "" {
		return lines[:len(lines)-1]
	}
	lines[len(lines)-1] += "\n\\ No newline at end of file\n"
	return lines
}
