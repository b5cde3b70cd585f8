// Command smarter-compact is a per-user service that keeps coding-agent sessions inside the
// model's context window (README.md). Everything lives in package app; this file only maps
// signals to a context and the error to an exit code, sets the collector's pace, and gives
// its main goroutine to app.MainThread, which keeps it for the tray.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/smarter-compact/smarter-compact/app"
)

// gcPercent is the Go collector's GOGC unless the environment sets GOGC. A desktop service
// that runs all day should keep its footprint small: at the default of 100 the heap grows to
// twice what is live before a collection. Chosen by measurement (docs/decisions.md, issue 18:
// GOGC 50/100/200, each with and without a 64 MiB soft limit, at 8 and 32 concurrent 120k
// sessions): at 32 sessions serve's peak RSS was 137 MB at 50, 212 at 100 and 304 at 200, the
// throughput the same within the noise. 25 was measured later (with the body budget, two runs
// of each alternated): the peak fell from 95 to 86 MB, but serve's CPU per warm 120k request
// rose from 6.0–7.1 to 8.2–8.8 ms and its p50 latency by 3–4 ms, so 50 stays. No soft memory limit is set (debug.SetMemoryLimit):
// one of 64 MiB held the peak near 100 MB, but 32 sessions' live heap is close to it and the
// collector then ran almost all the time (serve's CPU about 1.8×, throughput at 32 sessions
// a quarter to a third of what it was); GOMEMLIMIT in the environment still sets one.
const gcPercent = 50

// init locks the main goroutine to the process's main thread, for main to hand to the tray
// (app.MainThread): macOS's AppKit runs its loop there only. fyne.io/systray's darwin init
// does the same; this makes it hold on every OS and whatever the imports.
func init() { runtime.LockOSThread() }

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go app.EndAfterSignal(ctx, stop, done, app.SignalGrace(), os.Exit, os.Stderr)
	err := app.MainThread(ctx, os.Args[1:])
	close(done)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "smarter-compact:", err)
		os.Exit(app.ExitCode(err))
	}
}
