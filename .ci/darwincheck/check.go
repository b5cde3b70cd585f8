package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Result is one package of the product checked for one architecture.
type Result struct {
	Arch string // "arm64" or "amd64"
	Path string // import path
	// Files counts the Go files checked: the package's, its in-package tests' and its
	// external tests' (0: nothing in the package builds for darwin).
	Files int
	// Errors are the type errors, "file:line:col: message" with file relative to the root.
	Errors []string
	// Dropped counts the errors about values from C (cgoNoise) that were left out.
	Dropped int
}

// Line is the one-line summary Check's caller prints.
func (r Result) Line() string {
	switch {
	case len(r.Errors) > 0:
		return fmt.Sprintf("darwin/%s FAIL %s: %d error(s)", r.Arch, r.Path, len(r.Errors))
	case r.Files == 0:
		return fmt.Sprintf("darwin/%s ok   %s (no files for darwin)", r.Arch, r.Path)
	}
	return fmt.Sprintf("darwin/%s ok   %s (%d files, %d C-value errors dropped)", r.Arch, r.Path, r.Files, r.Dropped)
}

// Check type-checks every package under root (the directory holding the product's go.mod)
// for darwin/arch with cgo and tags, function bodies, in-package and external test files
// included. only, when non-nil, limits the packages reported to those whose import path it
// accepts (their dependencies are still checked as needed). The error is for a tree that
// cannot be read (no go.mod, unparsable file, a package go/build cannot load); type errors
// are in the Results, sorted by import path.
func Check(root, arch string, tags []string, only func(importPath string) bool) ([]Result, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return nil, fmt.Errorf("%s is not a module root (no go.mod): pass the product's root", root)
	}
	ctx := build.Default
	ctx.GOOS, ctx.GOARCH, ctx.CgoEnabled = "darwin", arch, true
	ctx.BuildTags = slices.DeleteFunc(slices.Clone(tags), func(s string) bool { return s == "" })
	ctx.Dir = root
	sizes := types.SizesFor("gc", arch)
	if sizes == nil {
		return nil, fmt.Errorf("unknown architecture %q", arch)
	}
	im := &importer{ctx: &ctx, fset: token.NewFileSet(), sizes: sizes, cache: map[string]*types.Package{}, cgo: map[string]bool{}}
	module, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	if im.dirs, err = listDirs(&ctx); err != nil {
		return nil, err
	}

	dirs, err := packageDirs(root)
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, dir := range dirs {
		bp, err := ctx.ImportDir(dir, 0)
		var noGo *build.NoGoError
		switch {
		case errors.As(err, &noGo):
			// Every file is excluded for darwin (or only tests exist): report it all the same.
			if bp == nil || bp.ImportPath == "" || bp.ImportPath == "." {
				continue
			}
		case err != nil:
			return nil, fmt.Errorf("load %s for darwin/%s: %w", rel(root, dir), arch, err)
		}
		bp.ImportPath = module
		if r := rel(root, dir); r != "." {
			bp.ImportPath += "/" + filepath.ToSlash(r)
		}
		if only != nil && !only(bp.ImportPath) {
			continue
		}
		r := Result{Arch: arch, Path: bp.ImportPath}
		check := func(path string, names []string, imp types.Importer) *types.Package {
			files, err := im.parse(dir, names)
			if err != nil {
				r.Errors = append(r.Errors, err.Error())
				return nil
			}
			r.Files += len(names)
			conf := types.Config{
				Importer:    imp,
				FakeImportC: true,
				Sizes:       sizes,
				Error: func(err error) {
					te, ok := err.(types.Error)
					if ok && im.cgoNoise(te) {
						r.Dropped++
						return
					}
					msg := err.Error()
					if ok {
						p := te.Fset.Position(te.Pos)
						msg = fmt.Sprintf("%s:%d:%d: %s", rel(root, p.Filename), p.Line, p.Column, te.Msg)
					}
					r.Errors = append(r.Errors, msg)
				},
			}
			pkg, _ := conf.Check(path, im.fset, files, nil)
			return pkg
		}
		plain := slices.Concat(bp.GoFiles, bp.CgoFiles)
		var self *types.Package
		if len(plain) > 0 {
			self = check(bp.ImportPath, plain, im)
		}
		if len(bp.TestGoFiles) > 0 {
			// The package with its in-package tests: what the external tests import.
			self = check(bp.ImportPath, slices.Concat(plain, bp.TestGoFiles), im)
		}
		if len(bp.XTestGoFiles) > 0 {
			check(bp.ImportPath+"_test", bp.XTestGoFiles, im.with(dir, self))
		}
		r.Files = len(plain) + len(bp.TestGoFiles) + len(bp.XTestGoFiles)
		r.Errors = dedupe(r.Errors)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Result) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// cgoNoise reports a type error that only says a value came from C: with FakeImportC,
// C.anything has an invalid type, so a package's `const X = C.X` (go-sqlite3's
// SQLITE_LIMIT_*) has one too, and go/types reports where the product uses it. Dropped:
// an error about an operand "with invalid type" that names C.<x> or <pkg>.<x> for a
// package that has cgo files. Everything else counts, so an undefined name, a wrong
// argument count or a wrong type in a darwin-only file still fails.
func (im *importer) cgoNoise(e types.Error) bool {
	if !strings.Contains(e.Msg, "invalid type") {
		return false
	}
	if strings.Contains(e.Msg, "C.") {
		return true
	}
	for name := range im.cgo {
		if strings.Contains(e.Msg, name+".") {
			return true
		}
	}
	return false
}

// modulePath is the module line of root/go.mod.
func modulePath(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.Trim(strings.TrimSpace(v), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", filepath.Join(root, "go.mod"))
}

// listDirs asks the go command once (go list -deps -test, for darwin with cgo) where every
// non-standard package the product and its tests reach lives, so that the importer does
// not start `go list` once per import (go/build's module lookup). Paths it does not list
// (an import a planted file adds) still resolve through go/build.
func listDirs(ctx *build.Context) (map[string]string, error) {
	cmd := exec.Command("go", "list", "-e", "-deps", "-test", "-tags", strings.Join(ctx.BuildTags, ","),
		"-f", "{{if not .Standard}}{{.ImportPath}}\t{{.Dir}}{{end}}", "./...")
	cmd.Dir = ctx.Dir
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH="+ctx.GOARCH, "CGO_ENABLED=1", "GOFLAGS=-mod=readonly")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list for darwin/%s in %s: %w", ctx.GOARCH, ctx.Dir, err)
	}
	dirs := map[string]string{}
	for l := range strings.Lines(string(out)) {
		path, dir, ok := strings.Cut(strings.TrimSpace(l), "\t")
		if ok && dir != "" && !strings.Contains(path, " ") {
			dirs[path] = dir
		}
	}
	return dirs, nil
}

// packageDirs lists the directories under root that hold .go files, skipping what the go
// command skips (names starting with '.' or '_', testdata) and vendor, node_modules and
// nested modules.
func packageDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root {
				if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" || name == "node_modules" {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !slices.Contains(dirs, filepath.Dir(p)) {
			dirs = append(dirs, filepath.Dir(p))
		}
		return nil
	})
	slices.Sort(dirs)
	return dirs, err
}

// importer type-checks imported packages from source for the darwin context, once per
// directory, without function bodies; their errors are not reported (only what the
// product's code uses of them matters, and that shows up in the product's errors).
type importer struct {
	ctx   *build.Context
	fset  *token.FileSet
	sizes types.Sizes
	cache map[string]*types.Package // by directory
	dirs  map[string]string         // import path to directory, from listDirs
	cgo   map[string]bool           // names of the imported packages that have cgo files
}

func (im *importer) Import(path string) (*types.Package, error) {
	return im.ImportFrom(path, im.ctx.Dir, 0)
}

func (im *importer) ImportFrom(path, dir string, _ types.ImportMode) (*types.Package, error) {
	if path == "unsafe" {
		return types.Unsafe, nil
	}
	var bp *build.Package
	var err error
	if d, ok := im.dirs[path]; ok {
		bp, err = im.ctx.ImportDir(d, 0)
		if bp != nil {
			bp.ImportPath = path
		}
	} else {
		bp, err = im.ctx.Import(path, dir, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("darwin/%s: %w", im.ctx.GOARCH, err)
	}
	if len(bp.CgoFiles) > 0 {
		im.cgo[bp.Name] = true
	}
	if p, ok := im.cache[bp.Dir]; ok {
		if p == nil {
			return nil, fmt.Errorf("import cycle through %s", bp.ImportPath)
		}
		return p, nil
	}
	im.cache[bp.Dir] = nil
	files, err := im.parse(bp.Dir, slices.Concat(bp.GoFiles, bp.CgoFiles))
	if err != nil {
		return nil, err
	}
	conf := types.Config{
		Importer:         im,
		FakeImportC:      true,
		IgnoreFuncBodies: true,
		Sizes:            im.sizes,
		Error:            func(error) {},
	}
	pkg, _ := conf.Check(bp.ImportPath, im.fset, files, nil)
	im.cache[bp.Dir] = pkg
	return pkg, nil
}

func (im *importer) parse(dir string, names []string) ([]*ast.File, error) {
	files := make([]*ast.File, 0, len(names))
	for _, n := range names {
		f, err := parser.ParseFile(im.fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// with is the importer as the external tests of the package in dir see it, as the go
// command builds them: that package is self (with its in-package tests), and every package
// that imports it, directly or not, is checked again against self, so that its types are
// self's (storetest's store.SessionSearch is the one store_test uses).
func (im *importer) with(dir string, self *types.Package) *importer {
	c := *im
	c.cache = map[string]*types.Package{}
	if self == nil {
		return &c
	}
	memo := map[*types.Package]bool{}
	var reaches func(p *types.Package) bool
	reaches = func(p *types.Package) bool {
		if v, ok := memo[p]; ok {
			return v
		}
		memo[p] = false
		v := p.Path() == self.Path()
		for _, q := range p.Imports() {
			v = v || reaches(q)
		}
		memo[p] = v
		return v
	}
	for d, p := range im.cache {
		if p != nil && !reaches(p) {
			c.cache[d] = p
		}
	}
	c.cache[dir] = self
	return &c
}

func rel(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	return slices.DeleteFunc(s, func(x string) bool {
		if seen[x] {
			return true
		}
		seen[x] = true
		return false
	})
}
