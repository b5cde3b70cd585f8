package app

import (
	"context"
	"fmt"
	"io"
	"time"
)

// signalGrace is how long a command may take to return after SIGTERM or Ctrl-C: serve's
// shutdownGrace for open requests, plus the store's close.
const signalGrace = shutdownGrace + 5*time.Second

// EndAfterSignal makes a termination signal always end the process, whatever the command is
// blocked on (a config read, a store open, a hung tray). Once ctx is done (the signal
// context of main), it calls stop, so that a second signal gets the default action and
// ends the process at once, then waits grace and calls exit(1) with one line on stderr.
// It returns when done is closed first (the command returned); main runs it on its own
// goroutine.
func EndAfterSignal(ctx context.Context, stop func(), done <-chan struct{}, grace time.Duration, exit func(int), stderr io.Writer) {
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	stop()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		fmt.Fprintf(stderr, "smarter-compact: still running %s after the signal to stop; exiting now\n", grace)
		exit(1)
	}
}

// SignalGrace is the grace EndAfterSignal gives a command (signalGrace).
func SignalGrace() time.Duration { return signalGrace }
