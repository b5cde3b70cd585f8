package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// MaxBytes caps config.toml: ours is a few hundred bytes, so a larger file is a
// mistake (a log, an image, /dev/zero) that must not be read into memory.
const MaxBytes = 1 << 20

// ReadText is ReadFile with a missing file as nil bytes and no error: the text our commands
// edit (a missing config.toml is created by the first save).
func ReadText(path string) ([]byte, error) {
	b, err := ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// ReadFile returns the bytes of the config.toml at path, which must be a regular file
// of at most MaxBytes. A FIFO, a device (/dev/zero), a socket or a directory is an
// error at once, never a read that blocks or fills memory: the file is opened
// non-blocking (configOpenFlags) and checked with Stat on the open descriptor, and at most
// MaxBytes+1 bytes are read. A missing file is an error wrapping fs.ErrNotExist.
func ReadFile(path string) ([]byte, error) {
	// Stat first: opening a FIFO on a system without non-blocking opens would wait for a writer.
	if err := checkConfigFile(path, os.Stat); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, configOpenFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := checkConfigFile(path, func(string) (fs.FileInfo, error) { return f.Stat() }); err != nil {
		return nil, err // replaced between the two checks
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBytes {
		return nil, configTooLarge(path)
	}
	return b, nil
}

func checkConfigFile(path string, stat func(string) (fs.FileInfo, error)) error {
	fi, err := stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s): config.toml must be a plain text file; point --config or SMARTER_COMPACT_CONFIG at one, or remove it to use the defaults",
			path, fileKind(fi.Mode()))
	}
	if fi.Size() > MaxBytes {
		return configTooLarge(path)
	}
	return nil
}

func configTooLarge(path string) error {
	return fmt.Errorf("%s is larger than %d KiB, which no config.toml is: point --config or SMARTER_COMPACT_CONFIG at the right file",
		path, MaxBytes>>10)
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "mode " + m.String()
	}
}
