// Package memory holds the clients of memory providers the proxy asks for recall on trim
// (seed 001, context proxy step 4): today Hindsight (vectorize-io/hindsight) over its HTTP
// API. A client answers proxy.Recaller's two calls; app builds it from config.toml's
// [memory] table and hands it to the proxy.
//
// It never logs and never puts the API key anywhere but the Authorization header. It
// imports nothing of ours; app is its only importer (tests aside).
package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Hindsight is a client of a Hindsight server's HTTP API: memories/recall and operations
// of one bank. It is safe for concurrent use.
type Hindsight struct {
	base   string // without a trailing slash
	apiKey string
	client *http.Client
	// Budget is recall's "budget": "low", "mid" or "high" (seed 001: low).
	Budget string
	// MaxTokens is recall's "max_tokens", the provider's cap on the recalled text.
	MaxTokens int
}

// maxAnswer bounds what is read of one answer: recall returns at most MaxTokens of text
// plus metadata, so more than this is a broken server.
const maxAnswer = 8 << 20

// NewHindsight returns a client of the Hindsight server at baseURL (for example
// http://127.0.0.1:8888). apiKey, when not "", is sent as a Bearer token. Deadlines come
// from each call's context.
func NewHindsight(baseURL, apiKey string) *Hindsight {
	return &Hindsight{
		base:      strings.TrimRight(baseURL, "/"),
		apiKey:    apiKey,
		client:    &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, IdleConnTimeout: 90 * time.Second}},
		Budget:    "low",
		MaxTokens: 4096,
	}
}

// String names the server, never the key.
func (h *Hindsight) String() string { return "hindsight " + h.base }

type recallRequest struct {
	Query     string `json:"query"`
	Budget    string `json:"budget"`
	MaxTokens int    `json:"max_tokens"`
}

type recallResponse struct {
	Results []struct {
		ID   string `json:"id"`
		Text string `json:"text"`
		Type string `json:"type"`
	} `json:"results"`
}

// Recall asks POST /v1/default/banks/{bank}/memories/recall for query and returns the
// results' texts in the server's order, one per line ("" when there are none). Errors
// name the status or the decoding step, never the query or the answer.
func (h *Hindsight) Recall(ctx context.Context, bank, query string) (string, error) {
	body, err := json.Marshal(recallRequest{Query: query, Budget: h.Budget, MaxTokens: h.MaxTokens})
	if err != nil {
		return "", fmt.Errorf("hindsight recall: %w", err)
	}
	var res recallResponse
	if err := h.do(ctx, http.MethodPost, h.bankURL(bank, "/memories/recall", ""), body, &res); err != nil {
		return "", fmt.Errorf("hindsight recall: %w", err)
	}
	var texts []string
	for _, r := range res.Results {
		if t := strings.TrimSpace(r.Text); t != "" {
			texts = append(texts, t)
		}
	}
	return strings.Join(texts, "\n"), nil
}

type operationsResponse struct {
	Total      *int `json:"total"`
	Operations []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"operations"`
}

// Ingesting reports whether the bank has ingest operations still pending or processing:
// GET /v1/default/banks/{bank}/operations?status=pending, then ?status=processing when
// none is pending.
func (h *Hindsight) Ingesting(ctx context.Context, bank string) (bool, error) {
	for _, status := range []string{"pending", "processing"} {
		var res operationsResponse
		q := url.Values{"status": {status}, "limit": {"1"}}.Encode()
		if err := h.do(ctx, http.MethodGet, h.bankURL(bank, "/operations", q), nil, &res); err != nil {
			return false, fmt.Errorf("hindsight operations: %w", err)
		}
		if len(res.Operations) > 0 || (res.Total != nil && *res.Total > 0) {
			return true, nil
		}
	}
	return false, nil
}

func (h *Hindsight) bankURL(bank, tail, query string) string {
	u := h.base + "/v1/default/banks/" + url.PathEscape(bank) + tail
	if query != "" {
		u += "?" + query
	}
	return u
}

// errStatus is an answer other than 2xx.
var errStatus = errors.New("unexpected status")

func (h *Hindsight) do(ctx context.Context, method, u string, body []byte, into any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+h.apiKey)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err // the URL is ours, the cause is what matters
		}
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%w %d", errStatus, resp.StatusCode)
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}
