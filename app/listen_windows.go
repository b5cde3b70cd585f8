//go:build windows

package app

import (
	"errors"
	"syscall"
)

// wsaeaddrinuse is Winsock's "address already in use"; syscall.EADDRINUSE is an invented
// value on Windows that no socket call returns.
const wsaeaddrinuse = syscall.Errno(10048)

// addrInUse reports whether a listen error means another process holds the port.
func addrInUse(err error) bool { return errors.Is(err, wsaeaddrinuse) }
