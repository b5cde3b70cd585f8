package web

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/savings"
)

// The JSON control API under /api (DESIGN.md §5; issue 6, Deliver 5): the tray and the CLI
// read the state and flip the switches here. Requests need the bearer token and must not
// come from a browser (Mount's middleware); bodies are JSON only, so a cross-site form
// cannot post one.

// apiBodyLimit bounds a request body; {"mode":"follow"} is 17 bytes.
const apiBodyLimit = 4 << 10

// apiStatusBody is GET /api/status: the state, the overview's 24 h numbers (the seed's
// status shape) and today's totals (UTC) for the tray's status line.
type apiStatusBody struct {
	State
	Last24h      *store.Status        `json:"last24h"`
	Last24hError string               `json:"last24hError,omitempty"`
	Today        *apiDay              `json:"today"`
	Health       store.HealthSnapshot `json:"health"` // the store's health record (health.go)
	// Savings is money saved today, this week and per session, agent and model (savings.go).
	Savings      *savings.Summary `json:"savings"`
	SavingsError string           `json:"savingsError,omitempty"`
}

// apiDay is one day's totals.
type apiDay struct {
	Date        string `json:"date"`
	Trims       int64  `json:"trims"`
	TokensSaved int64  `json:"tokensSaved"`
	Requests    int64  `json:"requests"`
	FailOpens   int64  `json:"failOpens"`
}

// apiAgentBody is one agent's switch as POST /api/agents/{agent} answers it: the
// AgentSwitch plus enabled (= trimming), and the config.toml the switch was saved in (State's
// ConfigPath), which `smarter-compact on|off` compares with the one it names.
type apiAgentBody struct {
	AgentSwitch
	Enabled    bool   `json:"enabled"`
	ConfigPath string `json:"configPath"`
}

// apiStatus answers GET /api/status.
func (s *Server) apiStatus(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	body := apiStatusBody{State: s.control.State(), Health: s.root.Health().Snapshot()}
	stamp := s.dataStamp(ctx)
	if st, err := s.status24(ctx, stamp); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		body.Last24hError = err.Error()
	} else {
		body.Last24h = &st
	}
	if days, err := s.root.Daily(ctx, s.now(), 1); err == nil && len(days) == 1 {
		d := days[0]
		body.Today = &apiDay{d.Date, d.Trims, d.TokensSaved, d.Requests, d.FailOpens}
	}
	if sum, err := s.savingsSummary(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		body.SavingsError = err.Error()
	} else {
		body.Savings = &sum
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// apiAgents answers GET /api/agents: {"agents": [AgentSwitch…]} in State's order.
func (s *Server) apiAgents(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string][]AgentSwitch{"agents": s.control.State().Agents})
	return nil
}

// apiSetAgent answers POST /api/agents/{agent} with {"mode": "on"|"off"|"follow"} or
// {"enabled": true|false} (on or off): it saves the switch and returns the agent's new state.
func (s *Server) apiSetAgent(w http.ResponseWriter, r *http.Request) error {
	agent := chi.URLParam(r, "agent")
	var body struct {
		Mode    *Mode `json:"mode"`
		Enabled *bool `json:"enabled"`
	}
	const want = `{"mode": "on"|"off"|"follow"} or {"enabled": true|false}`
	if err := decodeJSON(w, r, &body, want); err != nil {
		return err
	}
	var mode Mode
	switch {
	case body.Mode != nil && body.Enabled != nil:
		return userError(http.StatusBadRequest, "give mode or enabled, not both: the body must be %s", want)
	case body.Mode != nil:
		mode = *body.Mode
		if mode != ModeOn && mode != ModeOff && mode != ModeFollow {
			return userError(http.StatusBadRequest, "mode must be on, off or follow, not %q", truncate(string(mode), 20))
		}
	case body.Enabled != nil && *body.Enabled:
		mode = ModeOn
	case body.Enabled != nil:
		mode = ModeOff
	default:
		return userError(http.StatusBadRequest, "the body must be %s", want)
	}
	if err := checkAgent(s.control.State(), agent); err != nil {
		return err
	}
	if err := s.control.SetAgent(agent, mode); err != nil {
		return controlError("could not switch "+agent, err)
	}
	s.log.Info("trimming switched through the API", "agent", agent, "mode", mode)
	st := s.control.State()
	for _, a := range st.Agents {
		if a.Agent == agent {
			writeJSON(w, http.StatusOK, apiAgentBody{a, a.Trimming, st.ConfigPath})
			return nil
		}
	}
	return &httpError{Code: http.StatusInternalServerError, Msg: "the switch was saved but the agent is gone from the state: see the service log"}
}

// apiPause answers POST /api/pause with {"paused": bool}: pause all (every agent passes
// through untouched) or resume. It returns {"paused": bool, "revision": n}.
func (s *Server) apiPause(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Paused *bool `json:"paused"`
	}
	const want = `{"paused": true|false}`
	if err := decodeJSON(w, r, &body, want); err != nil {
		return err
	}
	if body.Paused == nil {
		return userError(http.StatusBadRequest, "the body must be %s", want)
	}
	if err := s.control.SetPaused(*body.Paused); err != nil {
		return controlError("could not change pause", err)
	}
	s.log.Info("pause set through the API", "paused", *body.Paused)
	st := s.control.State()
	writeJSON(w, http.StatusOK, map[string]any{"paused": st.Paused, "revision": st.Revision})
	return nil
}

// decodeJSON reads one JSON object of at most apiBodyLimit bytes with only known fields,
// after checking Content-Type: application/json (a cross-site form cannot send that
// without a CORS preflight, which we never answer).
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, want string) error {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return userError(http.StatusUnsupportedMediaType, "send Content-Type: application/json and %s", want)
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, apiBodyLimit))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return userError(http.StatusRequestEntityTooLarge, "the body is over %d bytes: it must be %s", apiBodyLimit, want)
	}
	if err != nil || dec.More() {
		return userError(http.StatusBadRequest, "the body must be %s", want)
	}
	return nil
}
