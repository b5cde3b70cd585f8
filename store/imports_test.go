package store

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestImportsNothingOfOurs keeps the package a leaf (DESIGN.md §3): no import of this module.
func TestImportsNothingOfOurs(t *testing.T) {
	const module = "github.com/smarter-compact/smarter-compact"
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := 0
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files++
		if f.Name.Name == "store_test" {
			continue // external tests are another package: they import store and store/storetest
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == module || strings.HasPrefix(path, module+"/") {
				t.Errorf("%s imports %s", name, path)
			}
		}
		if name == "doc.go" && (f.Doc == nil || !strings.HasPrefix(f.Doc.Text(), "Package store ")) {
			t.Error("doc.go has no package doc comment")
		}
	}
	if files == 0 {
		t.Fatal("no Go files found")
	}
}
