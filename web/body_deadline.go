package web

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// BodyDeadline bounds how long a request's body may take to arrive: d from the handler's first
// read of it, or from the start of the handler while it has not read any ([context_proxy]
// body_read_timeout_s; d <= 0 turns the bound off). The clock restarts at the first read
// because a handler may wait before reading: the proxy reads a body only once the body budget
// has room for it (proxy/body_held.go), and that wait is bounded by the idle timeout, not by
// how fast the client sends. A handler that never reads still has the first deadline, so the
// server's drain of an unread body cannot wait on a slow client. A client that
// sends its body slower (slowloris: one byte every few seconds) gets a read error that names
// the setting, the handler answers it, and the server closes the connection. When the body
// has arrived whole (EOF) the connection's read deadline is cleared, so that a response that
// streams for minutes is never cut by it (Go's server cancels a request whose connection read
// fails, also after the body was read). An error leaves the deadline in place, so that the
// server's drain of the unread rest cannot wait on a slow client either. Requests without a
// body are not touched.
func BodyDeadline(d time.Duration, next http.Handler) http.Handler {
	if d <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			next.ServeHTTP(w, r) // a writer without deadlines (a test recorder)
			return
		}
		// a copy: the server looks at its own request's body after the handler, to close
		// the connection when the body ended in an error
		r2 := r.WithContext(r.Context())
		r2.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, d: d}
		next.ServeHTTP(w, r2)
	})
}

// deadlineBody is a request body read under BodyDeadline's deadline.
type deadlineBody struct {
	io.ReadCloser
	rc            *http.ResponseController
	d             time.Duration
	started, done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if !b.started {
		b.started = true
		_ = b.rc.SetReadDeadline(time.Now().Add(b.d))
	}
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF && !b.done:
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = fmt.Errorf("the request body did not arrive within %s ([context_proxy] body_read_timeout_s): send it faster or raise the setting: %w", b.d, err)
	}
	return n, err
}
