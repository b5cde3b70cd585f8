package app

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestEndAfterSignal: once the signal context is done, a command that does not return
// within the grace ends the process (exit 1, one line); one that returns does not.
func TestEndAfterSignal(t *testing.T) {
	t.Parallel()
	t.Run("stuck command exits", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		stopped, exited := make(chan struct{}), make(chan int, 1)
		var stderr syncBuffer
		go EndAfterSignal(ctx, func() { close(stopped) }, make(chan struct{}), time.Millisecond, func(c int) { exited <- c }, &stderr)
		<-stopped // a second signal now gets the default action
		if code := <-exited; code != 1 {
			t.Fatalf("exit code %d, want 1", code)
		}
		if !strings.Contains(stderr.String(), "after the signal to stop; exiting now") {
			t.Fatalf("stderr %q", stderr.String())
		}
	})
	t.Run("command that returns", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		done := make(chan struct{})
		close(done)
		returned := make(chan struct{})
		go func() {
			EndAfterSignal(ctx, func() {}, done, time.Hour, func(c int) { t.Errorf("exit(%d) after the command returned", c) }, &syncBuffer{})
			close(returned)
		}()
		<-returned
	})
}
