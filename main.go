// Command smarter-compact is a per-user service that keeps coding-agent sessions inside the
// model's context window (README.md). Everything lives in package app; this file only maps
// signals to a context and the error to an exit code.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/smarter-compact/smarter-compact/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := app.Main(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "smarter-compact:", err)
		os.Exit(app.ExitCode(err))
	}
}
