package store

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
)

func sessionNames(t *testing.T, r *Root) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(r.Dir(), "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func TestRegistration(t *testing.T) {
	r := newRoot(t)
	if reg, err := r.Registration("s1"); reg != nil || err != nil {
		t.Fatalf("absent registration = %v, %v; want nil, nil", reg, err)
	}
	in := Registration{SessionID: "s1", Agent: "claude-code", Cwd: "/home/u/<proj>", Bank: "b"}
	if err := r.Register(in); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(r.Dir(), "sessions", "s1.json")
	if p := perm(t, path); wrongMode(t, p, 0o600) {
		t.Errorf("mode %o, want 600", p)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not JSON: %s", raw)
	}
	if m["session_id"] != "s1" || m["agent"] != "claude-code" || m["cwd"] != "/home/u/<proj>" || m["bank"] != "b" {
		t.Errorf("file content %s", raw)
	}
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`).MatchString(m["registered_at"]) {
		t.Errorf("registered_at %q is not ISO 8601 UTC without fractions", m["registered_at"])
	}
	got, err := r.Registration("s1")
	if err != nil || got == nil || got.Cwd != in.Cwd || got.RegisteredAt != m["registered_at"] {
		t.Errorf("Registration = %+v, %v", got, err)
	}
	// A registration written by a hook (another writer) reads back.
	if err := os.WriteFile(filepath.Join(r.Dir(), "sessions", "s2.json"),
		[]byte(`{"session_id":"s2","agent":"opencode","cwd":"/w","bank":null,"registered_at":"2026-10-29T17:00:00Z","extra":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Registration("s2"); err != nil || got.Agent != "opencode" || got.Bank != "" || got.RegisteredAt != "2026-10-29T17:00:00Z" {
		t.Errorf("hook registration = %+v, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(r.Dir(), "sessions", "s3.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Registration("s3"); err == nil {
		t.Error("a broken registration parsed")
	}
	if err := r.Register(Registration{SessionID: "a/b"}); err == nil {
		t.Error("Register accepted an unsanitized id")
	}
	if got, want := sessionNames(t, r), []string{"s1.json", "s2.json", "s3.json"}; !equalStrings(got, want) {
		t.Errorf("sessions/ holds %v, want %v (no temp files)", got, want)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestForceFlag(t *testing.T) {
	r := newRoot(t)
	if r.Force("s") {
		t.Fatal("flag set before SetForce")
	}
	if err := r.SetForce("s"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(r.Dir(), "sessions", "s.force")
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != 0 || wrongMode(t, fi.Mode().Perm(), 0o600) {
		t.Fatalf("flag file: %v %v", fi, err)
	}
	if !r.Force("s") || r.Force("other") {
		t.Error("Force does not follow the flag file")
	}
	if err := r.ClearForce("s"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("flag still there: %v", err)
	}
	if err := r.ClearForce("s"); err != nil {
		t.Errorf("clearing a missing flag: %v", err)
	}
	// The hook writes the flag; the proxy sees it.
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !r.Force("s") {
		t.Error("hook-written flag not seen")
	}
	if r.Force("../s") || r.SetForce("a/b") == nil || r.ClearForce("") == nil {
		t.Error("unsanitized ids accepted")
	}
}

func TestTrimState(t *testing.T) {
	r := newRoot(t)
	if b, err := r.LoadTrimState("s"); b != nil || err != nil {
		t.Fatalf("absent = %q, %v", b, err)
	}
	for _, v := range []string{`{"cut":"abc"}`, `{"cut":"def","gap":[1,2]}`} {
		if err := r.SaveTrimState("s", []byte(v)); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(r.Dir(), "sessions", "s.trim.json"))
		if err != nil || string(raw) != v {
			t.Errorf("file = %q, %v; want %q", raw, err, v)
		}
		if b, err := r.LoadTrimState("s"); err != nil || string(b) != v {
			t.Errorf("LoadTrimState = %q, %v", b, err)
		}
	}
	if p := perm(t, filepath.Join(r.Dir(), "sessions", "s.trim.json")); wrongMode(t, p, 0o600) {
		t.Errorf("mode %o", p)
	}
	if got := sessionNames(t, r); !equalStrings(got, []string{"s.trim.json"}) {
		t.Errorf("sessions/ holds %v (temp files left?)", got)
	}
	if _, err := r.LoadTrimState("x/y"); err == nil {
		t.Error("LoadTrimState accepted an unsanitized id")
	}
	if err := r.SaveTrimState("..\\x", nil); err == nil {
		t.Error("SaveTrimState accepted an unsanitized id")
	}
}
