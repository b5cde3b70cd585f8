// Command darwincheck type-checks every package of the product for macOS (darwin/arm64 and
// darwin/amd64) with cgo on, function bodies included, on a host that has no macOS SDK.
//
// go/build selects each package's files as the darwin build would (GOOS=darwin,
// CgoEnabled=true, the product's build tags), and go/types checks them from source with
// FakeImportC: `import "C"` becomes an empty package, so only the errors about values that
// come from C are dropped (see cgoNoise); every other error fails the check. Dependencies
// (the standard library and modules) are type-checked from source the same way, with
// their errors ignored beyond what the product's packages need.
//
// Usage: darwincheck [-arch arm64,amd64] [-tags sqlite_fts5,e2e] [root]
//
// root is the product's module root (default "."). It prints one line per package and
// architecture and exits 1 on any error, 2 on bad usage or a tree it cannot read. It
// imports nothing but the standard library and is its own module (.ci/darwincheck); no
// other code imports it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	archs := flag.String("arch", "arm64,amd64", "darwin architectures, comma-separated")
	tags := flag.String("tags", "sqlite_fts5,e2e", "build tags, comma-separated (e2e: the end-to-end test files too)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: darwincheck [-arch arm64,amd64] [-tags sqlite_fts5,e2e] [module root]")
		flag.PrintDefaults()
	}
	flag.Parse()
	root := "."
	switch flag.NArg() {
	case 0:
	case 1:
		root = flag.Arg(0)
	default:
		flag.Usage()
		os.Exit(2)
	}
	failed := false
	for _, arch := range strings.Split(*archs, ",") {
		res, err := Check(root, arch, strings.Split(*tags, ","), nil)
		if err != nil {
			fmt.Fprintf(os.Stderr, "darwincheck: %v\n", err)
			os.Exit(2)
		}
		for _, p := range res {
			fmt.Println(p.Line())
			for _, e := range p.Errors {
				fmt.Println("\t" + e)
			}
			if len(p.Errors) > 0 {
				failed = true
			}
		}
	}
	if failed {
		fmt.Fprintln(os.Stderr, "darwincheck: type errors for darwin (above): fix them, or a Mac build fails")
		os.Exit(1)
	}
}
