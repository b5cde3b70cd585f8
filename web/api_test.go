package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("answer %q is not the JSON expected: %v", body, err)
	}
	return v
}

func TestAPI(t *testing.T) {
	h := newHarness(t)
	seedOverview(t, h)

	w := h.api("GET", "/api/status", "")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status: %d %q %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	st := decode[struct {
		Version string        `json:"version"`
		Master  bool          `json:"master"`
		Agents  []AgentSwitch `json:"agents"`
		Last24h struct {
			Trims       int   `json:"trims"`
			TokensSaved int64 `json:"tokensSaved"`
			FailOpens   int   `json:"failOpens"`
			Usage       struct {
				Requests int `json:"requests"`
			} `json:"usage"`
		} `json:"last24h"`
		Today *struct {
			Trims    int64 `json:"trims"`
			Requests int64 `json:"requests"`
		} `json:"today"`
	}](t, w.Body.Bytes())
	if st.Version != "v1.2.3-test" || !st.Master || len(st.Agents) != 4 {
		t.Errorf("state part: %+v", st)
	}
	if st.Last24h.Trims != 2 || st.Last24h.TokensSaved != 90000 || st.Last24h.FailOpens != 1 || st.Last24h.Usage.Requests != 3 {
		t.Errorf("last24h: %+v, want the overview's numbers", st.Last24h)
	}
	if st.Today == nil {
		t.Error("no today")
	}

	w = h.api("GET", "/api/agents", "")
	ag := decode[struct{ Agents []AgentSwitch }](t, w.Body.Bytes())
	if len(ag.Agents) != 4 || ag.Agents[0].Agent != "claude-code" || ag.Agents[0].Mode != ModeOn || !ag.Agents[0].Trimming {
		t.Errorf("agents %+v", ag.Agents)
	}

	// The CLI's body ({"mode"}) and the older {"enabled"}.
	for _, c := range []struct {
		body     string
		mode     Mode
		trimming bool
	}{
		{`{"mode":"off"}`, ModeOff, false},
		{`{"mode":"follow"}`, ModeFollow, true},
		{`{"enabled":false}`, ModeOff, false},
		{`{"enabled":true}`, ModeOn, true},
	} {
		w := h.api("POST", "/api/agents/codex", c.body)
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", c.body, w.Code, w.Body)
		}
		got := decode[struct {
			AgentSwitch
			Enabled bool `json:"enabled"`
		}](t, w.Body.Bytes())
		if got.Agent != "codex" || got.Mode != c.mode || got.Trimming != c.trimming || got.Enabled != c.trimming {
			t.Errorf("%s: answer %+v", c.body, got)
		}
		if h.ctl.lastCall() != "agent codex="+string(c.mode) {
			t.Errorf("%s: control got %q", c.body, h.ctl.lastCall())
		}
	}

	w = h.api("POST", "/api/pause", `{"paused":true}`)
	if w.Code != 200 || !h.ctl.State().Paused || !strings.Contains(w.Body.String(), `"paused":true`) {
		t.Errorf("pause: %d %s", w.Code, w.Body)
	}

	for _, c := range []struct {
		name, path, body, ctype string
		code                    int
		msg                     string
	}{
		{"form body", "/api/agents/codex", `mode=on`, "application/x-www-form-urlencoded", 415, "Content-Type: application/json"},
		{"text/plain", "/api/pause", `{"paused":true}`, "text/plain", 415, "Content-Type: application/json"},
		{"bad mode", "/api/agents/codex", `{"mode":"maybe"}`, "", 400, "mode must be on, off or follow"},
		{"both", "/api/agents/codex", `{"mode":"on","enabled":true}`, "", 400, "not both"},
		{"empty object", "/api/agents/codex", `{}`, "", 400, "the body must be"},
		{"unknown field", "/api/agents/codex", `{"mode":"on","x":1}`, "", 400, "the body must be"},
		{"two objects", "/api/pause", `{"paused":true}{"paused":false}`, "", 400, "the body must be"},
		{"not JSON", "/api/pause", `paused`, "", 400, "the body must be"},
		{"no paused", "/api/pause", `{}`, "", 400, `{"paused": true|false}`},
		{"unknown agent", "/api/agents/cursor", `{"mode":"on"}`, "", 404, "unknown agent"},
		{"the unknown agent", "/api/agents/unknown", `{"mode":"on"}`, "", 400, "follows the master switch"},
		{"too big (413)", "/api/pause", `{"paused":true,"pad":"` + strings.Repeat("x", apiBodyLimit) + `"}`, "", 413, "the body is over 4096 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hdr := http.Header{"Authorization": {"Bearer " + testToken}, "Content-Type": {"application/json"}}
			if c.ctype != "" {
				hdr.Set("Content-Type", c.ctype)
			}
			w := h.do("POST", c.path, c.body, hdr)
			if w.Code != c.code {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, c.code)
			}
			e := decode[struct{ Error string }](t, w.Body.Bytes())
			if !strings.Contains(e.Error, c.msg) {
				t.Errorf("error %q, want %q", e.Error, c.msg)
			}
		})
	}
}
