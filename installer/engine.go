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
	"reflect"
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

// Uninstall undoes Install per agent (seed 004, two-tier uninstall). Tier 1 reads the diff:
// a file that still hashes to AfterSHA256 gets its snapshot back byte for byte (or is
// removed when install created it); a file edited since gets the inverse of each op, last
// first, only where the value is still the one we set, so the user's later edits stay.
// Tier 2, when the diff is missing or unreadable, puts back every snapshot the agent's files
// have and says in Notes and Diff what that overwrites. Tier 3, when there is neither a diff
// nor a snapshot (the state directory was lost) and the agent is an Unwirer, removes what is
// recognizably ours, saying in Notes what went. Afterwards the diff and snapshots are
// deleted. Nothing here needs the service. dryRun reports and writes nothing.
func Uninstall(env Env, agents []Agent, dryRun bool) Report {
	var r Report
	for _, a := range agents {
		r.Agents = append(r.Agents, uninstall(env, a, dryRun))
	}
	return r
}

// fileChange is one file uninstall rewrites (after nil: removes).
type fileChange struct {
	path          string
	before, after []byte
	mode          os.FileMode
}

func uninstall(env Env, a Agent, dryRun bool) AgentReport {
	name := a.Name()
	rep := AgentReport{Agent: name}
	if env.StateDir == "" {
		rep.Err = errors.New("uninstall: no state directory to read the install diff from")
		return rep
	}
	diff, derr := readDiff(env, name)
	var changes []fileChange
	var err error
	if diff != nil {
		rep.Tier = 1
		changes, err = undoDiff(env, diff, &rep)
	} else {
		var index snapshotIndex
		index, err = readIndex(env, name)
		if err == nil && len(index.Files) == 0 {
			// Tier 3: nothing recorded, so remove what is recognizably ours.
			if u, ok := a.(Unwirer); ok {
				changes, err = unwire(env, u, derr, &rep)
			}
			if err == nil && len(changes) == 0 {
				if derr != nil {
					rep.Err = fmt.Errorf("%v, and there are no snapshots: check the agent's files by hand", derr)
				} else {
					rep.Skipped = "nothing to undo: no install record in " + env.StateDir + ", and nothing of ours in the agent's files"
				}
				return rep
			}
		} else if err == nil {
			rep.Tier = 2
			if derr != nil {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%v: restoring the snapshots instead", derr))
			} else {
				rep.Notes = append(rep.Notes, "no install record in "+env.StateDir+": restoring the snapshots instead")
			}
			changes, err = restoreSnapshots(env, a, index, &rep)
		}
	}
	if err != nil {
		rep.Err = err
		return rep
	}
	for _, c := range changes {
		rep.Files = append(rep.Files, c.path)
		if rep.Tier != 2 { // tier 2 showed its diffs already, with what they overwrite
			rep.Diff += unifiedDiff(c.path, c.before, c.after)
		}
	}
	if dryRun {
		return rep
	}
	for i, c := range changes {
		var err error
		if c.after == nil {
			err = removeFile(c.path)
		} else {
			err = writeFileAtomic(c.path, c.after, c.mode)
		}
		if err != nil {
			for _, u := range changes[:i] {
				_ = writeFileAtomic(u.path, u.before, u.mode)
			}
			rep.Err = fmt.Errorf("%w (the agent's files were put back as they were; the install record is kept)", err)
			return rep
		}
	}
	if err := removeFile(diffPath(env, name)); err != nil {
		rep.Err = fmt.Errorf("remove the install record: %w", err)
		return rep
	}
	if err := os.RemoveAll(snapshotDir(env, name)); err != nil {
		rep.Err = fmt.Errorf("remove the snapshots: %w", err)
	}
	return rep
}

// Unwirer is implemented by an Agent that can find its wiring without an install record
// (an optional part of the Agent contract in api.go; the engine type-asserts it).
//
// Unwire reads the agent's files and returns the edits that remove what is recognizably
// ours, by marker: our proxy routes, our hooks, our MCP server entry, the files we write.
// It writes nothing. In each FileEdit, After nil means the file goes (a file only we
// write); Ops name each value removed with Old nil (what was there before install is
// unknown) and New the value found, in the reverse order of removal, so that tier 1 of
// uninstall replays them; After may also drop containers the removals left empty. Notes
// say what goes and what cannot come back. An agent that is not on this machine returns
// ErrNotInstalled or a plan without files.
//
// Uninstall uses it as tier 3, when an agent has neither an install record nor snapshots
// (the state directory was lost); Install uses it to write a fresh record when it finds
// our wiring already in the files and no record.
type Unwirer interface {
	Unwire(env Env) (*AgentPlan, error)
}

// adoptWiring returns, per file, the ops that remove the wiring of ours the agent's files
// already hold (none when the agent cannot tell, or the files do not parse: Plan says so).
func adoptWiring(env Env, a Agent) map[string][]Op {
	u, ok := a.(Unwirer)
	if !ok {
		return nil
	}
	plan, err := u.Unwire(env)
	if err != nil || plan == nil {
		return nil
	}
	var out map[string][]Op
	for _, fe := range plan.Files {
		if len(fe.Ops) == 0 {
			continue
		}
		if out == nil {
			out = map[string][]Op{}
		}
		out[fe.Path] = fe.Ops
	}
	return out
}

// unwire is tier 3: the changes Unwire plans, with their diffs and notes in rep (nil when
// nothing of ours is left).
func unwire(env Env, u Unwirer, derr error, rep *AgentReport) ([]fileChange, error) {
	plan, err := u.Unwire(env)
	if errors.Is(err, ErrNotInstalled) {
		return nil, nil
	}
	if err != nil {
		var pe *parseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%w; fix the file, then run uninstall again (nothing was changed)", err)
		}
		return nil, fmt.Errorf("%w (nothing was changed)", err)
	}
	var changes []fileChange
	for _, fe := range plan.Files {
		if fe.Before == nil || bytes.Equal(fe.Before, fe.After) {
			continue
		}
		mode := fe.Mode
		if mode == 0 {
			mode = fileMode(fe.Path, 0o600)
		}
		changes = append(changes, fileChange{fe.Path, fe.Before, fe.After, mode})
	}
	if len(changes) == 0 {
		return nil, nil
	}
	rep.Tier = 3
	why := "no install record in " + env.StateDir
	if derr != nil {
		why = derr.Error()
	}
	rep.Notes = append(rep.Notes, why+" and no snapshots: removing what is recognizably smarter-compact's (the values it replaced cannot come back)")
	rep.Notes = append(rep.Notes, plan.Notes...)
	return changes, nil
}

// undoDiff is tier 1: what each file of the diff becomes.
func undoDiff(env Env, diff *InstallDiff, rep *AgentReport) ([]fileChange, error) {
	var changes []fileChange
	for _, df := range diff.Files {
		cur, ok, err := readFile(df.Path)
		if err != nil {
			return nil, err
		}
		if !ok {
			if df.Existed {
				rep.Notes = append(rep.Notes, df.Path+" is gone since install: not restored")
			}
			continue
		}
		mode := fileMode(df.Path, 0o600)
		if df.AfterSHA256 != "" && sha256Hex(cur) == df.AfterSHA256 {
			if !df.Existed {
				changes = append(changes, fileChange{df.Path, cur, nil, mode})
				continue
			}
			snap, err := os.ReadFile(snapshotPath(env, diff.Agent, df.Snapshot))
			if err == nil {
				changes = append(changes, fileChange{df.Path, cur, snap, mode})
				continue
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: its snapshot is unreadable (%v): undoing our changes one by one", df.Path, err))
		}
		after, kept, err := revertOps(cur, df.Ops)
		if err != nil {
			var pe *parseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("%s: line %d, column %d: %s; fix the file, then run uninstall again (nothing was changed)", df.Path, pe.Line, pe.Column, pe.Msg)
			}
			return nil, fmt.Errorf("%s: %w (nothing was changed)", df.Path, err)
		}
		for _, k := range kept {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: left %s as it is: it changed since install", df.Path, k))
		}
		if !df.Existed && isEmptyConfig(after, df.Ops) {
			changes = append(changes, fileChange{df.Path, cur, nil, mode})
			continue
		}
		if !bytes.Equal(after, cur) {
			changes = append(changes, fileChange{df.Path, cur, after, mode})
		}
	}
	return changes, nil
}

// restoreSnapshots is tier 2: every file of the agent that has a snapshot gets it back; a
// file install created is removed.
func restoreSnapshots(env Env, a Agent, index snapshotIndex, rep *AgentReport) ([]fileChange, error) {
	var changes []fileChange
	for _, path := range a.Files(env) {
		e, ok := index.find(path)
		if !ok {
			continue
		}
		cur, exists, err := readFile(path)
		if err != nil {
			return nil, err
		}
		mode := fileMode(path, 0o600)
		if !e.Existed {
			if exists {
				rep.Notes = append(rep.Notes, fmt.Sprintf("removing %s, which install created: this discards any change made to it since", path))
				rep.Diff += unifiedDiff(path, cur, nil)
				changes = append(changes, fileChange{path, cur, nil, mode})
			}
			continue
		}
		snap, err := os.ReadFile(snapshotPath(env, a.Name(), e.Snapshot))
		if err != nil {
			return nil, fmt.Errorf("snapshot of %s: %w", path, err)
		}
		if exists && bytes.Equal(cur, snap) {
			continue
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("restoring %s from its snapshot of before install: this overwrites every change made since (the diff shows what goes)", path))
		rep.Diff += unifiedDiff(path, cur, snap)
		changes = append(changes, fileChange{path, cur, snap, mode})
	}
	return changes, nil
}

// revertOps applies the inverse of ops to cur, last op first, each only where the value is
// still the one the op set. It returns the new bytes and the paths left alone.
func revertOps(cur []byte, ops []Op) ([]byte, []string, error) {
	var kept []string
	var jdoc *JSONDoc
	var tdoc *TOMLDoc
	var err error
	for i := len(ops) - 1; i >= 0; i-- {
		op := ops[i]
		switch op.Format {
		case "json":
			if jdoc == nil {
				if jdoc, err = ParseJSONDoc(cur); err != nil {
					return nil, nil, err
				}
			}
			ok, err := revertJSON(jdoc, op)
			if err != nil {
				return nil, nil, err
			}
			if !ok {
				kept = append(kept, op.Path)
			}
		case "toml":
			if tdoc == nil {
				if tdoc, err = ParseTOMLDoc(cur); err != nil {
					return nil, nil, err
				}
			}
			ok, err := revertTOML(tdoc, op)
			if err != nil {
				return nil, nil, err
			}
			if !ok {
				kept = append(kept, op.Path)
			}
		case "file":
			var content string
			if json.Unmarshal(op.New, &content) != nil || content != string(cur) {
				kept = append(kept, "the file")
				continue
			}
			return nil, kept, nil
		default:
			return nil, nil, fmt.Errorf("unknown op format %q in the install record", op.Format)
		}
	}
	switch {
	case jdoc != nil && tdoc != nil:
		return nil, nil, errors.New("the install record mixes JSON and TOML ops for one file")
	case jdoc != nil:
		return jdoc.Bytes(), kept, nil
	case tdoc != nil:
		return tdoc.Bytes(), kept, nil
	}
	return cur, kept, nil
}

// revertJSON undoes one JSON op where the value is still ours. An array element we appended
// is found by value when other elements moved it. A member we added whose object gained
// other members since (a parent we made, like "env") loses only what we put in it, when
// what we put in was a single member.
func revertJSON(doc *JSONDoc, op Op) (bool, error) {
	cur, ok := doc.Get(op.Path)
	if !ok {
		parts, _ := splitPointer(op.Path)
		if len(parts) == 0 || !isIndex(parts[len(parts)-1]) {
			return true, nil // gone already: nothing of ours is left there
		}
	}
	if ok && sameValue(cur, op.New) {
		var err error
		if op.Old == nil {
			_, err = doc.Remove(op.Path)
		} else {
			_, err = doc.Set(op.Path, op.Old)
		}
		return err == nil, err
	}
	if op.Old != nil {
		return false, nil
	}
	parts, err := splitPointer(op.Path)
	if err != nil || len(parts) == 0 {
		return false, err
	}
	parent := joinPointer(parts[:len(parts)-1])
	if raw, ok := doc.Get(parent); ok && strings.HasPrefix(string(raw), "[") {
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) == nil {
			for i, e := range elems {
				if sameValue(e, op.New) {
					_, err := doc.Remove(parent + "/" + strconv.Itoa(i))
					return err == nil, err
				}
			}
		}
		return true, nil // gone already
	}
	var ours map[string]json.RawMessage
	if !ok || json.Unmarshal(op.New, &ours) != nil || len(ours) != 1 || !strings.HasPrefix(string(cur), "{") {
		return false, nil
	}
	for k, v := range ours {
		done, err := revertJSON(doc, Op{Format: "json", Path: op.Path + joinPointer([]string{k}), New: v})
		if err != nil || !done {
			return false, err
		}
	}
	if now, ok := doc.Get(op.Path); ok && string(now) == "{}" {
		_, err := doc.Remove(op.Path)
		return err == nil, err
	}
	return true, nil
}

// revertTOML undoes one TOML op (a top-level key, or a "[table]") where the value is still
// ours: a key compared by value, a table by the values it holds.
func revertTOML(doc *TOMLDoc, op Op) (bool, error) {
	if strings.HasPrefix(op.Path, "[") {
		cur, ok := doc.Table(op.Path)
		if !ok {
			return true, nil // gone already
		}
		var ours string
		if json.Unmarshal(op.New, &ours) != nil || !sameTOML(cur, ours) {
			return false, nil
		}
		var err error
		if op.Old == nil {
			_, err = doc.RemoveTable(op.Path)
		} else {
			var old string
			if err := json.Unmarshal(op.Old, &old); err != nil {
				return false, fmt.Errorf("install record: old text of %s: %w", op.Path, err)
			}
			_, err = doc.SetTable(op.Path, old)
		}
		return err == nil, err
	}
	cur, ok := doc.Key(op.Path)
	if !ok {
		return true, nil // gone already
	}
	if !sameValue(cur, op.New) {
		return false, nil
	}
	var err error
	if op.Old == nil {
		_, err = doc.RemoveKey(op.Path)
	} else {
		_, err = doc.SetKey(op.Path, op.Old)
	}
	return err == nil, err
}

// sameTOML compares two TOML texts by value, falling back to the text with line ends and
// trailing blank lines aside.
func sameTOML(a, b string) bool {
	da, errA := ParseTOMLDoc([]byte(a))
	db, errB := ParseTOMLDoc([]byte(b))
	if errA == nil && errB == nil {
		return reflect.DeepEqual(da.data, db.data)
	}
	norm := func(s string) string { return strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), " \t\n") }
	return norm(a) == norm(b)
}

// isEmptyConfig reports whether b, a file install created, holds nothing of the user's: an
// empty JSON object, or blank TOML.
func isEmptyConfig(b []byte, ops []Op) bool {
	if len(ops) > 0 && ops[0].Format == "json" {
		doc, err := ParseJSONDoc(b)
		if err != nil {
			return false
		}
		v, _ := doc.Get("")
		return string(v) == "{}"
	}
	return len(ops) > 0 && ops[0].Format == "toml" && isBlank(b)
}

// keptOps drops ops that changed nothing (a value that was already ours).
func keptOps(ops []Op) []Op {
	var out []Op
	for _, op := range ops {
		if op.Old != nil && sameValue(op.Old, op.New) {
			continue
		}
		out = append(out, op)
	}
	return out
}

// mergeOps folds the ops of a later install into the recorded ones: an op on a path already
// recorded keeps the recorded Old (the value from before the first install) and takes the
// new New; a JSON op inside a recorded value updates that value (the deepest one, when
// recorded values nest); others are added.
func mergeOps(prev, next []Op) []Op {
	out := slices.Clone(prev)
	for _, op := range next {
		if i := slices.IndexFunc(out, func(o Op) bool { return o.Format == op.Format && o.Path == op.Path }); i >= 0 {
			out[i].New = op.New
			continue
		}
		if op.Format == "json" {
			i := -1 // the deepest recorded value holding op's path
			for j, o := range out {
				if o.Format == "json" && strings.HasPrefix(op.Path, o.Path+"/") && (i < 0 || len(o.Path) > len(out[i].Path)) {
					i = j
				}
			}
			if i >= 0 {
				if doc, err := ParseJSONDoc(out[i].New); err == nil {
					if _, err := doc.Set(strings.TrimPrefix(op.Path, out[i].Path), op.New); err == nil {
						out[i].New, _ = doc.Get("")
						continue
					}
				}
			}
		}
		out = append(out, op)
	}
	return out
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
