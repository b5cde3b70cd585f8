package web

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/web/ui"
)

// statusHours is the overview's window (issue 6: the last 24 hours).
const statusHours = 24

// dailyDays is the number of days of the tokens-saved chart.
const dailyDays = 14

// overview answers GET /.
func (s *Server) overview(w http.ResponseWriter, r *http.Request) error {
	live, err := s.liveView(r.Context(), "")
	if err != nil {
		return err
	}
	return s.render(w, r, http.StatusOK, ui.OverviewPage(s.page("Overview", "overview"), live))
}

// live answers GET /ui/live?rev=N&data=S, the overview's 1 s poll: 204 (htmx swaps nothing)
// while State().Revision is N and the data stamp is S (no session file changed, same
// minute), else the fresh fragment. Without data only the revision is compared.
func (s *Server) live(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if rev, err := strconv.ParseUint(q.Get("rev"), 10, 64); err == nil && rev == s.control.State().Revision {
		data := q.Get("data")
		if data == "" {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		stamp := s.dataStamp(r.Context())
		if stamp == data {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		return s.renderLive(w, r, stamp)
	}
	return s.renderLive(w, r, "")
}

// renderLive writes the live fragment; stamp is the data stamp when the caller has it, ""
// to compute it.
func (s *Server) renderLive(w http.ResponseWriter, r *http.Request, stamp string) error {
	live, err := s.liveView(r.Context(), stamp)
	if err != nil {
		return err
	}
	return s.render(w, r, http.StatusOK, ui.LiveSection(live))
}

// liveView gathers the state, the 24 h numbers and the daily chart; stamp is the data stamp
// ("" computes it).
func (s *Server) liveView(ctx context.Context, stamp string) (ui.Live, error) {
	st := s.control.State()
	now := s.now()
	if stamp == "" {
		stamp = s.dataStamp(ctx)
	}
	l := ui.Live{
		PollURL:     "/ui/live?rev=" + strconv.FormatUint(st.Revision, 10) + "&data=" + url.QueryEscape(stamp),
		Revision:    st.Revision,
		CSRF:        s.csrf,
		Master:      st.Master,
		Paused:      st.Paused,
		EnvLock:     st.EnvLock,
		ConfigError: st.ConfigError,
		Service: ui.Service{
			Version: st.Version, Addr: st.Addr, StartedAt: isoUTC(st.StartedAt),
			Uptime: duration(now.Sub(st.StartedAt)), ConfigPath: orNone(st.ConfigPath),
			StoreDir: st.StoreDir, Tray: orNone(st.Tray),
		},
	}
	if st.StartedAt.IsZero() {
		l.Service.Uptime = "–"
	}
	if st.ProxyStale {
		l.Stale = &ui.Stale{Running: st.Build, Installed: st.InstalledBuild, Restart: st.RestartCommand}
	}
	for _, a := range st.Agents {
		l.Agents = append(l.Agents, ui.Agent{
			Agent: a.Agent, Mode: string(a.Mode), Settable: a.Agent != agentUnknown,
			Trimming: a.Trimming, Why: a.Why, Wiring: string(a.Wiring), WiringDetail: a.WiringDetail, Route: a.Route,
		})
	}
	status, err := s.status24(ctx, stamp)
	if ctx.Err() != nil {
		return ui.Live{}, ctx.Err()
	}
	l.Stats = statsView(status, err)
	if err == nil && status.Sessions == 0 && status.Skipped == 0 {
		l.FirstSteps = firstSteps(st)
	}
	days, err := s.root.Daily(ctx, now, dailyDays)
	if err != nil {
		if ctx.Err() != nil {
			return ui.Live{}, ctx.Err()
		}
		s.log.Warn("dashboard: daily totals", "err", err)
		if l.Stats.Problem == "" {
			l.Stats.Problem = "The daily totals could not be read: " + err.Error()
		}
	}
	l.Daily = dailyChart(days)
	l.Health = healthView(s.root.Health().Snapshot(), now)
	sum, err := s.savingsSummary(ctx)
	if ctx.Err() != nil {
		return ui.Live{}, ctx.Err()
	}
	l.Savings = savingsView(sum, err)
	return l, nil
}

// firstSteps sorts the agents by wiring for the overview's "what to do next".
func firstSteps(st State) *ui.FirstSteps {
	f := &ui.FirstSteps{Service: st.Addr}
	for _, a := range st.Agents {
		switch a.Wiring {
		case WiringWired:
			f.Wired = append(f.Wired, a.Agent)
		case WiringNotWired:
			f.NotWired = append(f.NotWired, a.Agent)
		case WiringNotInstalled:
			f.NotInstalled = append(f.NotInstalled, a.Agent)
		}
	}
	return f
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// agentUnknown is the agent of requests on unprefixed routes; it always follows the master.
const agentUnknown = "unknown"

// statsView formats the 24 h numbers.
func statsView(st store.Status, err error) ui.Stats {
	v := ui.Stats{Hours: statusHours}
	if err != nil {
		v.Problem = "The last " + strconv.Itoa(statusHours) + " hours could not be read: " + err.Error()
		for _, p := range []*string{&v.Trims, &v.TokensSaved, &v.FailOpens, &v.Requests, &v.HitRatio, &v.NewCut, &v.Other, &v.Sessions} {
			*p = "–"
		}
		return v
	}
	v.Trims = ui.Commas(int64(st.Trims))
	v.TokensSaved = ui.Commas(st.TokensSaved)
	v.FailOpens = ui.Commas(int64(st.FailOpens))
	v.Requests = ui.Commas(int64(st.Usage.Requests))
	v.HitRatio = "–"
	if st.Usage.HitRatio != nil {
		v.HitRatio = strconv.FormatFloat(*st.Usage.HitRatio*100, 'f', 1, 64) + " %"
	}
	v.NewCut, v.NewCutReqs = average(st.Usage.NewCut)
	v.Other, v.OtherReqs = average(st.Usage.Other)
	v.Sessions = ui.Commas(int64(st.Sessions))
	for _, k := range st.SkippedSessions {
		v.Skipped = append(v.Skipped, k.Session+": "+k.Reason)
	}
	if more := st.Skipped - len(st.SkippedSessions); more > 0 {
		v.Skipped = append(v.Skipped, fmt.Sprintf("and %d more", more))
	}
	for _, e := range st.LastErrors {
		v.Errors = append(v.Errors, ui.FailOpen{
			At: strings.Replace(strings.TrimSuffix(e.At, "Z"), "T", " ", 1), Session: e.Session,
			SessionHref: sessionHref(e.Session), Location: e.Location, Error: e.Error,
		})
	}
	return v
}

// average formats a cache-creation group: the mean per request, and the request count.
func average(c store.CacheCreation) (avg string, reqs int64) {
	if c.Average == nil {
		return "–", int64(c.Requests)
	}
	return ui.Commas(int64(*c.Average + 0.5)), int64(c.Requests)
}

// dataStamp hashes what the store's session list knows of every session file (name, newest
// mtime, size), the current minute and the health record's generation: it changes when a
// request wrote anything or something failed (a failing store writes no file), and once a
// minute so the 24 h window slides. Sessions is cached by the store (a stat per file).
func (s *Server) dataStamp(ctx context.Context) string {
	list, err := s.root.Sessions(ctx)
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%d|", s.now().Unix()/60, s.root.Health().Generation())
	if err != nil {
		fmt.Fprintf(h, "error %v", err)
	}
	for _, si := range list {
		fmt.Fprintf(h, "%s %d %d|", si.SessionID, si.LastActivity.UnixNano(), si.Bytes)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// status24 returns root.Status over the last 24 hours, cached while stamp holds.
func (s *Server) status24(ctx context.Context, stamp string) (store.Status, error) {
	now := s.now()
	s.mu.Lock()
	c := s.status
	s.mu.Unlock()
	if c.stamp == stamp && now.Sub(c.at) < statusMaxAge && now.Sub(c.at) >= 0 {
		return c.st, nil
	}
	st, err := s.root.Status(ctx, now, statusHours)
	if err == nil {
		s.mu.Lock()
		s.status = statusCache{stamp: stamp, at: now, st: st}
		s.mu.Unlock()
	}
	return st, err
}

// agentNames lists the agents State knows, for messages.
func agentNames(st State) []string {
	var names []string
	for _, a := range st.Agents {
		if a.Agent != agentUnknown {
			names = append(names, a.Agent)
		}
	}
	return names
}

// checkAgent refuses an agent State does not list, and "unknown", which has no switch.
func checkAgent(st State, agent string) error {
	if agent == agentUnknown {
		return userError(http.StatusBadRequest, "the unknown agent (requests without an agent prefix) always follows the master switch: switch the master instead")
	}
	if !slices.ContainsFunc(st.Agents, func(a AgentSwitch) bool { return a.Agent == agent }) {
		return userError(http.StatusNotFound, "unknown agent %q: use %s", agent, strings.Join(agentNames(st), ", "))
	}
	return nil
}

// controlError wraps an error of a Control setter: its message is written for the user
// (Control's contract). A refusal (ErrRefused: the environment overrides the switch,
// config.toml does not load or cannot be written) is 409 Conflict, which handle logs at
// debug level only; any other error says the service failed (500, logged as an error).
func controlError(what string, err error) error {
	code := http.StatusInternalServerError
	if errors.Is(err, ErrRefused) {
		code = http.StatusConflict
	}
	return &httpError{Code: code, Msg: what + ": " + err.Error(), Err: err}
}

// afterSwitch answers a switch: the fresh live fragment for htmx, else 303 to the overview.
func (s *Server) afterSwitch(w http.ResponseWriter, r *http.Request) error {
	if isHTMX(r) {
		return s.renderLive(w, r, "")
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}

// setAgent answers POST /ui/agents/{agent} with mode=on|off|follow.
func (s *Server) setAgent(w http.ResponseWriter, r *http.Request) error {
	agent := chi.URLParam(r, "agent")
	if err := checkAgent(s.control.State(), agent); err != nil {
		return err
	}
	mode := Mode(r.PostFormValue("mode"))
	switch mode {
	case ModeOn, ModeOff, ModeFollow:
	default:
		return userError(http.StatusBadRequest, "mode must be on, off or follow, not %q", truncate(string(mode), 20))
	}
	if err := s.control.SetAgent(agent, mode); err != nil {
		return controlError("could not switch "+agent, err)
	}
	s.log.Info("trimming switched from the dashboard", "agent", agent, "mode", mode)
	return s.afterSwitch(w, r)
}

// setMaster answers POST /ui/master with enabled=true|false.
func (s *Server) setMaster(w http.ResponseWriter, r *http.Request) error {
	return s.setSwitch(w, r, "enabled", func(on bool) error { return s.control.SetMaster(on) }, "could not switch the master switch", "master switch set from the dashboard")
}

// setPaused answers POST /ui/pause with paused=true|false.
func (s *Server) setPaused(w http.ResponseWriter, r *http.Request) error {
	return s.setSwitch(w, r, "paused", func(paused bool) error { return s.control.SetPaused(paused) }, "could not change pause", "pause set from the dashboard")
}

// setSwitch reads the form field (true|false), hands it to set, logs logMsg with the
// value under the field's name and answers as afterSwitch does; a failed set answers
// with failMsg.
func (s *Server) setSwitch(w http.ResponseWriter, r *http.Request, field string, set func(bool) error, failMsg, logMsg string) error {
	v, err := formBool(r, field)
	if err != nil {
		return err
	}
	if err := set(v); err != nil {
		return controlError(failMsg, err)
	}
	s.log.Info(logMsg, field, v)
	return s.afterSwitch(w, r)
}

func formBool(r *http.Request, name string) (bool, error) {
	switch v := r.PostFormValue(name); v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		return false, userError(http.StatusBadRequest, "%s must be true or false, not %q", name, truncate(v, 20))
	}
}

// truncate cuts s to n runes for an error message.
func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
