package web

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/smarter-compact/smarter-compact/web/ui"
)

// settings answers GET /ui/settings; ?saved=<keys> and ?unchanged=1 are the notices of the
// POST that redirected here.
func (s *Server) settings(w http.ResponseWriter, r *http.Request) error {
	st := s.control.State()
	p := settingsPage(s.page("Settings", "settings"), st, nil, nil, nil)
	q := r.URL.Query()
	if saved := q.Get("saved"); saved != "" {
		for _, k := range strings.Split(saved, ",") {
			i := slices.IndexFunc(st.Settings, func(x Setting) bool { return x.Key == k })
			if i < 0 {
				continue // a stale or hand-made link: name only keys that exist
			}
			p.Saved = append(p.Saved, k)
			if st.Settings[i].Restart {
				p.Restart = append(p.Restart, k)
			}
		}
	}
	p.Unchanged = q.Get("unchanged") == "1"
	return s.render(w, r, http.StatusOK, ui.SettingsView(p))
}

// saveSettings answers POST /ui/settings: it sends Control.SaveSettings the keys whose value
// differs from the one the page showed (the hidden orig.<key> fields; without them, the saved
// value now), so a page loaded before another change (another tab, a hand edit of
// config.toml) does not undo it. A key the user changed that config.toml also changed since
// the page loaded is a conflict: 409, nothing saved, reload. Success redirects (303) to the
// page with a notice; invalid values answer 422 with the form as typed and one message per
// key.
func (s *Server) saveSettings(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return userError(http.StatusBadRequest, "the settings form could not be read: reload the page and try again")
	}
	st := s.control.State()
	typed := map[string]string{}
	origs := map[string]string{}
	changed := map[string]string{}
	var keys, conflicts []string
	for _, set := range st.Settings {
		if set.Env != "" {
			continue // the environment wins; the input is read-only
		}
		vals, ok := r.PostForm[set.Key]
		if !ok {
			continue
		}
		v := strings.TrimSpace(vals[0])
		typed[set.Key] = v
		orig := set.Saved
		if o, ok := r.PostForm["orig."+set.Key]; ok {
			orig = strings.TrimSpace(o[0])
			origs[set.Key] = orig
		}
		switch {
		case v == orig, v == set.Saved:
			// Not changed on the page (whatever config.toml says now), or already so.
		case set.Saved != orig:
			conflicts = append(conflicts, fmt.Sprintf("%s was %s on the page, is %s now", set.Key, shownValue(orig), shownValue(set.Saved)))
		default:
			changed[set.Key] = v
			keys = append(keys, set.Key)
		}
	}
	if len(conflicts) > 0 {
		return userError(http.StatusConflict, "config.toml changed since this page was loaded (%s): nothing was saved; reload the settings page (/ui/settings) and make your change again",
			strings.Join(conflicts, "; "))
	}
	if len(changed) == 0 {
		http.Redirect(w, r, "/ui/settings?unchanged=1", http.StatusSeeOther)
		return nil
	}
	err := s.control.SaveSettings(changed)
	var se *SettingsError
	switch {
	case errors.As(err, &se):
		p := settingsPage(s.page("Settings", "settings"), st, typed, origs, se.Fields)
		p.Invalid = true
		for _, k := range slices.Sorted(maps.Keys(se.Fields)) {
			if !slices.ContainsFunc(st.Settings, func(x Setting) bool { return x.Key == k }) {
				p.Problems = append(p.Problems, k+": "+se.Fields[k]) // a key the form does not show
			}
		}
		return s.render(w, r, http.StatusUnprocessableEntity, ui.SettingsView(p))
	case err != nil:
		return controlError("could not save the settings", err)
	}
	s.log.Info("settings saved from the dashboard", "keys", strings.Join(keys, ","))
	http.Redirect(w, r, "/ui/settings?saved="+url.QueryEscape(strings.Join(keys, ",")), http.StatusSeeOther)
	return nil
}

// shownValue is a saved value for a message: quoted, or "unset".
func shownValue(v string) string {
	if v == "" {
		return "unset"
	}
	return strconv.Quote(truncate(v, 60))
}

// settingsPage builds the form from State().Settings, grouped by config.toml table in the
// order State lists them; typed (as posted), origs (the orig.<key> fields posted) and errors
// (per key) come from a failed save.
func settingsPage(page ui.Page, st State, typed, origs, errs map[string]string) ui.SettingsPage {
	p := ui.SettingsPage{Page: page, ConfigPath: orNone(st.ConfigPath)}
	index := map[string]int{}
	for _, set := range st.Settings {
		section, _ := splitKey(set.Key)
		i, ok := index[section]
		if !ok {
			i = len(p.Sections)
			index[section] = i
			p.Sections = append(p.Sections, ui.SettingSection{Name: section})
		}
		f := ui.SettingField{
			Key: set.Key, ID: "set-" + strings.NewReplacer(".", "-", "_", "-").Replace(set.Key), Label: set.Label,
			Value: set.Saved, Orig: set.Saved, Default: set.Default, InEffect: set.Value, Accepts: set.Accepts, Help: set.Help,
			Env: set.Env, Restart: set.Restart, Kind: set.Kind, Error: errs[set.Key],
		}
		if v, ok := typed[set.Key]; ok {
			f.Value = v
		}
		if v, ok := origs[set.Key]; ok {
			f.Orig = v // the page the user edits still stands on what it showed first
		}
		if set.Env != "" {
			f.Value = set.Value // what the variable sets, shown read-only
		}
		if implied := cmp.Or(f.Value, set.Default); f.InEffect == implied {
			f.InEffect = "" // say "in effect" only when it is not what the field shows
		}
		p.Sections[i].Fields = append(p.Sections[i].Fields, f)
	}
	return p
}

// splitKey splits "<section>.<name>" at the last dot.
func splitKey(key string) (section, name string) {
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}
