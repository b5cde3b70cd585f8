package installer

import (
	"bytes"
	"errors"
	"fmt"
	"os"
)

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

// uninstall is Uninstall for one agent (see Uninstall for the tiers).
func uninstall(env Env, a Agent, dryRun bool) AgentReport {
	name := a.Name()
	rep := AgentReport{Agent: name}
	if env.StateDir == "" {
		rep.Err = errors.New("uninstall: no state directory to read the install diff from")
		return rep
	}
	changes, final, err := planUndo(env, a, name, &rep)
	if final {
		return rep
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
	if err := applyChanges(changes); err != nil {
		rep.Err = err
		return rep
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

// planUndo picks the tier for agent a (named name), setting rep.Tier and its notes, and
// returns the changes that tier makes. final is true when there is nothing to undo: rep
// then says why (Err or Skipped) and is done. A step of its own because it is the one
// place the tiers are chosen; writing the changes is the same for all of them.
func planUndo(env Env, a Agent, name string, rep *AgentReport) (changes []fileChange, final bool, err error) {
	diff, derr := readDiff(env, name)
	if diff != nil {
		rep.Tier = 1
		changes, err = undoDiff(env, diff, rep)
		return changes, false, err
	}
	index, err := readIndex(env, name)
	if err == nil && len(index.Files) == 0 {
		// Tier 3: nothing recorded, so remove what is recognizably ours.
		if u, ok := a.(Unwirer); ok {
			changes, err = unwire(env, u, derr, rep)
		}
		if err == nil && len(changes) == 0 {
			if derr != nil {
				rep.Err = fmt.Errorf("%v, and there are no snapshots: check the agent's files by hand", derr)
			} else {
				rep.Skipped = "nothing to undo: no install record in " + env.StateDir + ", and nothing of ours in the agent's files"
			}
			return nil, true, nil
		}
	} else if err == nil {
		rep.Tier = 2
		if derr != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%v: restoring the snapshots instead", derr))
		} else {
			rep.Notes = append(rep.Notes, "no install record in "+env.StateDir+": restoring the snapshots instead")
		}
		changes, err = restoreSnapshots(env, a, index, rep)
	}
	return changes, false, err
}

// applyChanges writes (or, for after nil, removes) each changed file in order. When one
// fails it puts back the ones already written and returns the error saying so. A step of
// its own because it is all-or-nothing: the install record is removed only after it.
func applyChanges(changes []fileChange) error {
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
			return fmt.Errorf("%w (the agent's files were put back as they were; the install record is kept)", err)
		}
	}
	return nil
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
