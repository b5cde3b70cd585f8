package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/web/ui"
)

// The health record on the dashboard and the control API (issue 15 item 2, issue 16 item
// 1): the overview's banner and counts (ui.HealthSection), GET /api/health, and the client
// `smarter-compact status` reads a running service's record with.

// healthLabels name the kinds on the overview.
var healthLabels = map[store.HealthKind]string{
	store.HealthUpstream:   "Upstream errors",
	store.HealthStoreWrite: "Store write failures",
	store.HealthFailOpen:   "Fail-opens",
	store.HealthTrimStuck:  "Over the threshold after a trim",
}

// healthView formats the record for the overview at now.
func healthView(s store.HealthSnapshot, now time.Time) ui.Health {
	v := ui.Health{Since: s.Since.UTC().Format("2006-01-02 15:04 UTC"), SaveError: s.SaveError}
	for _, ks := range s.Kinds {
		c := ui.HealthCount{Kind: string(ks.Kind), Label: healthLabels[ks.Kind], Count: ui.Commas(ks.Count), Active: ks.Active}
		if c.Label == "" {
			c.Label = string(ks.Kind)
		}
		if !ks.Last.IsZero() {
			c.Last = clock(ks.Last, now)
		}
		v.Kinds = append(v.Kinds, c)
	}
	for _, a := range s.ActiveEntries() {
		p := ui.HealthProblem{Kind: string(a.Kind), Title: HealthTitle(a.Kind, a.Key),
			Count: ui.Plural(a.Count, "time", "times") + " since " + clock(a.First, now), Last: clock(a.Last, now),
			Text: a.Text, Hint: a.Hint, Session: a.Session}
		if a.Session != "" {
			p.SessionHref = sessionHref(a.Session)
		}
		v.Problems = append(v.Problems, p)
	}
	return v
}

// HealthTitle says in a few words what fails: "Upstream api.anthropic.com fails", for the
// overview, the tray and `status`.
func HealthTitle(kind store.HealthKind, key string) string {
	switch kind {
	case store.HealthUpstream:
		return "Upstream " + key + " fails"
	case store.HealthStoreWrite:
		if key == "blobs" {
			return "The store cannot write blobs"
		}
		return "The store cannot write session " + key
	case store.HealthFailOpen:
		return "Requests fail open: " + key
	case store.HealthTrimStuck:
		return "Session " + key + " stays over the trim threshold"
	}
	return string(kind) + " " + key
}

// clock is t as "15:04:05 UTC", with the date when it is not today's (UTC).
func clock(t time.Time, now time.Time) string {
	t = t.UTC()
	if y, m, d := t.Date(); now.UTC().Year() != y || now.UTC().Month() != m || now.UTC().Day() != d {
		return t.Format("2006-01-02 15:04:05 UTC")
	}
	return t.Format("15:04:05 UTC")
}

// apiHealth answers GET /api/health: the store's health record (store.HealthSnapshot).
func (s *Server) apiHealth(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, s.root.Health().Snapshot())
	return nil
}

// FetchHealth calls GET <base>/api/health with the bearer token within ClientTimeout (no
// proxy, no redirects) and returns the running service's health record. Errors: a
// *ServiceDownError when nothing listens; one that Is ErrNotTaken on 401 or an answer that
// is not the control API's.
func FetchHealth(ctx context.Context, base, token string) (store.HealthSnapshot, error) {
	var snap store.HealthSnapshot
	resp, b, err := callControl(ctx, http.MethodGet, base+"/api/health", nil, token, 1<<20)
	if err != nil {
		return snap, err
	}
	if resp.StatusCode != http.StatusOK {
		return snap, &notTakenError{fmt.Sprintf("GET /api/health answered %s: %s", resp.Status, strings.TrimSpace(truncate(string(b), 200)))}
	}
	if err := json.Unmarshal(b, &snap); err != nil || snap.Kinds == nil {
		return snap, &notTakenError{fmt.Sprintf("GET /api/health: unexpected answer %q (an older smarter-compact?)", truncate(string(b), 200))}
	}
	return snap, nil
}
