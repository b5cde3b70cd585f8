package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPlantedDarwinErrors copies the product into a temporary directory, plants two
// mistakes that only a darwin build sees (an undefined constant in installer's
// service_darwin.go, and a darwin-only file in app/tray calling systray.SetTemplateIcon
// with one argument instead of two), and checks that Check reports both, where they are,
// and nothing else for those packages. Neither file is compiled by a Linux build or vet.
func TestPlantedDarwinErrors(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "installer", "service_darwin.go")); err != nil {
		t.Fatalf("the product tree is not at %s: %v", root, err)
	}
	tree := t.TempDir()
	copyTree(t, root, tree)

	appendFile(t, filepath.Join(tree, "installer", "service_darwin.go"), "\nvar _ = launchdPlantedConstant\n")
	if err := os.WriteFile(filepath.Join(tree, "app", "tray", "planted_darwin.go"), []byte(`//go:build darwin

package tray

import "fyne.io/systray"

func planted() { systray.SetTemplateIcon([]byte{}) }
`), 0o600); err != nil {
		t.Fatal(err)
	}

	const module = "github.com/smarter-compact/smarter-compact"
	only := func(p string) bool { return p == module+"/installer" || p == module+"/app/tray" }
	res, err := Check(tree, "arm64", []string{"sqlite_fts5", "e2e"}, only)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res {
		t.Log(r.Line())
		for _, e := range r.Errors {
			t.Log("\t" + e)
			got = append(got, e)
		}
	}
	if len(res) != 2 {
		t.Fatalf("checked %d packages, want installer and app/tray", len(res))
	}
	want := []struct{ file, msg string }{
		{filepath.Join("installer", "service_darwin.go"), "undefined: launchdPlantedConstant"},
		{filepath.Join("app", "tray", "planted_darwin.go"), "not enough arguments in call to systray.SetTemplateIcon"},
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, w.file+":") && strings.Contains(e, w.msg) }) {
			t.Errorf("the planted error %q in %s was not reported; got %q", w.msg, w.file, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d errors, want exactly the %d planted ones: %q", len(got), len(want), got)
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the regular files of the product (not .git, build output or caches).
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(from, p)
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".cache", "bin", "dist", "node_modules":
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(to, r), 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, r), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}
