package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// The control API's client, beside the handlers that define its protocol: `smarter-compact
// on|off` switches an agent in a running service through it.

// ClientTimeout bounds one call of a running service's control API.
const ClientTimeout = 3 * time.Second

// ServiceDownError is a control API call that found no service listening (the dial failed).
type ServiceDownError struct{ err error }

func (e *ServiceDownError) Error() string { return e.err.Error() }
func (e *ServiceDownError) Unwrap() error { return e.err }

// ErrNotTaken marks a control API call that reached a listener which did not take the
// change and changed nothing: 401 (the token is missing or wrong), or an answer that is not
// the control API's (another program on the port, an older smarter-compact).
var ErrNotTaken = errors.New("not taken")

type notTakenError struct{ msg string }

func (e *notTakenError) Error() string   { return e.msg }
func (e *notTakenError) Is(t error) bool { return t == ErrNotTaken }

// SetAgentAnswer is POST /api/agents/{agent}'s answer as the client reads it: the agent's
// switch and the config.toml the service saved it in ("" from a service that does not say).
type SetAgentAnswer struct {
	AgentSwitch
	ConfigPath string
}

// SetAgentMode calls POST <base>/api/agents/<agent> with {"mode": mode} and the bearer token
// (none sent when token is ""), within ClientTimeout, with no proxy and no redirects. base is
// e.g. "http://127.0.0.1:4100". It returns the agent's switch as the service reports it.
//
// Errors: a *ServiceDownError when nothing listens; one that Is ErrNotTaken on 401 or an
// answer that is not the control API's; otherwise the service's message with its status and
// without its "smarter-compact: " prefix, or a mode other than the one asked for.
func SetAgentMode(ctx context.Context, base, token, agent string, mode Mode) (SetAgentAnswer, error) {
	var sw SetAgentAnswer
	body, _ := json.Marshal(map[string]Mode{"mode": mode})
	resp, b, err := callControl(ctx, http.MethodPost, base+"/api/agents/"+agent, body, token, 16<<10)
	if err != nil {
		return sw, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			return sw, &notTakenError{fmt.Sprintf("POST /api/agents/%s answered %s (an older smarter-compact, or another program on the port?)", agent, resp.Status)}
		}
		msg := fmt.Sprintf("%s: %s", resp.Status, strings.TrimPrefix(e.Error, "smarter-compact: "))
		if resp.StatusCode == http.StatusUnauthorized {
			return sw, &notTakenError{msg}
		}
		return sw, errors.New(msg)
	}
	var answer apiAgentBody
	if err := json.Unmarshal(b, &answer); err != nil || answer.Agent != agent {
		shown := string(b)
		if len(shown) > 200 {
			shown = shown[:200] + "…"
		}
		return sw, &notTakenError{fmt.Sprintf("POST /api/agents/%s: unexpected answer %q", agent, shown)}
	}
	sw = SetAgentAnswer{answer.AgentSwitch, answer.ConfigPath}
	if sw.Mode != mode {
		return sw, fmt.Errorf("the running service reports %s's switch as %q, not %q", agent, sw.Mode, mode)
	}
	return sw, nil
}

// callControl makes one control API call within ClientTimeout: method on url, with body as
// JSON when it is not nil and the bearer token (none sent when token is ""), through
// sendLoopback. It returns the response, its body already closed, and the first limit bytes
// of that body. Errors: the request's, or sendLoopback's (a *ServiceDownError when nothing
// listens).
func callControl(ctx context.Context, method, url string, body []byte, token string, limit int64) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, ClientTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := sendLoopback(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
	return resp, b, nil
}

// sendLoopback sends req to the running service: no proxy from the environment, no
// keep-alive, redirects not followed. A failed dial (nothing listens on the port, on every
// OS, where the refusal's errno differs) is a *ServiceDownError.
func sendLoopback(req *http.Request) (*http.Response, error) {
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
			return nil, &ServiceDownError{err}
		}
		return nil, err
	}
	return resp, nil
}

// AgentModes is what the service reported for a switch of several agents (SetAgentModes).
type AgentModes struct {
	ConfigPath string   // the service's config.toml
	Whys       []string // "<agent> <why>" for each agent whose switch came with a why
}

// SetAgentModes switches agents one by one through the service at base (SetAgentMode, the
// `on`, `off` and `follow` commands). A *ServiceDownError or ErrNotTaken comes only from the
// first agent, when nothing changed; a later failure names the agents already switched.
func SetAgentModes(ctx context.Context, base, token string, agents []string, mode Mode) (AgentModes, error) {
	var res AgentModes
	for i, a := range agents {
		sw, err := SetAgentMode(ctx, base, token, a, mode)
		if err != nil {
			var down *ServiceDownError
			if i == 0 && (errors.As(err, &down) || errors.Is(err, ErrNotTaken)) {
				return res, err
			}
			if i > 0 {
				return res, fmt.Errorf("the running service at %s switched %s, but not %s: %v", base, strings.Join(agents[:i], ", "), a, err)
			}
			return res, fmt.Errorf("the running service at %s: %v", base, err) // its message names the agent
		}
		res.ConfigPath = sw.ConfigPath
		if sw.Why != "" {
			res.Whys = append(res.Whys, a+" "+sw.Why)
		}
	}
	return res, nil
}
