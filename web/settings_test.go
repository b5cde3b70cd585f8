package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

func TestSettings(t *testing.T) {
	h := newHarness(t)
	d := doc(t, h.get("/ui/settings"), http.StatusOK)
	form := one(t, d, "settings-form")
	if m, a := form.AttrOr("method", ""), form.AttrOr("action", ""); m != "post" || a != "/ui/settings" {
		t.Errorf("form %s %s", m, a)
	}
	if v := form.Find(`input[name="csrf"]`).AttrOr("value", ""); v != h.srv.csrf {
		t.Error("settings form carries no CSRF token")
	}
	for _, s := range h.ctl.State().Settings {
		if form.Find(`[name="`+s.Key+`"]`).Length() != 1 {
			t.Errorf("no input named %s", s.Key)
		}
	}
	if v := form.Find(`input[name="context_proxy.port"]`).AttrOr("value", ""); v != "4100" {
		t.Errorf("port input value %q, want the saved 4100", v)
	}
	if p := form.Find(`input[name="context_proxy.trim_at_tokens"]`).AttrOr("placeholder", ""); p != "default: 120000" {
		t.Errorf("trim_at_tokens placeholder %q", p)
	}
	if !strings.Contains(text(one(t, d, "setting-context_proxy.port")), "restart needed") {
		t.Error("port does not say it needs a restart")
	}
	logInput := form.Find(`input[name="context_proxy.log_level"]`)
	if _, ro := logInput.Attr("readonly"); !ro || logInput.AttrOr("value", "") != "debug" {
		t.Errorf("env-overridden key: %s, want read-only with the value in effect", outer(logInput))
	}
	if !strings.Contains(text(one(t, d, "setting-env-context_proxy.log_level")), "CONTEXT_PROXY_LOG_LEVEL") {
		t.Error("env-overridden key does not name its variable")
	}
	var legends []string
	form.Find("legend").Each(func(_ int, l *goquery.Selection) { legends = append(legends, text(l)) })
	if strings.Join(legends, " ") != "[context_proxy] [context_store] [compaction]" {
		t.Errorf("sections %q", legends)
	}

	all := func(over map[string]string) url.Values {
		v := url.Values{"csrf": {h.srv.csrf}}
		for _, s := range h.ctl.State().Settings {
			v.Set(s.Key, s.Saved)
		}
		for k, x := range over {
			v.Set(k, x)
		}
		return v
	}

	// Nothing changed.
	w := h.post("/ui/settings", all(nil), nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/settings?unchanged=1" {
		t.Fatalf("unchanged: %d %q", w.Code, w.Header().Get("Location"))
	}
	one(t, doc(t, h.get("/ui/settings?unchanged=1"), http.StatusOK), "settings-unchanged")

	// Invalid: 422, nothing saved, the message under the input, the typed value kept.
	h.ctl.invalid = map[string]string{
		"context_proxy.trim_at_tokens": "must be an integer of at least 1000, not \"12k\"",
		"context_proxy.hidden":         "conflicts with trim_at_tokens",
	}
	d = doc(t, h.post("/ui/settings", all(map[string]string{"context_proxy.trim_at_tokens": "12k"}), nil), http.StatusUnprocessableEntity)
	if msg := text(one(t, d, "settings-invalid")); !strings.Contains(msg, "context_proxy.hidden: conflicts with trim_at_tokens") {
		t.Errorf("an error on a key the form does not show is lost: %q", msg)
	}
	if msg := text(one(t, d, "setting-error-context_proxy.trim_at_tokens")); !strings.Contains(msg, "at least 1000") {
		t.Errorf("field error %q", msg)
	}
	in := d.Find(`input[name="context_proxy.trim_at_tokens"]`)
	if in.AttrOr("value", "") != "12k" || in.AttrOr("aria-invalid", "") != "true" {
		t.Errorf("invalid input %s", outer(in))
	}
	if d.Find(`[data-testid^="setting-error-"]`).Length() != 1 {
		t.Error("errors shown on keys that had none")
	}
	if len(h.ctl.saved) != 0 {
		t.Fatal("saved despite the error")
	}

	// Valid: only changed keys go to Control (the env-overridden one never), then 303 and a notice.
	h.ctl.invalid = nil
	w = h.post("/ui/settings", all(map[string]string{
		"context_proxy.trim_at_tokens": "90000", "context_proxy.port": "4200", "context_proxy.log_level": "error",
	}), nil)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("save: %d %s", w.Code, w.Body)
	}
	if got := h.ctl.saved; len(got) != 1 || len(got[0]) != 2 || got[0]["context_proxy.trim_at_tokens"] != "90000" || got[0]["context_proxy.port"] != "4200" {
		t.Errorf("SaveSettings got %v, want the two changed keys", got)
	}
	d = doc(t, h.get(w.Header().Get("Location")), http.StatusOK)
	if msg := text(one(t, d, "settings-saved")); !strings.Contains(msg, "context_proxy.trim_at_tokens, context_proxy.port") {
		t.Errorf("saved notice %q", msg)
	}
	if msg := text(one(t, d, "settings-restart")); !strings.Contains(msg, "context_proxy.port") || strings.Contains(msg, "trim_at_tokens") {
		t.Errorf("restart notice %q, want the port only", msg)
	}
	if v := d.Find(`input[name="context_proxy.trim_at_tokens"]`).AttrOr("value", ""); v != "90000" {
		t.Errorf("after saving, the input shows %q", v)
	}

	// Control fails (e.g. config.toml not writable): 500 with its message.
	h.ctl.failSet = errors.New("config.toml: permission denied: make it writable")
	d = doc(t, h.post("/ui/settings", all(map[string]string{"context_store.ttl_days": "9"}), nil), http.StatusInternalServerError)
	if msg := text(one(t, d, "error")); !strings.Contains(msg, "permission denied: make it writable") {
		t.Errorf("error %q", msg)
	}
}

// formOf collects what the settings form would post as shown: every input's and select's
// value by name.
func formOf(t *testing.T, d *goquery.Document) url.Values {
	t.Helper()
	v := url.Values{}
	form := one(t, d, "settings-form")
	form.Find("input[name]").Each(func(_ int, s *goquery.Selection) {
		v.Set(s.AttrOr("name", ""), s.AttrOr("value", ""))
	})
	form.Find("select[name]").Each(func(_ int, s *goquery.Selection) {
		if _, disabled := s.Attr("disabled"); !disabled {
			v.Set(s.AttrOr("name", ""), s.Find("option[selected]").AttrOr("value", ""))
		}
	})
	return v
}

// TestSettingsStaleForm: a page loaded before another change (a hand edit of config.toml,
// another tab) sends only what the user changed on it, so it does not undo that change; a
// key both changed is a conflict (409, nothing saved).
func TestSettingsStaleForm(t *testing.T) {
	h := newHarness(t)
	stale := formOf(t, doc(t, h.get("/ui/settings"), http.StatusOK))
	if stale.Get("orig.context_proxy.port") != "4100" || !stale.Has("orig.context_store.ttl_days") || stale.Has("orig.context_proxy.log_level") {
		t.Fatalf("hidden originals: %v", stale)
	}
	// Meanwhile config.toml changes: ttl_days = 9.
	if err := h.ctl.SaveSettings(map[string]string{"context_store.ttl_days": "9"}); err != nil {
		t.Fatal(err)
	}
	h.ctl.saved = nil

	// The stale page changes only the port: ttl_days stays 9.
	form := cloneValues(stale)
	form.Set("context_proxy.port", "4200")
	w := h.post("/ui/settings", form, nil)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("save: %d %s", w.Code, w.Body)
	}
	if got := h.ctl.saved; len(got) != 1 || len(got[0]) != 1 || got[0]["context_proxy.port"] != "4200" {
		t.Errorf("SaveSettings got %v, want the port only (not ttl_days back to the page's empty value)", got)
	}
	if s := savedOf(h, "context_store.ttl_days"); s != "9" {
		t.Errorf("ttl_days %q after the stale save, want 9", s)
	}

	// The stale page changes ttl_days too: a conflict, nothing saved.
	h.ctl.saved = nil
	form = cloneValues(stale)
	form.Set("context_store.ttl_days", "12")
	form.Set("context_proxy.trim_at_tokens", "90000")
	d := doc(t, h.post("/ui/settings", form, nil), http.StatusConflict)
	if msg := text(one(t, d, "error")); !strings.Contains(msg, "config.toml changed since this page was loaded") ||
		!strings.Contains(msg, `context_store.ttl_days was unset on the page, is "9" now`) || !strings.Contains(msg, "reload") {
		t.Errorf("conflict message %q", msg)
	}
	if len(h.ctl.saved) != 0 {
		t.Errorf("saved despite the conflict: %v", h.ctl.saved)
	}
	// The same value both ways is no conflict.
	form = cloneValues(stale)
	form.Set("context_store.ttl_days", "9")
	if w := h.post("/ui/settings", form, nil); w.Code != http.StatusSeeOther || len(h.ctl.saved) != 0 {
		t.Errorf("the same change as config.toml's: %d, saved %v", w.Code, h.ctl.saved)
	}

	// A 422 keeps the page's originals, so the fixed form still stands on them.
	h.ctl.invalid = map[string]string{"context_proxy.trim_at_tokens": "must be an integer"}
	form = cloneValues(stale)
	form.Set("context_proxy.trim_at_tokens", "12k")
	d = doc(t, h.post("/ui/settings", form, nil), http.StatusUnprocessableEntity)
	if got := formOf(t, d); got.Get("orig.context_store.ttl_days") != "" || got.Get("orig.context_proxy.port") != "4100" {
		t.Errorf("originals after a 422: ttl_days %q port %q, want the first page's", got.Get("orig.context_store.ttl_days"), got.Get("orig.context_proxy.port"))
	}
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func savedOf(h *harness, key string) string {
	for _, s := range h.ctl.State().Settings {
		if s.Key == key {
			return s.Saved
		}
	}
	return "?"
}
