package installer

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// revertOps applies the inverse of ops to cur, last op first, each only where the value is
// still the one the op set. It returns the new bytes and the paths left alone.
func revertOps(cur []byte, ops []Op) ([]byte, []string, error) {
	var kept []string
	var jdoc *JSONDoc
	var tdoc *TOMLDoc
	var err error
	for i := len(ops) - 1; i >= 0; i-- {
		op := ops[i]
		var reverted bool
		switch op.Format {
		case "json":
			if jdoc == nil {
				if jdoc, err = ParseJSONDoc(cur); err != nil {
					return nil, nil, err
				}
			}
			reverted, err = revertJSON(jdoc, op)
		case "toml":
			if tdoc == nil {
				if tdoc, err = ParseTOMLDoc(cur); err != nil {
					return nil, nil, err
				}
			}
			reverted, err = revertTOML(tdoc, op)
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
		if err != nil {
			return nil, nil, err
		}
		if !reverted {
			kept = append(kept, op.Path)
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
		return putBack(op, doc.Remove, doc.Set)
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
		return removeAppended(doc, parent, raw, op.New)
	}
	if !ok {
		return false, nil
	}
	return revertMember(doc, op, cur)
}

// removeAppended removes from the array raw at pointer parent the first element equal to
// ours, an element we appended that other elements may have moved; it is done when none
// is left. A step of its own because an array element is found by value, not by its index.
func removeAppended(doc *JSONDoc, parent string, raw, ours json.RawMessage) (bool, error) {
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) == nil {
		for i, e := range elems {
			if sameValue(e, ours) {
				_, err := doc.Remove(parent + "/" + strconv.Itoa(i))
				return err == nil, err
			}
		}
	}
	return true, nil // gone already
}

// revertMember undoes op, a member we added whose value cur (an object) gained other
// members since: when op.New is an object of one member, that member is reverted on its own
// and the object removed once it is empty. A step of its own because it recurses into
// revertJSON for the member.
func revertMember(doc *JSONDoc, op Op, cur json.RawMessage) (bool, error) {
	var ours map[string]json.RawMessage
	if json.Unmarshal(op.New, &ours) != nil || len(ours) != 1 || !strings.HasPrefix(string(cur), "{") {
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
	return putBack(op, doc.RemoveKey, doc.SetKey)
}

// putBack undoes op at op.Path, whose value is still ours: it sets op.Old again, or removes
// the path when op added it. It is done when the edit succeeded.
func putBack(op Op, remove func(string) (Op, error), set func(string, json.RawMessage) (Op, error)) (bool, error) {
	var err error
	if op.Old == nil {
		_, err = remove(op.Path)
	} else {
		_, err = set(op.Path, op.Old)
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
