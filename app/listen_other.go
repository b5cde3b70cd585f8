//go:build !windows

package app

import (
	"errors"
	"syscall"
)

// addrInUse reports whether a listen error means another process holds the port.
func addrInUse(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }
