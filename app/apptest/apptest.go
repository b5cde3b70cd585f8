// Package apptest holds the test helpers shared by app's tests and the end-to-end tests of
// app/e2e: a loopback port to start serve on, and a buffer that a running command and the
// test can share.
//
// It imports nothing of this module, and only tests may import it.
package apptest

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// FreePort returns a loopback port that was free a moment ago: another process could take
// it before the caller binds it, so a caller that must not flake retries a start that fails
// with "in use".
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// SyncBuffer is a bytes.Buffer that a server's or a process's goroutines and the test can
// share: Write and String hold one lock.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Reset empties the buffer.
func (b *SyncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}
