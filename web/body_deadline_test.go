package web

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// deadlineServer serves h behind BodyDeadline(d) over a real connection (deadlines need one)
// and returns its address.
func deadlineServer(t *testing.T, d time.Duration, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(BodyDeadline(d, h))
	t.Cleanup(srv.Close)
	return srv.URL
}

// readBodyHandler answers 200 with the body's length once it has read it whole after waiting
// wait, else 400 with the read error.
func readBodyHandler(wait time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(wait) // the handler's own wait before it reads, as the proxy's body budget
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		io.WriteString(w, strings.Repeat("x", len(b)))
	}
}

// A handler that waits longer than the deadline before it reads still gets a body that the
// client sent at once: the deadline counts from the first read.
func TestBodyDeadlineCountsFromTheFirstRead(t *testing.T) {
	const d = 200 * time.Millisecond
	url := deadlineServer(t, d, readBodyHandler(3*d))
	body := bytes.Repeat([]byte("a"), 4<<20) // more than the connection's buffers hold
	resp, err := http.Post(url, "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(got) != len(body) {
		t.Fatalf("status %d, %d bytes back (%.80q), want 200 and %d", resp.StatusCode, len(got), got, len(body))
	}
}

// A client that sends its body slower than the deadline is still cut, with the setting named,
// when the handler waited before reading.
func TestBodyDeadlineCutsASlowBodyAfterAWait(t *testing.T) {
	const d = 300 * time.Millisecond
	url := deadlineServer(t, d, readBodyHandler(d))
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// headers and one byte of a 1000-byte body, then nothing
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\na"); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "body_read_timeout_s") {
		t.Fatalf("got %d %q, want a 400 naming body_read_timeout_s", resp.StatusCode, b)
	}
}
