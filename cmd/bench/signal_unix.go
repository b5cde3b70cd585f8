//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// The profiled serve child takes two signals from the bench: SIGUSR2 turns its CPU profile
// on or off, SIGUSR1 writes its live heap.

// notifyProfileSignals relays the profile signals to c.
func notifyProfileSignals(c chan<- os.Signal) { signal.Notify(c, syscall.SIGUSR1, syscall.SIGUSR2) }

// isProfileToggle reports whether s asks to turn the CPU profile on or off (else: write the heap).
func isProfileToggle(s os.Signal) bool { return s == syscall.SIGUSR2 }

// signalProfileToggle asks the child p to turn its CPU profile on or off.
func signalProfileToggle(p *os.Process) error { return p.Signal(syscall.SIGUSR2) }

// signalHeapDump asks the child p to write its live heap.
func signalHeapDump(p *os.Process) error { return p.Signal(syscall.SIGUSR1) }
