//go:build !windows

package config

import (
	"os"
	"syscall"
)

// configOpenFlags opens config.toml without blocking: a FIFO put in its place would
// otherwise hold the open until some process writes to it.
const configOpenFlags = os.O_RDONLY | syscall.O_NONBLOCK
