package main_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// importRules are the one-way edges of DESIGN.md §3, by top-level directory ("" is the
// module root, main.go). A package may always import its own subpackages and parent.
// "*" means every package of the module.
var importRules = map[string][]string{
	"":          {"app"},
	"app":       {"*"},
	"cmd":       {"*"}, // harnesses that drive the product (the bench); nothing imports cmd
	"store":     {},
	"proxy":     {"store"},
	"mcp":       {"store"},
	"web":       {"store", "assets"},
	"installer": {},
	"assets":    {},
}

// driverOwner is the only package whose non-test files may import the SQLite driver
// (STYLE.md: SQLite is opened one way, in one place).
const (
	sqliteDriver = "github.com/mattn/go-sqlite3"
	driverOwner  = "store"
)

// TestDeps enforces the package graph and the package doc comments (STYLE.md practice 2).
func TestDeps(t *testing.T) {
	module, err := modulePath("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	problems, err := checkTree(".", module)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestDepsCatches runs the checker on a small tree with one of each defect, so that
// TestDeps passing means something.
func TestDepsCatches(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]string{
		"main.go":                 "// Command x.\npackage main\n\nimport _ \"example.com/m/app\"\n",
		"app/app.go":              "// Package app wires.\npackage app\n\nimport (\n\t_ \"example.com/m/proxy\"\n\t_ \"example.com/m/web\"\n)\n",
		"store/store.go":          "// Package store stores.\npackage store\n\nimport _ \"example.com/m/proxy\"\n",
		"store/store_test.go":     "package store\n\nimport _ \"example.com/m/proxy/fakeupstream\"\n",
		"proxy/proxy.go":          "package proxy\n\nimport (\n\t_ \"example.com/m/store\"\n\t_ \"github.com/mattn/go-sqlite3\"\n)\n",
		"proxy/x_test.go":         "package proxy_test\n\nimport _ \"example.com/m/app\"\n",
		"proxy/fakeupstream/f.go": "// Package fakeupstream fakes.\npackage fakeupstream\n\nimport _ \"example.com/m/proxy\"\n",
		"web/web.go":              "// web serves.\npackage web\n",
		"extra/extra.go":          "// Package extra is new.\npackage extra\n",
		"packaging/gen.go":        "// Package packaging has no Go.\npackage packaging\n",
		"store/testdata/bad.go":   "package bad\n\nimport _ \"example.com/m/app\"\n",
	}
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := checkTree(root, "example.com/m")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`extra: directory is not in importRules (deps_test.go): add it with its allowed imports (DESIGN.md §3)`,
		`packaging/gen.go: packaging holds no Go code (DESIGN.md §3)`,
		`proxy/proxy.go: imports github.com/mattn/go-sqlite3: only store may use the SQLite driver`,
		`proxy/x_test.go: imports example.com/m/app: nothing imports app`,
		`proxy: no package doc comment ("// Package proxy …") in a non-test file`,
		`store/store.go: imports example.com/m/proxy: store may import only [] (DESIGN.md §3)`,
		`web: no package doc comment ("// Package web …") in a non-test file`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// checkTree returns the rule violations under root, sorted.
func checkTree(root, module string) ([]string, error) {
	var problems []string
	type pkgDoc struct {
		name   string
		hasDoc bool
	}
	docs := map[string]*pkgDoc{} // directory -> its non-test package
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		dir := path.Dir(rel)
		if dir == "." {
			dir = ""
		}
		top, _, _ := strings.Cut(dir, "/")
		if top == "packaging" {
			problems = append(problems, rel+": packaging holds no Go code (DESIGN.md §3)")
			return nil
		}
		allowed, known := importRules[top]
		if !known {
			if _, seen := docs[dir]; !seen {
				problems = append(problems, dir+": directory is not in importRules (deps_test.go): add it with its allowed imports (DESIGN.md §3)")
				docs[dir] = &pkgDoc{hasDoc: true}
			}
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		isTest := strings.HasSuffix(rel, "_test.go")
		if !isTest {
			pd := docs[dir]
			if pd == nil {
				pd = &pkgDoc{name: f.Name.Name}
				docs[dir] = pd
			}
			pd.hasDoc = pd.hasDoc || hasPackageDoc(f)
		}
		for _, imp := range f.Imports {
			ip, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if ip == sqliteDriver && !isTest && top != driverOwner {
				problems = append(problems, fmt.Sprintf("%s: imports %s: only %s may use the SQLite driver", rel, ip, driverOwner))
			}
			if ip != module && !strings.HasPrefix(ip, module+"/") {
				continue
			}
			target, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(ip, module), "/"), "/")
			switch {
			case target == "app" && top != "app" && top != "cmd" && (isTest || top != ""):
				problems = append(problems, fmt.Sprintf("%s: imports %s: nothing imports app", rel, ip))
			case isTest || target == top || slices.Contains(allowed, "*") || slices.Contains(allowed, target):
			default:
				problems = append(problems, fmt.Sprintf("%s: imports %s: %s may import only %v (DESIGN.md §3)", rel, ip, top, allowed))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for dir, pd := range docs {
		if !pd.hasDoc {
			want, name := "// Package "+pd.name+" …", dir
			if pd.name == "main" {
				want = "// Command …"
			}
			if name == "" {
				name = "."
			}
			problems = append(problems, fmt.Sprintf("%s: no package doc comment (%q) in a non-test file", name, want))
		}
	}
	slices.Sort(problems)
	return problems, nil
}

// hasPackageDoc reports whether f has the conventional doc comment: "Package <name> …", or
// "Command <name> …" for a main package.
func hasPackageDoc(f *ast.File) bool {
	if f.Doc == nil {
		return false
	}
	text := f.Doc.Text()
	if f.Name.Name == "main" {
		return strings.HasPrefix(text, "Command ")
	}
	return strings.HasPrefix(text, "Package "+f.Name.Name+" ")
}

func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}
