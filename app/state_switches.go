package app

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/web"
)

// envLockError is the setters' answer while CONTEXT_PROXY_ENABLED decides every agent: a
// refusal (web.ErrRefused).
func envLockError(sw config.Switches) error {
	return web.Refuse(fmt.Errorf("%s=%s is set in the service's environment and overrides every agent switch: unset it where the service starts (the login service's environment, or the shell that ran 'serve') and restart the service; pause still works", config.KeyEnabled.Env, sw.Env))
}

// SetAgent saves one agent's mode (web.Control): on and off write [context_proxy.agents]
// <agent> = true|false, follow removes the key so the agent follows [context_proxy] enabled.
func (s *state) SetAgent(agent string, mode web.Mode) error {
	switch {
	case agent == config.AgentUnknown:
		return fmt.Errorf("the unknown agent has no switch of its own: it follows the master switch ([context_proxy] enabled)")
	case !slices.Contains(config.ConfiguredAgents, agent):
		return fmt.Errorf("unknown agent %q: use %s", agent, strings.Join(config.ConfiguredAgents, ", "))
	case mode != web.ModeOn && mode != web.ModeOff && mode != web.ModeFollow:
		return fmt.Errorf("mode %q: use on, off or follow", mode)
	}
	return s.edit(func(old []byte) ([]byte, error) {
		return switchText(old, []string{agent}, mode)
	}, "agent switched", "agent", agent, "mode", string(mode))
}

// switchText is config.toml's text old (nil: no file) with mode saved for agents:
// [context_proxy.agents] <agent> = true|false for on and off, the keys removed for follow.
// The service's setters and the CLI (with the service down) save a switch through it.
func switchText(old []byte, agents []string, mode web.Mode) ([]byte, error) {
	if mode == web.ModeFollow {
		if old == nil {
			return nil, nil
		}
		return installer.RemoveKeysIn(old, "context_proxy.agents", agents, true, true, false)
	}
	keys := make([]installer.TOMLKey, len(agents))
	for i, a := range agents {
		keys[i] = installer.TOMLKey{Name: a, Value: installer.TOMLBool(mode == web.ModeOn)}
	}
	return installer.SetKeysIn(old, "context_proxy.agents", keys)
}

// SetMaster saves [context_proxy] enabled (web.Control).
func (s *state) SetMaster(on bool) error {
	return s.edit(func(old []byte) ([]byte, error) {
		return installer.SetKeysIn(old, "context_proxy", []installer.TOMLKey{{Name: config.KeyEnabled.Name, Value: installer.TOMLBool(on)}})
	}, "master switch", "enabled", on)
}

// SetPaused saves [context_proxy] paused (web.Control). It works under
// CONTEXT_PROXY_ENABLED too: pause wins over every switch.
//
// Pause is the way out when something goes wrong, so it works while config.toml does not
// load: it changes only the paused line, saves that, and applies the pause alone, keeping
// every other setting as it runs (the config error stays shown). When not even that line
// can be edited (the file is not valid TOML), the pause applies for this run only and the
// config error says so.
func (s *state) SetPaused(paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := config.ReadText(s.path)
	if err != nil {
		return fmt.Errorf("read config %s: %v: nothing changed", s.path, err)
	}
	text, err := installer.SetKeysIn(old, "context_proxy", []installer.TOMLKey{{Name: config.KeyPaused.Name, Value: installer.TOMLBool(paused)}})
	if err != nil {
		if _, lerr := config.ResolveText(s.path, old, s.getenv); lerr == nil {
			// The file loads, but the key is written in a form the editor does not handle.
			return web.Refuse(fmt.Errorf("config %s: %v: nothing changed", s.path, err))
		}
		s.applyPaused(paused)
		s.configErr = fmt.Sprintf("config %s does not load, so pause is applied to this run only and not saved (fix the file, then set pause again): %v", s.path, err)
		s.bump()
		s.log.Warn("pause applied but not saved: config.toml does not load", "paused", paused, "config", s.path, "err", err)
		return nil
	}
	rc, err := config.ResolveText(s.path, text, s.getenv)
	if err == nil {
		if err := s.save(old, text, rc); err != nil {
			return err
		}
		s.log.Info("pause", "paused", paused)
		return nil
	}
	// Another key does not load: save the paused line alone and apply the pause alone.
	if err := s.write(old, text); err != nil {
		return err
	}
	s.saved(text)
	s.applyPaused(paused)
	s.configErr = err.Error()
	s.bump()
	s.log.Warn("pause saved and applied; the rest of config.toml does not load, so the other settings stay as they run", "paused", paused, "config", s.path, "err", err)
	return nil
}

// applyPaused makes paused the pause in effect, every other setting as it is. Callers hold
// s.mu.
func (s *state) applyPaused(paused bool) {
	s.file.ContextProxy.Paused = &paused
	s.cur.Agents = config.SwitchesOf(&s.file.ContextProxy, s.getenv).Effective()
	s.storeEnabled()
}

// edit runs one switch change (an agent's, the master): change turns config.toml's text
// (nil: no file) into the new text, which must load; then save and apply. It is refused
// while CONTEXT_PROXY_ENABLED overrides the switches. (Pause has its own path: SetPaused.)
func (s *state) edit(change func(old []byte) ([]byte, error), what string, attrs ...any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sw := config.SwitchesOf(&s.file.ContextProxy, s.getenv); sw.Env != "" {
		return envLockError(sw)
	}
	old, err := config.ReadText(s.path)
	if err != nil {
		return fmt.Errorf("read config %s: %v: nothing changed", s.path, err)
	}
	text, err := change(old)
	if err != nil {
		return web.Refuse(fmt.Errorf("config %s: %v: nothing changed", s.path, err))
	}
	rc, err := config.ResolveText(s.path, text, s.getenv)
	if err != nil {
		return web.Refuse(fmt.Errorf("config %s does not load, so nothing changed: fix it by hand first:\n%w", s.path, err))
	}
	if err := s.save(old, text, rc); err != nil {
		return err
	}
	s.log.Info(what, attrs...)
	return nil
}

// save writes text over old (when they differ) and applies rc, the text resolved. Callers
// hold s.mu.
func (s *state) save(old, text []byte, rc config.Resolved) error {
	if err := s.write(old, text); err != nil {
		return err
	}
	s.saved(text)
	changed := s.apply(rc)
	if s.configErr != "" { // the file on disk is the text just resolved: it loads
		s.configErr = ""
		changed = true
	}
	if changed {
		s.bump()
	}
	return nil
}

// write writes text over old when they differ. Callers hold s.mu.
func (s *state) write(old, text []byte) error {
	if bytes.Equal(old, text) && (old == nil) == (text == nil) {
		return nil
	}
	if err := checkWritable(s.path); err != nil {
		return err
	}
	if err := installer.ReplaceFile(s.path, text); err != nil {
		return saveFailed(s.path, err)
	}
	return nil
}

// saveFailed is write's error when config.toml at path could not be replaced (err from
// installer.ReplaceFile): a refusal (web.ErrRefused, the dashboard's 409) when the file
// system denied the write or is read-only, a plain error otherwise; both say nothing changed.
func saveFailed(path string, err error) error {
	err = fmt.Errorf("cannot save %s: %w: nothing changed (make the file and its folder writable, or edit it by hand)", path, err)
	if errors.Is(err, fs.ErrPermission) || isReadOnlyFS(err) {
		return web.Refuse(err)
	}
	return err
}

// saved records text as config.toml's content: the watcher does not reload it, but reloads
// any other content it finds (a writer that replaced the file right after this save).
// Callers hold s.mu.
func (s *state) saved(text []byte) {
	s.seen = sumOf(text)
	s.saves++
}

// checkWritable refuses a config.toml that exists but may not be written: a file without
// the owner's write bit (chmod u-w, Windows' read-only attribute) is a user's wish even for
// root, and one the process cannot open for writing fails the rename-over anyway on some
// systems.
func checkWritable(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot save %s: %v: nothing changed", path, err)
	}
	if fi.Mode().Perm()&0o200 == 0 {
		return web.Refuse(fmt.Errorf("%s is read-only (mode %04o): nothing changed; make it writable (chmod u+w) to change settings here, or edit it by hand", path, fi.Mode().Perm()))
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return web.Refuse(fmt.Errorf("%s cannot be written (%v): nothing changed; make it writable to change settings here, or edit it by hand", path, err))
	}
	return f.Close()
}

// apply makes rc the state in effect: the switches at once, the proxy's settings when they
// changed. It reports whether anything changed. Callers hold s.mu.
func (s *state) apply(rc config.Resolved) bool {
	cfg := rc.Config
	if s.portFlag {
		cfg.Port = s.port
	}
	cfg.Proxy.OnRowsStored = nil
	if reflect.DeepEqual(cfg, s.cur) && reflect.DeepEqual(rc.File, s.file) {
		return false
	}
	for _, w := range cfg.Warnings {
		if !slices.Contains(s.cur.Warnings, w) {
			s.log.Warn(w)
		}
	}
	if s.px != nil && (!reflect.DeepEqual(cfg.Proxy, s.cur.Proxy) || config.RecallChanged(cfg, s.cur)) {
		s.px.SetSettings(s.proxySettings(cfg))
	}
	s.cur, s.file = cfg, rc.File
	s.storeEnabled()
	return true
}

// isReadOnlyFS reports a write refused because the file system is mounted read-only.
func isReadOnlyFS(err error) bool { return errors.Is(err, syscall.EROFS) }
