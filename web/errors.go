package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/a-h/templ"

	"github.com/smarter-compact/smarter-compact/web/ui"
)

// httpError is an error with the status and the message a user may see; Err is the cause,
// which goes to the log only.
type httpError struct {
	Code int
	Msg  string
	Err  error
}

func (e *httpError) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *httpError) Unwrap() error { return e.Err }

// userError is a 4xx whose message says what to do.
func userError(code int, format string, args ...any) *httpError {
	return &httpError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// handlerFunc is a dashboard or API handler: it writes its answer or returns an error for
// handle to answer.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts a handlerFunc. An *httpError answers with its status and message (the cause
// is logged for 5xx); any other error is logged and answered 500 with a message that points
// at the log. /api answers JSON {"error": msg}; an htmx request gets a fragment htmx puts in
// #flash; a browser gets a full error page.
func (s *Server) handle(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			return // the client went away
		}
		var he *httpError
		if !errors.As(err, &he) {
			he = &httpError{Code: http.StatusInternalServerError, Msg: "internal error: see the service log", Err: err}
		}
		path := truncate(r.URL.Path, 300) // a URL can be as long as the client likes
		if he.Code >= 500 {
			s.log.Error("dashboard", "method", r.Method, "path", path, "status", he.Code, "err", err)
		} else {
			s.log.Debug("dashboard", "method", r.Method, "path", path, "status", he.Code, "err", he.Msg)
		}
		s.writeError(w, r, he.Code, he.Msg)
	}
}

// writeError answers an error in the form the client reads.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, code int, msg string) {
	msg = "smarter-compact: " + msg
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/"):
		writeJSON(w, code, map[string]string{"error": msg})
	case isHTMX(r):
		w.Header().Set("HX-Retarget", "#flash")
		w.Header().Set("HX-Reswap", "innerHTML")
		_ = s.render(w, r, code, ui.ErrorFragment(msg))
	default:
		p := s.page(http.StatusText(code), "")
		_ = s.render(w, r, code, ui.ErrorPage(p, strconv.Itoa(code)+" "+http.StatusText(code), msg))
	}
}

// render writes a templ component as HTML. It renders into a buffer first, so a failed
// render answers an error, not half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, c templ.Component) error {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		return fmt.Errorf("render %s: %w", r.URL.Path, err)
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Add("Vary", "HX-Request")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
	return nil
}

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b = []byte(`{"error":"smarter-compact: internal error: see the service log"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// isHTMX reports an htmx request that wants a fragment. A history restore asks for the full
// page even though htmx sends it.
func isHTMX(r *http.Request) bool {
	return r.Header.Get("HX-Request") == "true" && r.Header.Get("HX-History-Restore-Request") != "true"
}
