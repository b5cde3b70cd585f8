// Command smarter-compact is a per-user service that keeps coding-agent sessions inside the
// model's context window (README.md). Everything lives in package app; this file only maps
// signals to a context and the error to an exit code, and sets the soft memory limit.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/smarter-compact/smarter-compact/app"
)

// softMemoryLimit is the Go runtime's soft memory limit for this process unless GOMEMLIMIT
// is set (then the environment wins; GOMEMLIMIT=off turns it off). The Go heap would
// otherwise grow to twice what is live before a collection (GOGC=100): with 32 agents'
// 120k-token sessions at once that was about 90 MB of garbage on top (docs/benchmarks.md).
// It is soft: a live heap above it still runs, with the collector working harder (at most
// half the CPU, by the runtime's own cap).
const softMemoryLimit = 96 << 20

func main() {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(softMemoryLimit)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := app.Main(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "smarter-compact:", err)
		os.Exit(app.ExitCode(err))
	}
}
