package embedding

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
)

// Client calls an OpenAI-compatible embeddings endpoint: POST <URL>/embeddings with
// {"model", "input": [...]}, answered by data[i].embedding. It is safe for concurrent use.
type Client struct {
	url    string
	apiKey string
	http   *http.Client
}

// NewClient returns a client for the base URL (e.g. http://127.0.0.1:11434/v1). apiKey,
// when not empty, is sent as a Bearer token (CONTEXT_EMBEDDING_API_KEY). hc nil uses a client
// whose transport keeps enough idle connections for the embedder's workers; timeouts come
// from the context of each call.
func NewClient(url, apiKey string, hc *http.Client) *Client {
	if hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 16
		hc = &http.Client{Transport: t}
	}
	return &Client{url: strings.TrimRight(url, "/"), apiKey: apiKey, http: hc}
}

// URL is the endpoint's base URL.
func (c *Client) URL() string { return c.url }

// SafeURL is the endpoint with any password in it replaced by "xxxxx", for messages an agent
// or a log may show.
func (c *Client) SafeURL() string {
	u, err := url.Parse(c.url)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Error is a failed embeddings call: Type names the failure for the log line (timeout,
// connect, http_<status>, decode, count), Location where it was detected (store/embedding/client.go:<line>).
type Error struct {
	Type, Location string
	Err            error
}

func (e *Error) Error() string { return "embedding " + e.Type + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func newError(typ string, err error) *Error {
	_, file, line, _ := runtime.Caller(1)
	return &Error{Type: typ, Location: location(file, line), Err: err}
}

// errorType is the <type> of a log line for any error.
func errorType(err error) (typ, loc string) {
	var e *Error
	if errors.As(err, &e) {
		return e.Type, e.Location
	}
	_, file, line, _ := runtime.Caller(1)
	return fmt.Sprintf("%T", err), location(file, line)
}

// Embed returns one vector per input, in input order. Errors are *Error.
func (c *Client) Embed(ctx context.Context, model string, inputs []string) ([][]float32, error) {
	body, err := json.Marshal(struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}{model, inputs})
	if err != nil {
		return nil, newError("encode", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/embeddings", bytes.NewReader(body))
	if err != nil {
		return nil, newError("request", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, doError(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, newError("timeout", err)
		}
		return nil, newError("read", err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := string(raw)
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return nil, newError(fmt.Sprintf("http_%d", resp.StatusCode), fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(msg)))
	}
	var out struct {
		Data []struct {
			Index     *int      `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, newError("decode", err)
	}
	if len(out.Data) != len(inputs) {
		return nil, newError("count", fmt.Errorf("%d embeddings for %d inputs", len(out.Data), len(inputs)))
	}
	vecs := make([][]float32, len(inputs))
	for i, d := range out.Data {
		k := i
		if d.Index != nil {
			k = *d.Index
		}
		if k < 0 || k >= len(vecs) || vecs[k] != nil || len(d.Embedding) == 0 {
			return nil, newError("decode", fmt.Errorf("embedding %d: bad index %d or empty vector", i, k))
		}
		vecs[k] = d.Embedding
	}
	return vecs, nil
}

// doError is the *Error of a failed http.Client.Do: timeout, canceled or connect.
func doError(err error) *Error {
	_, file, line, _ := runtime.Caller(1)
	typ := "connect"
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		typ = "timeout"
	case errors.Is(err, context.Canceled):
		typ = "canceled"
	}
	return &Error{Type: typ, Location: location(file, line), Err: err}
}

// location is file:line as the log lines name it: the last two folders and the file name
// (store/embedding/client.go:95).
func location(file string, line int) string {
	dir := filepath.Dir(file)
	return fmt.Sprintf("%s/%s/%s:%d", filepath.Base(filepath.Dir(dir)), filepath.Base(dir), filepath.Base(file), line)
}
