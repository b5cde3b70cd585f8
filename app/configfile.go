package app

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/smarter-compact/smarter-compact/proxy/config"
)

// readConfigText returns config.toml's bytes, nil when it does not exist; a file that is
// not regular or too large is an error (ReadFile).
func readConfigText(path string) ([]byte, error) {
	b, err := config.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// isReadOnlyFS reports a write refused because the file system is mounted read-only.
func isReadOnlyFS(err error) bool { return errors.Is(err, syscall.EROFS) }
