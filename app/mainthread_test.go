package app

import (
	"bytes"
	"errors"
	"runtime"
	"strconv"
	"testing"
)

// goroutineID is the running goroutine's number, from its stack header.
func goroutineID() int {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.Atoi(string(b[:bytes.IndexByte(b, ' ')]))
	return id
}

// TestOnMainThread: the command runs on another goroutine, the function it hands over runs
// on the calling goroutine (main.go's, locked to the main thread) while the command goes
// on, and once the command returned its error comes back and nothing more is taken.
func TestOnMainThread(t *testing.T) {
	caller := goroutineID()
	var ran, cmdOn int
	var late func(func()) bool
	release := make(chan struct{})
	finished := make(chan struct{})
	want := errors.New("the command's error")
	err := onMainThread(func(mainThread func(func()) bool) error {
		cmdOn = goroutineID()
		late = mainThread
		ok := mainThread(func() {
			ran = goroutineID()
			<-release // the command must run while this holds the main goroutine
			close(finished)
		})
		if !ok {
			return errors.New("mainThread refused while the command runs")
		}
		close(release)
		<-finished
		return want
	})
	if !errors.Is(err, want) {
		t.Fatalf("onMainThread returned %v, want the command's error", err)
	}
	if ran != caller {
		t.Errorf("the handed-over function ran on goroutine %d, want the caller's %d", ran, caller)
	}
	if cmdOn == caller {
		t.Errorf("the command ran on the caller's goroutine %d", caller)
	}
	if late(func() { t.Error("ran after the command returned") }) {
		t.Error("mainThread took work after the command returned")
	}
}
