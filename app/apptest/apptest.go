// Package apptest holds the test helpers shared by app's tests and the end-to-end tests of
// app/e2e: a loopback port to start serve on, a buffer that a running command and the test
// can share, and the slow-body client of serve's timeout tests (in process and against the
// binary).
//
// It imports nothing of this module, and only tests may import it.
package apptest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
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

// StreamRequest is a minimal streamed Anthropic Messages request body for serve's
// /claude-code/v1/messages.
const StreamRequest = `{"model":"claude-sonnet-4-5","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`

// CheckSlowBody plays a client that sends one byte of StreamRequest's body to serve on the
// loopback port and stalls (slowloris), and checks serve's answer: a 400 naming
// body_read_timeout_s, the connection closed after it, both in under hang/2 (the caller runs
// serve with body_read_timeout_s = 1). No answer within hang ends the test.
func CheckSlowBody(t *testing.T, port int, hang time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /claude-code/v1/messages HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		port, len(StreamRequest), StreamRequest[:1])
	_ = conn.SetReadDeadline(time.Now().Add(hang))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to the stalled body after %s: %v", time.Since(start).Round(time.Millisecond), err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	t.Logf("stalled body answered %d after %s: %q", resp.StatusCode, took.Round(time.Millisecond), body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "body_read_timeout_s") {
		t.Fatalf("status %d, body %q; want 400 naming body_read_timeout_s", resp.StatusCode, body)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the answer: %v, want the server to close the connection (EOF)", err)
	}
	if took >= hang/2 {
		t.Errorf("answered after %s with body_read_timeout_s = 1", took)
	}
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
