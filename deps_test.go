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

// importRules are the one-way edges of DESIGN.md §3, by directory ("" is the module root,
// main.go). A package follows the rule of the longest directory here that holds it (web/ui
// follows web; proxy/fakeupstream has its own). Its non-test files may import the packages
// that follow its own rule (its tree, parent included) and those that follow a rule it lists;
// "*" means every package of the module. Nothing imports cmd (its packages are programs),
// and nothing but main.go and cmd imports app (the composition root); apart from those two,
// test files may import anything.
var importRules = map[string][]string{
	"":                           {"app"},
	"app":                        {"*"},
	"app/e2e":                    {}, // test-only: doc.go imports nothing; its tests may import app
	"app/apptest":                {}, // test-only: a free port and a shared buffer for app's and app/e2e's tests
	"app/tray":                   {"assets", "installer", "store", "store/savings", "web"},
	"cmd":                        {"*"},
	"store":                      {},
	"store/embedding":            {"store"},
	"store/storetest":            {"store"},
	"store/storetest/wine":       {}, // test-only: the wine delete fallback of .ci/test-windows
	"store/savings":              {"store"},
	"proxy":                      {"store"},
	"proxy/config":               {"proxy", "proxy/memory", "store/savings"},
	"proxy/config/configtest":    {}, // the config test helpers of proxy/config and app
	"proxy/fakeupstream":         {"store"},
	"proxy/memory":               {},
	"proxy/memory/fakehindsight": {},
	"mcp":                        {"store", "store/embedding"},
	"mcp/mcptest":                {"store"},
	"web":                        {"store", "store/savings", "assets"},
	"installer":                  {},
	"installer/installertest":    {}, // test-only: the fake systemctl of installer's and app's tests
	"assets":                     {},
}

// thirdPartyRules name the directories (with their trees) whose non-test files may import a
// third-party module, and what to say otherwise (STYLE.md: SQLite is opened one way, in one
// place; chi and templ stay in web).
var thirdPartyRules = []struct {
	module string
	owners []string
	why    string
}{
	{"github.com/mattn/go-sqlite3", []string{"store"}, "only store may use the SQLite driver"},
	{"github.com/go-chi/chi", []string{"web"}, "chi stays in web"},
	{"github.com/a-h/templ", []string{"web"}, "templ stays in web"},
}

// ruleOf returns the key of importRules that dir follows: the longest directory holding it
// ("" holds only the module root itself).
func ruleOf(dir string) (string, bool) {
	best, found := "", false
	for k := range importRules {
		if k == "" {
			found = found || dir == ""
			continue
		}
		if within(dir, k) && len(k) >= len(best) {
			best, found = k, true
		}
	}
	return best, found
}

// within reports whether dir is d or under it.
func within(dir, d string) bool { return dir == d || strings.HasPrefix(dir, d+"/") }

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
		// The subpackage rules: the longest directory's rule wins, and each of these
		// directories has one defect planted beside imports its rule allows.
		"store/storetest/s.go": "// Package storetest helps.\npackage storetest\n\nimport (\n\t_ \"example.com/m/store\"\n\t_ \"example.com/m/web\"\n)\n",
		"store/embedding/e.go": "// Package embedding embeds.\npackage embedding\n\nimport (\n\t_ \"example.com/m/store\"\n\t_ \"example.com/m/proxy\"\n)\n",
		"mcp/m.go":             "// Package mcp serves.\npackage mcp\n\nimport (\n\t_ \"example.com/m/store\"\n\t_ \"example.com/m/store/embedding\"\n\t_ \"example.com/m/store/storetest\"\n\t_ \"github.com/go-chi/chi/v5\"\n)\n",
		"mcp/m_test.go":        "package mcp\n\nimport _ \"example.com/m/store/storetest\"\n",
		"cmd/bench/main.go":    "// Command bench benches.\npackage main\n\nimport _ \"example.com/m/app\"\n",
		"app/run.go":           "package app\n\nimport (\n\t_ \"example.com/m/cmd/bench\"\n\t_ \"github.com/go-chi/chi/v5\"\n)\n",
		"web/web_test.go":      "package web\n\nimport _ \"example.com/m/cmd/bench\"\n",
		"app/tray/tray.go":     "// Package tray shows.\npackage tray\n\nimport (\n\t_ \"example.com/m/assets\"\n\t_ \"example.com/m/installer\"\n\t_ \"example.com/m/store\"\n\t_ \"example.com/m/web\"\n\t_ \"example.com/m/proxy\"\n)\n",
		"app/e2e/doc.go":       "// Package e2e tests.\npackage e2e\n",
		"app/e2e/x_test.go":    "package e2e_test\n\nimport (\n\t_ \"example.com/m/app\"\n\t_ \"github.com/mattn/go-sqlite3\"\n)\n",
		"app/e2e/helper.go":    "package e2e\n\nimport _ \"example.com/m/app\"\n",
		"web/ui/ui.go":         "// Package ui renders.\npackage ui\n\nimport (\n\t_ \"example.com/m/web\"\n\t_ \"github.com/a-h/templ\"\n\t_ \"github.com/go-chi/chi/v5\"\n)\n",
		"installer/i.go":       "// Package installer installs.\npackage installer\n\nimport _ \"github.com/a-h/templ/runtime\"\n",
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
		`app/e2e/helper.go: imports example.com/m/app: app/e2e may import only [] (DESIGN.md §3)`,
		`app/run.go: imports example.com/m/cmd/bench: nothing imports cmd`,
		`app/run.go: imports github.com/go-chi/chi/v5: chi stays in web`,
		`app/tray/tray.go: imports example.com/m/proxy: app/tray may import only [assets installer store store/savings web] (DESIGN.md §3)`,
		`extra: directory is not in importRules (deps_test.go): add it with its allowed imports (DESIGN.md §3)`,
		`installer/i.go: imports github.com/a-h/templ/runtime: templ stays in web`,
		`mcp/m.go: imports example.com/m/store/storetest: mcp may import only [store store/embedding] (DESIGN.md §3)`,
		`mcp/m.go: imports github.com/go-chi/chi/v5: chi stays in web`,
		`packaging/gen.go: packaging holds no Go code (DESIGN.md §3)`,
		`proxy/fakeupstream/f.go: imports example.com/m/proxy: proxy/fakeupstream may import only [store] (DESIGN.md §3)`,
		`proxy/proxy.go: imports github.com/mattn/go-sqlite3: only store may use the SQLite driver`,
		`proxy/x_test.go: imports example.com/m/app: nothing imports app`,
		`proxy: no package doc comment ("// Package proxy …") in a non-test file`,
		`store/embedding/e.go: imports example.com/m/proxy: store/embedding may import only [store] (DESIGN.md §3)`,
		`store/store.go: imports example.com/m/proxy: store may import only [] (DESIGN.md §3)`,
		`store/storetest/s.go: imports example.com/m/web: store/storetest may import only [store] (DESIGN.md §3)`,
		`web/web_test.go: imports example.com/m/cmd/bench: nothing imports cmd`,
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
		rule, known := ruleOf(dir)
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
			if p := importProblem(module, dir, rule, ip, isTest); p != "" {
				problems = append(problems, rel+": imports "+ip+": "+p)
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

// importProblem returns what is wrong with a file in dir, which follows rule, importing ip
// ("" when nothing is).
func importProblem(module, dir, rule, ip string, isTest bool) string {
	if !isTest {
		for _, r := range thirdPartyRules {
			if within(ip, r.module) && !slices.ContainsFunc(r.owners, func(o string) bool { return within(dir, o) }) {
				return r.why
			}
		}
	}
	if !within(ip, module) {
		return ""
	}
	target := strings.TrimPrefix(strings.TrimPrefix(ip, module), "/")
	top, _, _ := strings.Cut(dir, "/")
	targetTop, _, _ := strings.Cut(target, "/")
	targetRule, _ := ruleOf(target)
	allowed := importRules[rule]
	switch {
	// main.go calls app.Main, and so do the programs under cmd (the bench runs it in a child).
	case targetTop == "app" && top != "app" && top != "cmd" && (isTest || dir != ""):
		return "nothing imports app"
	case targetTop == "cmd" && top != "cmd":
		return "nothing imports cmd"
	case isTest || targetRule == rule || slices.Contains(allowed, "*") || slices.Contains(allowed, targetRule):
		return ""
	}
	return fmt.Sprintf("%s may import only %v (DESIGN.md §3)", rule, allowed)
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
