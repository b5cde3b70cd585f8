//go:build windows

package config

import "os"

// configOpenFlags: Windows has no FIFOs in the file system; ReadFile's Stat check
// refuses devices and pipes before the open.
const configOpenFlags = os.O_RDONLY
