//go:build !unix

package main

import (
	"errors"
	"os"
)

// Without SIGUSR1 and SIGUSR2 the profiled serve child cannot be steered: the bench's
// profile part needs a Unix.
var errNoProfileSignals = errors.New("profiling serve needs SIGUSR1 and SIGUSR2 (Unix only)")

func notifyProfileSignals(chan<- os.Signal) {}

func isProfileToggle(os.Signal) bool { return false }

func signalProfileToggle(*os.Process) error { return errNoProfileSignals }

func signalHeapDump(*os.Process) error { return errNoProfileSignals }
