// The darwin type-check (issue 14): its own module, so the product's go.mod and its import
// graph test (deps_test.go) stay untouched. Standard library only. Run from the repository
// root: (cd .ci/darwincheck && go run . ../..), or bash .ci/check-darwin.
module github.com/smarter-compact/smarter-compact/ci/darwincheck

go 1.26.8
