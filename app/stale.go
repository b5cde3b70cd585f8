package app

import (
	"os"
	"sync"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy"
)

// restartCommand restarts the login service, so it runs the binary installed now.
const restartCommand = "smarter-compact service stop && smarter-compact service start"

// buildCheck tells whether the executable on disk is still the build this process started
// from: an upgrade in place replaces the file while the service runs the old one (the
// seed's proxy_stale; issue 17). It is safe for concurrent use.
type buildCheck struct {
	path    string
	running string // proxy.CodeVersion at start

	mu        sync.Mutex
	size      int64
	mod       time.Time
	installed string
}

// newBuildCheck checks the executable at path ("" checks nothing).
func newBuildCheck(path string) *buildCheck {
	return &buildCheck{path: path, running: proxy.CodeVersion()}
}

// check returns the build of the file at the path now and whether it differs from the
// running one. The file is hashed again only when its size or mtime changed, so a call
// costs a stat. A file that cannot be read is not stale ("" installed).
func (b *buildCheck) check() (installed string, stale bool) {
	if b == nil || b.path == "" {
		return "", false
	}
	fi, err := os.Stat(b.path)
	if err != nil {
		return "", false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.installed == "" || fi.Size() != b.size || !fi.ModTime().Equal(b.mod) {
		b.installed, b.size, b.mod = proxy.FileVersion(b.path), fi.Size(), fi.ModTime()
	}
	return b.installed, b.installed != "proxy:dev" && b.installed != b.running
}
