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

// install is Install for one agent: it plans, records and, unless dryRun, writes (see
// Install for the rules).
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
	in := newInstallRun(env, a, name, prev, index)
	in.addUpstreams(plan.Upstreams)
	rep.Upstreams = in.diff.Upstreams
	for _, fe := range plan.Files {
		in.file(fe, &rep)
	}
	if len(in.adopted) > 0 {
		rep.Notes = append(rep.Notes, "no install record in "+env.StateDir+", but the agent's files already hold smarter-compact's wiring: recorded it, so that uninstall removes it")
	}
	if len(in.writes) == 0 && !in.recorded {
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
	if err := in.apply(); err != nil {
		rep.Err = err
	}
	return rep
}

// pendingWrite is one file install writes: its bytes before (nil when absent) and after,
// and the mode to write with.
type pendingWrite struct {
	path          string
	before, after []byte
	mode          os.FileMode
}

// installRun is one agent's install between planning and writing: the diff and snapshot
// index being built (from the previous ones), the wiring adopted from an install whose
// record was lost, and what is to be written.
type installRun struct {
	env      Env
	name     string
	index    snapshotIndex // with the new snapshots added
	oldIndex snapshotIndex // as read, for the undo
	adopted  map[string][]Op
	diff     InstallDiff
	recorded bool // a file recorded that install does not write
	writes   []pendingWrite
	// new snapshots, with their bytes
	snapshots     []snapshotEntry
	snapshotBytes [][]byte
	next          int // number of the next snapshot file
}

// newInstallRun starts agent a (named name) from prev (a copy of it; a fresh diff when nil, with the wiring
// already in a's files adopted) and index. A step of its own because it decides where the
// record starts: the previous install's, or a new one.
func newInstallRun(env Env, a Agent, name string, prev *InstallDiff, index snapshotIndex) *installRun {
	in := &installRun{env: env, name: name, index: index, oldIndex: snapshotIndex{Files: slices.Clone(index.Files)}}
	// No record, yet the files may hold our wiring (the state directory was lost): what is
	// ours gets recorded, so that uninstall has tier 1 rather than nothing.
	if prev == nil {
		in.adopted = adoptWiring(env, a)
	}
	in.diff = InstallDiff{Version: diffVersion, Agent: name, InstalledAt: installTime(env).UTC().Format(time.RFC3339)}
	if prev != nil {
		in.diff = *prev
		in.diff.Files = slices.Clone(prev.Files)
	}
	in.next = nextSnapshot(index)
	return in
}

// addUpstreams records the plan's upstreams the diff does not have yet: the first install
// saw the user's own upstream, a later one would only see ours.
func (in *installRun) addUpstreams(upstreams map[string]string) {
	for k, v := range upstreams {
		if _, ok := in.diff.Upstreams[k]; !ok {
			if in.diff.Upstreams == nil {
				in.diff.Upstreams = map[string]string{}
			}
			in.diff.Upstreams[k] = v
		}
	}
}

// file adds one planned file to the run: an unchanged file only gets its adopted wiring
// recorded; a changed one goes into rep (path and diff) and the writes, and its ops into
// its record, the one it has or a new one.
func (in *installRun) file(fe FileEdit, rep *AgentReport) {
	ours := in.adopted[fe.Path]
	if bytes.Equal(fe.Before, fe.After) && (fe.Before == nil) == (fe.After == nil) {
		in.recordUnchanged(fe.Path, ours)
		return
	}
	rep.Files = append(rep.Files, fe.Path)
	rep.Diff += unifiedDiff(fe.Path, fe.Before, fe.After)
	mode := fe.Mode
	if mode == 0 {
		mode = fileMode(fe.Path, 0o600)
	}
	in.writes = append(in.writes, pendingWrite{fe.Path, fe.Before, fe.After, mode})
	ops := keptOps(fe.Ops)
	if len(ours) > 0 {
		// Our values already there have no Old worth restoring: the ops remove them.
		ops = mergeOps(ours, ops)
	}
	if i := slices.IndexFunc(in.diff.Files, func(df DiffFile) bool { return df.Path == fe.Path }); i >= 0 {
		updateRecord(&in.diff.Files[i], fe, ops)
		return
	}
	in.diff.Files = append(in.diff.Files, in.newRecord(fe, ours, ops))
}

// recordUnchanged records the adopted wiring ours of a file install leaves as it is, when
// the diff has no record of it yet. Its own step because only here a file is recorded
// without being written.
func (in *installRun) recordUnchanged(path string, ours []Op) {
	if len(ours) > 0 && !slices.ContainsFunc(in.diff.Files, func(df DiffFile) bool { return df.Path == path }) {
		// No snapshot: a copy of the wired file would only put our wiring back.
		in.diff.Files = append(in.diff.Files, DiffFile{Path: path, Existed: true, Ops: slices.Clone(ours)})
		in.recorded = true
	}
}

// updateRecord merges ops into the record df a previous install left for fe's file. Its
// own step because it decides whether the snapshot still stands for the file before us.
func updateRecord(df *DiffFile, fe FileEdit, ops []Op) {
	df.Ops = mergeOps(df.Ops, ops)
	// The snapshot stands for "before us" only while nobody else edited the file
	// since our last write; otherwise uninstall must undo op by op.
	if df.AfterSHA256 != "" && df.AfterSHA256 == sha256Hex(fe.Before) {
		df.AfterSHA256 = sha256Hex(fe.After)
	} else {
		df.AfterSHA256 = ""
	}
}

// newRecord is the record of a file the diff does not have yet, with its snapshot: one left
// in the index by an install whose diff was lost, none for a file holding adopted wiring
// ours, else a new one of fe.Before (added to the index and the snapshots to write). Its
// own step because it is where the tiers of undo for the file are chosen.
func (in *installRun) newRecord(fe FileEdit, ours, ops []Op) DiffFile {
	df := DiffFile{Path: fe.Path, Existed: fe.Before != nil, AfterSHA256: sha256Hex(fe.After), Ops: ops}
	if e, ok := in.index.find(fe.Path); ok {
		// A snapshot left by an install whose diff was lost: it is older than our
		// edits, so keep it rather than copying our own edits.
		df.Existed = e.Existed
		if e.Snapshot != "" {
			df.Snapshot = filepath.Join(snapshotDir(in.env, in.name), e.Snapshot)
		}
	} else if len(ours) > 0 {
		// The file holds our wiring from an install whose record was lost: no snapshot
		// (it would only put that wiring back) and no hash, so uninstall undoes the ops.
		df.Existed, df.AfterSHA256 = true, ""
	} else {
		e := snapshotEntry{Path: fe.Path, Existed: fe.Before != nil}
		if fe.Before != nil {
			e.Snapshot = strconv.Itoa(in.next) + ".snapshot"
			in.next++
			df.Snapshot = filepath.Join(snapshotDir(in.env, in.name), e.Snapshot)
		}
		in.index.Files = append(in.index.Files, e)
		in.snapshots = append(in.snapshots, e)
		in.snapshotBytes = append(in.snapshotBytes, fe.Before)
	}
	return df
}

// apply writes the state, then the agent's files. State first: a crash after it leaves a
// diff (or at least snapshots) that uninstall can use; a crash before it has changed
// nothing. On an error it puts back what it wrote (the files, then the state) and says so
// in the error.
func (in *installRun) apply() error {
	env, name := in.env, in.name
	dir := snapshotDir(env, name)
	prevDiff, hadDiff, _ := readFile(diffPath(env, name))
	if err := writeState(dir, in.snapshots, in.snapshotBytes, indexPath(env, name), in.index, diffPath(env, name), in.diff); err != nil {
		in.undoState(prevDiff, hadDiff)
		return fmt.Errorf("%w (nothing was changed)", err)
	}
	for i, w := range in.writes {
		if err := writeFileAtomic(w.path, w.after, w.mode); err != nil {
			// Put back what was written, so the agent's files stay as they were.
			for _, u := range in.writes[:i] {
				if u.before == nil {
					_ = removeFile(u.path)
				} else {
					_ = writeFileAtomic(u.path, u.before, u.mode)
				}
			}
			in.undoState(prevDiff, hadDiff)
			return fmt.Errorf("%w (the agent's files were put back as they were)", err)
		}
	}
	return nil
}

// undoState puts the state back as apply found it: the diff (prevDiff, or none when
// !hadDiff), no new snapshots, the index as read (no snapshot folder when it was empty).
// Its own step because both failures of apply end in it; it is best effort.
func (in *installRun) undoState(prevDiff []byte, hadDiff bool) {
	env, name := in.env, in.name
	dir := snapshotDir(env, name)
	if hadDiff {
		_ = writeFileAtomic(diffPath(env, name), prevDiff, 0o600)
	} else {
		_ = removeFile(diffPath(env, name))
	}
	for _, e := range in.snapshots {
		if e.Snapshot != "" {
			_ = removeFile(filepath.Join(dir, e.Snapshot))
		}
	}
	if len(in.oldIndex.Files) == 0 {
		_ = os.RemoveAll(dir)
	} else {
		_ = writeJSON(indexPath(env, name), in.oldIndex)
	}
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
