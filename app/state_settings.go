package app

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/web"
)

// settings lists config.Settings with their values. Callers hold s.mu.
func (s *state) settings() []web.Setting {
	def := config.Defaults()
	out := make([]web.Setting, 0, len(config.Settings))
	for _, d := range config.Settings {
		c := &s.cur
		if !d.Live {
			c = &s.start
		}
		set := web.Setting{
			Key: d.ID(), Label: d.Label, Value: d.Value(c), Saved: config.SavedText(d.Saved(&s.file)),
			Default: d.Value(&def), Accepts: d.Key.Accepts, Help: d.Help, Restart: !d.Live, Kind: d.Kind,
		}
		if _, ok := config.EnvOverride(d.Key, s.getenv); ok {
			set.Env = d.Key.Env
		}
		out = append(out, set)
	}
	return out
}

// tomlValue turns what the user typed into the TOML text of d's value, checking its type;
// the range is checked by the resolver, as for the file.
func tomlValue(d config.Setting, raw string) (string, error) {
	bad := fmt.Errorf("%s = %s: must be %s", d.Key, raw, d.Key.Accepts)
	switch d.Kind {
	case "int":
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return "", bad
		}
		return strconv.FormatInt(n, 10), nil
	case "float":
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return "", bad
		}
		return config.FloatText(f), nil
	case "bool":
		switch strings.ToLower(raw) {
		case "true", "false":
			return strings.ToLower(raw), nil
		}
		return "", fmt.Errorf("%s = %s: must be true or false", d.Key, raw)
	}
	return installer.TOMLString(raw), nil
}

// SaveSettings validates, saves and applies settings (web.Control): values maps
// "<section>.<name>" to the value as typed ("" removes the key). The new config.toml text is
// built in memory and resolved exactly as config.Load would (the same messages as the CLI);
// a *web.SettingsError names each bad key, and nothing is saved then. A key whose
// environment variable is set is refused unless its value is unchanged.
func (s *state) SaveSettings(values map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fields, sets, dels := s.settingEdits(values)
	if len(fields) > 0 {
		return &web.SettingsError{Fields: fields}
	}
	old, text, err := s.editedText(sets, dels)
	if err != nil {
		return err
	}
	rc, err := config.ResolveText(s.path, text, s.getenv)
	if err := settingErrors(s.path, values, rc, err, fields); err != nil {
		return err
	}
	if len(fields) > 0 {
		return &web.SettingsError{Fields: fields}
	}
	if err := s.save(old, text, rc); err != nil {
		return err
	}
	s.log.Info("settings saved", "keys", strings.Join(slices.Sorted(maps.Keys(values)), " "))
	return nil
}

// settingEdits sorts values into the keys to set and to remove, by section; fields holds
// what is wrong with the others, by id. s.mu is held.
func (s *state) settingEdits(values map[string]string) (fields map[string]string, sets map[string][]installer.TOMLKey, dels map[string][]string) {
	fields, sets, dels = map[string]string{}, map[string][]installer.TOMLKey{}, map[string][]string{}
	for _, id := range slices.Sorted(maps.Keys(values)) {
		raw := strings.TrimSpace(values[id])
		i := slices.IndexFunc(config.Settings, func(d config.Setting) bool { return d.ID() == id })
		if i < 0 {
			fields[id] = fmt.Sprintf("%q is not a setting here: the settings page changes %s", id, strings.Join(config.SettingIDs(), ", "))
			continue
		}
		d := config.Settings[i]
		if v, ok := config.EnvOverride(d.Key, s.getenv); ok {
			// A form that posts every field sends the value it shows: no change, no error.
			if raw != config.SavedText(d.Saved(&s.file)) && raw != d.Value(&s.cur) && raw != d.Value(&s.start) {
				fields[id] = fmt.Sprintf("%s=%s is set in the service's environment and overrides %s: change or unset the variable where the service starts, then restart it", d.Key.Env, v, d.Key)
			}
			continue
		}
		if raw == "" {
			dels[d.Key.Section] = append(dels[d.Key.Section], d.Key.Name)
			continue
		}
		text, err := tomlValue(d, raw)
		if err != nil {
			fields[id] = err.Error()
			continue
		}
		sets[d.Key.Section] = append(sets[d.Key.Section], installer.TOMLKey{Name: d.Key.Name, Value: text})
	}
	return fields, sets, dels
}

// editedText is config.toml's text now (old, nil without a file) and with sets and dels
// applied, sections in order.
func (s *state) editedText(sets map[string][]installer.TOMLKey, dels map[string][]string) (old, text []byte, err error) {
	old, err = config.ReadText(s.path)
	if err != nil {
		return nil, nil, fmt.Errorf("read config %s: %v: nothing saved", s.path, err)
	}
	text = old
	for _, section := range slices.Sorted(maps.Keys(sets)) {
		if text, err = installer.SetKeysIn(text, section, sets[section]); err != nil {
			return nil, nil, web.Refuse(fmt.Errorf("config %s: [%s]: %v: nothing saved", s.path, section, err))
		}
	}
	for _, section := range slices.Sorted(maps.Keys(dels)) {
		if text == nil {
			break // no file: nothing to remove
		}
		if text, err = installer.RemoveKeysIn(text, section, dels[section], true, true, false); err != nil {
			return nil, nil, web.Refuse(fmt.Errorf("config %s: [%s]: %v: nothing saved", s.path, section, err))
		}
	}
	return old, text, nil
}

// settingErrors adds to fields the asked keys that rc (resolved with err) warns about or
// refuses. It returns an error when the text does not load for a reason beyond those keys.
func settingErrors(path string, values map[string]string, rc config.Resolved, err error, fields map[string]string) error {
	// A value that would fall back to its default with a warning is refused here: the
	// form says what is wrong instead of saving something that does not apply.
	for _, k := range rc.WarnKeys {
		id := k.Section + "." + k.Name
		if raw, asked := values[id]; asked {
			fields[id] = fmt.Sprintf("%s = %s: must be %s", k, strings.TrimSpace(raw), k.Accepts)
		}
	}
	if err == nil {
		return nil
	}
	kes, all := config.KeyErrors(err)
	for _, ke := range kes {
		id := ke.Key.Section + "." + ke.Key.Name
		if _, asked := values[id]; asked {
			fields[id] = ke.Detail
		} else {
			all = false
		}
	}
	if !all || len(fields) == 0 {
		return web.Refuse(fmt.Errorf("config %s does not load, so nothing was saved: fix it by hand first:\n%w", path, err))
	}
	return nil
}
