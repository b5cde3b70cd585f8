package app

import "context"

// MainThread is Main for the program's main goroutine, and only main.go calls it: the
// command runs on another goroutine while this one waits for work that must run on the
// process's main thread, which is the tray library's loop. fyne.io/systray on macOS runs
// [NSApp run], which AppKit allows on the main thread only; the library's init (and
// main.go's) lock the main goroutine to that thread. serve hands the loop over when it
// shows the tray and stops it before it returns (the tray's Quit and SIGTERM both cancel
// serve's context; serve then quits the library, whose loop returns here), so its
// deferred cleanup runs as under Main. Linux and Windows take the same path, which their
// tray library allows. It returns the command's error once the command returned.
func MainThread(ctx context.Context, args []string) error {
	return onMainThread(func(mainThread func(func()) bool) error {
		return mainWith(ctx, args, mainThread)
	})
}

// onMainThread runs cmd on a new goroutine and the functions cmd hands to mainThread on the
// calling goroutine, one at a time, until cmd returns; it returns cmd's error. mainThread
// queues f and returns true once this goroutine took it, false after cmd returned.
func onMainThread(cmd func(mainThread func(f func()) bool) error) error {
	jobs := make(chan func())
	finished := make(chan struct{})
	mainThread := func(f func()) bool {
		select {
		case jobs <- f:
			return true
		case <-finished:
			return false
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- cmd(mainThread) }()
	for {
		select {
		case f := <-jobs:
			f()
		case err := <-errc:
			close(finished)
			return err
		}
	}
}
