// Package fakehindsight is a strict fake Hindsight server for tests: the two endpoints the
// proxy calls (memories/recall and operations of a bank), with scripted answers, a delay,
// an error status and pending operations. It rejects what the real API rejects for these
// calls (an unknown path or method, a body that is not the recall request, a budget other
// than low, mid or high, a missing or wrong Bearer key when one is set).
//
// It imports nothing of ours; tests of proxy, app and app/e2e use it.
package fakehindsight

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options script the server. Every field may be changed later through Set.
type Options struct {
	// Recall returns the texts recalled from bank for query, in order; nil recalls nothing.
	Recall func(bank, query string) []string
	// Delay is waited before each answer (or until the client gives up).
	Delay time.Duration
	// Status, when not 0, answers every call with this status and an error body.
	Status int
	// Pending and Processing are the operations listed per status, for every bank.
	Pending, Processing int
	// APIKey, when set, must come as "Authorization: Bearer <APIKey>".
	APIKey string
}

// Call is one request the server answered or rejected.
type Call struct {
	Method, Path, Bank string
	Query              string // recall's query; operations' status
	Budget             string
	MaxTokens          int
	Auth               string // the Authorization header as sent
	Status             int    // what the server answered
}

// Server is a running fake; its URL is the base URL a client is given.
type Server struct {
	URL string

	mu    sync.Mutex
	opts  Options
	calls []Call
}

// Start serves a fake until the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{opts: opts}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Set changes the script for the calls that start after it returns.
func (s *Server) Set(f func(*Options)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.opts)
}

// Calls returns every call so far, in arrival order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Recalls returns the recall calls so far.
func (s *Server) Recalls() []Call {
	var out []Call
	for _, c := range s.Calls() {
		if strings.HasSuffix(c.Path, "/memories/recall") {
			out = append(out, c)
		}
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	opts := s.opts
	s.mu.Unlock()
	c := Call{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization")}
	status, body := s.answer(r, opts, &c)
	if opts.Delay > 0 {
		select {
		case <-time.After(opts.Delay):
		case <-r.Context().Done():
		}
	}
	c.Status = status
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func detail(msg string) map[string]any { return map[string]any{"detail": msg} }

// answer validates the request as Hindsight's API does and builds the answer.
func (s *Server) answer(r *http.Request, opts Options, c *Call) (int, any) {
	if opts.APIKey != "" && c.Auth != "Bearer "+opts.APIKey {
		return http.StatusUnauthorized, detail("invalid or missing API key")
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/v1/default/banks/")
	if !ok {
		return http.StatusNotFound, detail("Not Found")
	}
	rawBank, tail, _ := strings.Cut(rest, "/")
	bank, err := url.PathUnescape(rawBank)
	if err != nil || bank == "" {
		return http.StatusNotFound, detail("Not Found")
	}
	c.Bank = bank
	if opts.Status != 0 {
		return opts.Status, detail("scripted failure")
	}
	switch {
	case tail == "memories/recall" && r.Method == http.MethodPost:
		var req struct {
			Query     *string `json:"query"`
			Budget    string  `json:"budget"`
			MaxTokens int     `json:"max_tokens"`
		}
		dec := json.NewDecoder(r.Body)
		if err := dec.Decode(&req); err != nil || req.Query == nil {
			return http.StatusUnprocessableEntity, detail("body must be a JSON object with a string query")
		}
		c.Query, c.Budget, c.MaxTokens = *req.Query, req.Budget, req.MaxTokens
		if req.Budget != "" && req.Budget != "low" && req.Budget != "mid" && req.Budget != "high" {
			return http.StatusUnprocessableEntity, detail("budget must be low, mid or high")
		}
		if req.MaxTokens < 0 {
			return http.StatusUnprocessableEntity, detail("max_tokens must not be negative")
		}
		var texts []string
		if opts.Recall != nil {
			texts = opts.Recall(bank, *req.Query)
		}
		results := make([]map[string]any, 0, len(texts))
		for i, t := range texts {
			results = append(results, map[string]any{"id": fmt.Sprintf("mem-%d", i+1), "text": t, "type": "world"})
		}
		return http.StatusOK, map[string]any{"results": results}
	case tail == "operations" && r.Method == http.MethodGet:
		status := r.URL.Query().Get("status")
		c.Query = status
		n := 0
		switch status {
		case "pending":
			n = opts.Pending
		case "processing":
			n = opts.Processing
		case "", "completed", "failed":
		default:
			return http.StatusUnprocessableEntity, detail("status must be pending, processing, completed or failed")
		}
		ops := make([]map[string]any, 0, n)
		for i := range n {
			ops = append(ops, map[string]any{"id": fmt.Sprintf("op-%d", i+1), "task_type": "retain",
				"created_at": "2026-12-02T08:00:00Z", "status": status, "error_message": nil})
		}
		return http.StatusOK, map[string]any{"bank_id": bank, "total": n, "limit": 20, "offset": 0, "operations": ops}
	}
	return http.StatusNotFound, detail("Not Found")
}
