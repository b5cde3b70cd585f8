package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/store"
)

// TestOverviewHealth: a failure reported to the store's health record shows on the overview
// as a banner with its text and what to do, and the next 1 s poll answers the fresh fragment
// though no session file changed (a failing store writes none).
func TestOverviewHealth(t *testing.T) {
	h := newHarness(t)
	d := doc(t, h.get("/"), http.StatusOK)
	if d.Find(testID("health-banner")).Length() != 0 {
		t.Fatal("a banner with nothing failing")
	}
	one(t, d, "health")
	if got := text(one(t, d, "health-count-upstream").Find("dd")); got != "0" {
		t.Errorf("upstream count %q", got)
	}
	live := one(t, d, "live")
	poll, _ := live.Attr("hx-get")
	if w := h.htmx(poll); w.Code != http.StatusNoContent {
		t.Fatalf("the poll before any failure: %d, want 204", w.Code)
	}

	h.root.Health().Report(store.Problem{Kind: store.HealthUpstream, Key: "api.anthropic.com", Class: "connection_refused",
		Text: "POST /v1/messages: dial tcp 127.0.0.1:9: connect: connection refused", Hint: "Check that the upstream URL is right."})
	w := h.htmx(poll)
	if w.Code != http.StatusOK {
		t.Fatalf("the poll after a failure: %d, want the fresh fragment", w.Code)
	}
	d = doc(t, w, http.StatusOK)
	banner := one(t, d, "health-banner")
	if role, _ := banner.Attr("role"); role != "alert" {
		t.Errorf("banner role %q, want alert", role)
	}
	p := one(t, d, "health-problem-upstream")
	for _, want := range []string{"Upstream api.anthropic.com fails", "1 time since", "connection refused", "Check that the upstream URL is right."} {
		if !strings.Contains(text(p), want) {
			t.Errorf("the problem %q lacks %q", text(p), want)
		}
	}
	if got := text(one(t, d, "health-count-upstream").Find("dd")); !strings.HasPrefix(got, "1 last at ") {
		t.Errorf("upstream count %q", got)
	}
	checkCSPClean(t, d)

	// a success clears the banner
	h.root.Health().Resolve(store.HealthUpstream, "api.anthropic.com")
	if d := doc(t, h.get("/"), http.StatusOK); d.Find(testID("health-banner")).Length() != 0 {
		t.Error("the banner stays after the upstream answered")
	}
}

func TestAPIHealth(t *testing.T) {
	h := newHarness(t)
	h.root.Health().Report(store.Problem{Kind: store.HealthStoreWrite, Key: "s1", Session: "s1", Class: "disk_full", Text: "session s1: database or disk is full", Hint: "free space", Wide: true})
	for _, path := range []string{"/api/health", "/api/status"} {
		w := h.api("GET", path, "")
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, w.Code, w.Body)
		}
		var got struct {
			store.HealthSnapshot
			Health *store.HealthSnapshot `json:"health"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		snap := got.HealthSnapshot
		if got.Health != nil {
			snap = *got.Health
		}
		if sw := snap.Kind(store.HealthStoreWrite); snap.Active != 1 || sw.Count != 1 || sw.Entries[0].Class != "disk_full" || sw.Entries[0].Hint != "free space" {
			t.Errorf("%s health: %+v", path, snap)
		}
	}
	if w := h.do("GET", "/api/health", "", nil); w.Code != http.StatusUnauthorized {
		t.Errorf("/api/health without the token: %d, want 401", w.Code)
	}

	srv := httptest.NewServer(h.h)
	defer srv.Close()
	snap, err := FetchHealth(t.Context(), srv.URL, testToken)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Active != 1 {
		t.Errorf("FetchHealth: %+v", snap)
	}
	if _, err := FetchHealth(t.Context(), srv.URL, "wrong"); err == nil {
		t.Error("FetchHealth with a wrong token succeeded")
	}
}
