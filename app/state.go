package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smarter-compact/smarter-compact/assets"
	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy"
	"github.com/smarter-compact/smarter-compact/web"
)

// Intervals of the state's background loop (state.run).
const (
	// configPoll is how often config.toml is read for a hand edit: a change shows
	// everywhere within about this long (plus configSettle).
	configPoll = time.Second
	// configSettle is how long a changed config.toml must stay unchanged before the watcher
	// applies it, so that a file caught half-written (an editor that writes in place, a
	// script's `>`) is not applied as the defaults it would resolve to.
	configSettle = 200 * time.Millisecond
	// wiringEvery is how often, in polls, the agents' config files are read again for
	// AgentSwitch.Wiring (State is asked every second by each open dashboard).
	wiringEvery = 10
)

// state is the one runtime state of the service (DESIGN.md §9; issue 6): the trimming
// switches, pause and the settings. The proxy asks it per request (proxy.Toggles); the
// dashboard, /api, the tray and the CLI change it (web.Control); config.toml is where it
// lives, so a change survives a restart, and a hand edit of that file is picked up by the
// watcher (run).
//
// Every setter validates, saves config.toml with the comment-preserving editor
// (setConfigKeys, removeConfigKeys), then applies the result: the switches at once,
// the settings through (*proxy.Proxy).SetSettings, and bumps Revision. When the file cannot
// be saved (read-only, a directory that cannot be written) nothing is applied.
//
// An invalid hand edit keeps the running state; the error is logged once and shown in
// web.State.ConfigError until the file loads again. So does a config.toml that is removed:
// the running settings stay until it is back. Safe for concurrent use.
type state struct {
	path     string // config.toml: saves go here, the watcher reads it
	explicit bool   // the user named path (--config, SMARTER_COMPACT_CONFIG): it must exist
	getenv   func(string) string
	sys      system // home, configDir, getenv: the agents' wiring checks
	log      *slog.Logger
	port     int  // the port served
	portFlag bool // serve --port set port: it wins over the file on every reload
	storeDir string
	started  time.Time
	// start is the config as resolved at start: the values in effect of the settings that
	// need a restart.
	start Config

	// on is the effective trimming per agent (claude-code, codex, opencode, unknown),
	// replaced whole on every change: Enabled reads it without a lock.
	on atomic.Pointer[map[string]bool]

	mu           sync.Mutex
	px           *proxy.Proxy     // nil until attach
	onRowsStored func(sid string) // kept in every proxy.Settings pushed
	cur          Config           // in effect; Proxy.OnRowsStored always nil here
	file         fileConfig       // config.toml as last loaded
	configErr    string           // why the last hand edit did not load, "" when it did
	// seen is config.toml's content as last loaded, saved or found not to load: the
	// watcher reloads when the file's content differs (the content, not its size and mtime,
	// which a write in the same clock tick can leave as they were).
	seen   contentSum
	saves  uint64            // counts saves, so a poll that read the file before one drops what it read
	settle time.Duration     // configSettle; tests may shorten it
	tray   string            // web.State.Tray
	rev    uint64            // web.State.Revision
	wiring map[string]wiring // per configured agent, refreshed every wiringEvery polls
	subs   map[chan struct{}]struct{}
}

// wiring is one agent's AgentSwitch.Wiring and WiringDetail.
type wiring struct {
	state  web.Wiring
	detail string
}

// stateOptions are newState's inputs.
type stateOptions struct {
	Path     string // config.toml (ConfigPath), existing or not
	Explicit bool   // the user named Path: it must exist
	Port     int    // serve --port; 0: the config's port
	StoreDir string // the context store, for State
	Tray     string // the tray's state at start, e.g. "off (--no-tray)"
	Sys      system
}

// newState loads config.toml at o.Path (the same LoadConfig serve always ran) and builds the
// state from it. An invalid config is an error: the service does not start with it.
func newState(o stateOptions) (*state, error) {
	// The content before the load: an edit during it differs, and the watcher applies it.
	before, _ := readConfigText(o.Path)
	rc, err := loadConfig(o.Path, o.Explicit, o.Sys.getenv)
	if err != nil {
		return nil, err
	}
	s := &state{
		path:     o.Path,
		explicit: o.Explicit,
		getenv:   o.Sys.getenv,
		sys:      o.Sys,
		log:      o.Sys.log,
		portFlag: o.Port != 0,
		storeDir: o.StoreDir,
		started:  time.Now(),
		seen:     sumOf(before),
		settle:   configSettle,
		tray:     o.Tray,
		rev:      1,
		subs:     map[chan struct{}]struct{}{},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	cfg := rc.cfg
	if s.portFlag {
		cfg.Port = o.Port
	}
	s.port = cfg.Port
	cfg.Proxy.OnRowsStored = nil
	s.start, s.cur, s.file = cfg, cfg, rc.file
	s.storeEnabled()
	s.wiring = s.checkWiring()
	return s, nil
}

// config returns the configuration in effect (the values of the settings applied live;
// the others as at start are in s.start).
func (s *state) config() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// attach makes the state push every settings change to px; onRowsStored (nil: none) is
// kept in every proxy.Settings it pushes. Call it before run and before serving.
func (s *state) attach(px *proxy.Proxy, onRowsStored func(sid string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.px, s.onRowsStored = px, onRowsStored
	px.SetSettings(s.proxySettings(s.cur))
}

// proxySettings is c's proxy settings with the embedder's hook.
func (s *state) proxySettings(c Config) proxy.Settings {
	ps := c.Proxy
	ps.OnRowsStored = s.onRowsStored
	return ps
}

// Enabled reports whether the proxy trims agent's next request (proxy.Toggles); an agent
// name we do not know is treated as "unknown". It takes no lock.
func (s *state) Enabled(agent string) bool {
	m := *s.on.Load()
	if v, ok := m[agent]; ok {
		return v
	}
	return m[agentUnknown]
}

// storeEnabled publishes s.cur.Agents for Enabled. Callers hold s.mu (or own s alone).
func (s *state) storeEnabled() {
	m := maps.Clone(s.cur.Agents)
	s.on.Store(&m)
}

// agentsString lists the effective switches for the log, e.g.
// "claude-code=on codex=off opencode=on unknown=on".
func (s *state) agentsString() string {
	var sb strings.Builder
	for i, agent := range slices.Concat(configuredAgents, []string{agentUnknown}) {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(agent + "=" + onOffWord(s.Enabled(agent)))
	}
	return sb.String()
}

// State returns a copy of the state (web.Control).
func (s *state) State() web.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	sw := switchesOf(&s.file.ContextProxy, s.getenv)
	base := "http://127.0.0.1:" + strconv.Itoa(s.port)
	st := web.State{
		Version:     version,
		Addr:        base,
		StartedAt:   s.started,
		ConfigPath:  s.path,
		StoreDir:    s.storeDir,
		Master:      sw.master,
		Paused:      sw.paused,
		Tray:        s.tray,
		ConfigError: s.configErr,
		Revision:    s.rev,
		Settings:    s.settings(),
	}
	if sw.env != "" {
		st.EnvLock = keyEnabled.env + "=" + sw.env
	}
	for _, agent := range slices.Concat(configuredAgents, []string{agentUnknown}) {
		on, why := sw.trimming(agent)
		a := web.AgentSwitch{Agent: agent, Mode: sw.mode(agent), Trimming: on, Why: why, Route: base + routeOf(agent)}
		if agent == agentUnknown {
			a.Route = base // the unprefixed routes; an unknown agent has no config to check
		} else {
			w := s.wiring[agent]
			a.Wiring, a.WiringDetail = w.state, w.detail
		}
		st.Agents = append(st.Agents, a)
	}
	return st
}

// SetTray records the tray's state for web.State.Tray: "running", "headless: <why>".
func (s *state) SetTray(status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tray != status {
		s.tray = status
		s.bump()
	}
}

// Changed returns a channel that receives after every change (web.Control); a send that
// would block is dropped, so several changes in a row may arrive as one. It is closed when
// ctx ends.
func (s *state) Changed(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		close(ch)
		return ch
	}
	s.subs[ch] = struct{}{}
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.subs, ch)
		close(ch) // under s.mu: bump never sends on a closed channel
	})
	return ch
}

// bump counts a change and tells the subscribers. Callers hold s.mu.
func (s *state) bump() {
	s.rev++
	for ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default: // one is pending already: coalesced
		}
	}
}

// envLockError is the setters' answer while CONTEXT_PROXY_ENABLED decides every agent: a
// refusal (web.ErrRefused).
func envLockError(sw switchState) error {
	return web.Refuse(fmt.Errorf("%s=%s is set in the service's environment and overrides every agent switch: unset it where the service starts (the login service's environment, or the shell that ran 'serve') and restart the service; pause still works", keyEnabled.env, sw.env))
}

// SetAgent saves one agent's mode (web.Control): on and off write [context_proxy.agents]
// <agent> = true|false, follow removes the key so the agent follows [context_proxy] enabled.
func (s *state) SetAgent(agent string, mode web.Mode) error {
	switch {
	case agent == agentUnknown:
		return fmt.Errorf("the unknown agent has no switch of its own: it follows the master switch ([context_proxy] enabled)")
	case !slices.Contains(configuredAgents, agent):
		return fmt.Errorf("unknown agent %q: use %s", agent, strings.Join(configuredAgents, ", "))
	case mode != web.ModeOn && mode != web.ModeOff && mode != web.ModeFollow:
		return fmt.Errorf("mode %q: use on, off or follow", mode)
	}
	return s.edit(func(old []byte) ([]byte, error) {
		if mode == web.ModeFollow {
			if old == nil {
				return nil, nil
			}
			return removeConfigKeys(old, "context_proxy.agents", []string{agent}, true, true, false)
		}
		return setConfigKeys(old, "context_proxy.agents", []configKey{{agent, tomlBool(mode == web.ModeOn)}})
	}, "agent switched", "agent", agent, "mode", string(mode))
}

// SetMaster saves [context_proxy] enabled (web.Control).
func (s *state) SetMaster(on bool) error {
	return s.edit(func(old []byte) ([]byte, error) {
		return setConfigKeys(old, "context_proxy", []configKey{{keyEnabled.name, tomlBool(on)}})
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
	old, err := readConfigText(s.path)
	if err != nil {
		return fmt.Errorf("read config %s: %v: nothing changed", s.path, err)
	}
	text, err := setConfigKeys(old, "context_proxy", []configKey{{keyPaused.name, tomlBool(paused)}})
	if err != nil {
		if _, lerr := resolveConfigText(s.path, old, s.getenv); lerr == nil {
			// The file loads, but the key is written in a form the editor does not handle.
			return web.Refuse(fmt.Errorf("config %s: %v: nothing changed", s.path, err))
		}
		s.applyPaused(paused)
		s.configErr = fmt.Sprintf("config %s does not load, so pause is applied to this run only and not saved (fix the file, then set pause again): %v", s.path, err)
		s.bump()
		s.log.Warn("pause applied but not saved: config.toml does not load", "paused", paused, "config", s.path, "err", err)
		return nil
	}
	rc, err := resolveConfigText(s.path, text, s.getenv)
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
	s.cur.Agents = switchesOf(&s.file.ContextProxy, s.getenv).effective()
	s.storeEnabled()
}

// edit runs one switch change (an agent's, the master): change turns config.toml's text
// (nil: no file) into the new text, which must load; then save and apply. It is refused
// while CONTEXT_PROXY_ENABLED overrides the switches. (Pause has its own path: SetPaused.)
func (s *state) edit(change func(old []byte) ([]byte, error), what string, attrs ...any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sw := switchesOf(&s.file.ContextProxy, s.getenv); sw.env != "" {
		return envLockError(sw)
	}
	old, err := readConfigText(s.path)
	if err != nil {
		return fmt.Errorf("read config %s: %v: nothing changed", s.path, err)
	}
	text, err := change(old)
	if err != nil {
		return web.Refuse(fmt.Errorf("config %s: %v: nothing changed", s.path, err))
	}
	rc, err := resolveConfigText(s.path, text, s.getenv)
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
func (s *state) save(old, text []byte, rc resolved) error {
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
	if err := writeConfigFile(s.path, text); err != nil {
		err = fmt.Errorf("cannot save %s: %v: nothing changed (make the file and its folder writable, or edit it by hand)", s.path, err)
		if errors.Is(err, fs.ErrPermission) || isReadOnlyFS(err) {
			return web.Refuse(err)
		}
		return err
	}
	return nil
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
func (s *state) apply(rc resolved) bool {
	cfg := rc.cfg
	if s.portFlag {
		cfg.Port = s.port
	}
	cfg.Proxy.OnRowsStored = nil
	if reflect.DeepEqual(cfg, s.cur) && reflect.DeepEqual(rc.file, s.file) {
		return false
	}
	for _, w := range cfg.Warnings {
		if !slices.Contains(s.cur.Warnings, w) {
			s.log.Warn(w)
		}
	}
	if s.px != nil && !reflect.DeepEqual(cfg.Proxy, s.cur.Proxy) {
		s.px.SetSettings(s.proxySettings(cfg))
	}
	s.cur, s.file = cfg, rc.file
	s.storeEnabled()
	return true
}

// contentSum is config.toml's content as the watcher compares it: whether the file exists
// and the SHA-256 of its bytes.
type contentSum struct {
	exists bool
	sum    [sha256.Size]byte
}

// sumOf is the contentSum of text as readConfigText returns it (nil: no file).
func sumOf(text []byte) contentSum {
	if text == nil {
		return contentSum{}
	}
	return contentSum{true, sha256.Sum256(text)}
}

// run is the state's background loop until ctx ends: it polls config.toml every
// configPoll for a hand edit, and the agents' wiring every wiringEvery polls.
func (s *state) run(ctx context.Context) {
	t := time.NewTicker(configPoll)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.poll()
		if n%wiringEvery == 0 {
			s.refreshWiring()
		}
	}
}

// poll reloads config.toml when its content differs from what the state last loaded or
// saved, once it has stayed the same for s.settle (a file caught half-written is looked at
// again on the next poll). A file that does not load keeps the state; its error is logged
// once and shown in State until the file is fixed. A file that was removed keeps the state
// too, and says so, until it is back.
func (s *state) poll() {
	text, err := readConfigText(s.path)
	if err != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.configError(fmt.Sprintf("read config %s: %v", s.path, err))
		return
	}
	cur := sumOf(text)
	s.mu.Lock()
	same, saves := cur == s.seen, s.saves
	s.mu.Unlock()
	if same {
		return
	}
	if s.settle > 0 {
		time.Sleep(s.settle)
		again, err := readConfigText(s.path)
		if err != nil || sumOf(again) != cur {
			return // still changing: the next poll looks again
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.saves != saves {
		return // a save since the read, which read the file itself: the next poll compares again
	}
	s.seen = cur
	if !cur.exists {
		s.configError(fmt.Sprintf("config.toml was removed (%s): the running settings stay until it is back or the service restarts", s.path))
		return
	}
	rc, err := resolveConfigText(s.path, text, s.getenv)
	if err != nil {
		s.configError(err.Error())
		return
	}
	changed := s.apply(rc)
	if s.configErr != "" {
		s.configErr = ""
		changed = true
	}
	if changed {
		s.log.Info("config.toml reloaded", "config", s.path, "agents", s.agentsString())
		s.bump()
	}
}

// configError shows msg as the config error, and logs it, when it is new. The state in
// effect stays. Callers hold s.mu.
func (s *state) configError(msg string) {
	if msg == s.configErr {
		return
	}
	s.configErr = msg
	s.log.Warn("config.toml changed but does not load: the service keeps its settings until the file is fixed", "config", s.path, "err", msg)
	s.bump()
}

// refreshWiring reads the agents' config files again and bumps Revision when an agent's
// wiring changed.
func (s *state) refreshWiring() {
	w := s.checkWiring() // outside s.mu: it reads files
	s.mu.Lock()
	defer s.mu.Unlock()
	if !maps.Equal(w, s.wiring) {
		s.wiring = w
		s.bump()
	}
}

// checkWiring judges each agent's wiring with doctor's checks (agentChecks) against this
// service, which answers: an ok check is wired; a stale port, or a Codex provider that is
// defined but not selected, is not wired; an unreadable file is unknown; no route through
// us is not wired, or not installed when the installer finds no trace of the agent.
func (s *state) checkWiring() map[string]wiring {
	checks := agentChecks(s.sys, s.port, true)
	out := make(map[string]wiring, len(configuredAgents))
	for _, agent := range configuredAgents {
		var ok, fail, warn, info []doctorCheck
		for _, c := range checks {
			if c.Name != agent && !strings.HasPrefix(c.Name, agent+" (") {
				continue
			}
			switch c.Status {
			case checkOK:
				ok = append(ok, c)
			case checkFail:
				fail = append(fail, c)
			case checkWarn:
				warn = append(warn, c)
			default:
				info = append(info, c)
			}
		}
		switch {
		case len(warn) > 0 && len(ok) == 0:
			out[agent] = wiring{web.WiringUnknown, warn[0].Message}
		case len(warn) > 0:
			out[agent] = wiring{web.WiringNotWired, warn[0].Message}
		case len(ok) > 0:
			out[agent] = wiring{web.WiringWired, ok[0].Message}
		case len(fail) > 0:
			out[agent] = wiring{web.WiringNotWired, fail[0].Message}
		case len(info) > 0:
			out[agent] = s.notWired(agent, info[0].Message)
		default:
			out[agent] = wiring{web.WiringUnknown, "no check ran"}
		}
	}
	return out
}

// notWired is an agent whose config sends nothing through us: not installed when its config
// file is missing and the installer does not find the agent either (installer.ErrNotInstalled).
func (s *state) notWired(agent, msg string) wiring {
	if !strings.HasPrefix(msg, "not wired (no ") { // the file exists: the agent is there
		return wiring{web.WiringNotWired, msg}
	}
	env, err := installEnv(s.sys, s.port)
	if err != nil {
		return wiring{web.WiringNotWired, msg}
	}
	for _, a := range installer.Agents(assets.OpenCodePlugin()) {
		if a.Name() != agent {
			continue
		}
		if _, err := a.Plan(env); errors.Is(err, installer.ErrNotInstalled) {
			return wiring{web.WiringNotInstalled, err.Error()}
		}
	}
	return wiring{web.WiringNotWired, msg}
}

// settingDef is one key of the settings page.
type settingDef struct {
	k     key
	label string
	help  string
	kind  string // "int", "float", "bool", "string"
	// live: the running service applies a change at once (proxy.SetSettings, or read
	// where used); otherwise it takes a restart.
	live  bool
	value func(c *Config) string  // the value in c as text, "" for none
	saved func(f *fileConfig) any // the file's pointer (*int64, *float64, *bool, *string)
}

// id is the key as the settings form names it: "<section>.<name>".
func (d settingDef) id() string { return d.k.section + "." + d.k.name }

func intText(n int) string { return strconv.Itoa(n) }

func floatText(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// settingDefs are the keys the dashboard's settings page shows, in its order. The agent
// switches, enabled and paused have their own controls.
var settingDefs = []settingDef{
	{keyTrimAtTokens, "Trim at (tokens)", "A request whose estimated prompt exceeds this many tokens is trimmed; empty follows the model (95000 for Haiku, 120000 otherwise).", "int", true,
		func(c *Config) string {
			if c.Proxy.TrimAtTokens == 0 {
				return ""
			}
			return intText(c.Proxy.TrimAtTokens)
		}, func(f *fileConfig) any { return f.ContextProxy.TrimAtTokens }},
	{keyTrimToFraction, "Trim to (fraction)", "How much of the older in-turn steps a trim keeps.", "float", true,
		func(c *Config) string { return floatText(c.Proxy.TrimToFraction) }, func(f *fileConfig) any { return f.ContextProxy.TrimToFraction }},
	{keyCharsPerToken, "Characters per token", "The ratio that estimates a prompt's tokens before a session reports its real usage.", "float", true,
		func(c *Config) string { return floatText(c.Proxy.CharsPerToken) }, func(f *fileConfig) any { return f.ContextProxy.CharsPerToken }},
	{keyCompressOverTokens, "Compress tool results over (tokens)", "Tool results larger than this many estimated tokens are compressed; 0 turns compression off.", "int", true,
		func(c *Config) string { return intText(c.Proxy.CompressOverTokens) }, func(f *fileConfig) any { return f.ContextProxy.CompressOverTokens }},
	{keyStandingInstruction, "Standing instruction", "Adds the instruction that tells the model trimmed turns are saved and how to recall them.", "bool", true,
		func(c *Config) string { return tomlBool(c.Proxy.StandingInstruction) }, func(f *fileConfig) any { return f.ContextProxy.StandingInstruction }},
	{keyPort, "Port", "The loopback port of the proxy, the dashboard and the recall tools; after a change run 'smarter-compact install' to point the agents at it.", "int", false,
		func(c *Config) string { return intText(c.Port) }, func(f *fileConfig) any { return f.ContextProxy.Port }},
	{keyMaxChars, "Recall block size (characters)", "The cap on the recall block in a trim pointer (read and validated; the pointer carries no recall yet).", "int", false,
		func(c *Config) string { return intText(c.CompactionMaxChars) }, func(f *fileConfig) any { return f.Compaction.MaxChars }},
	{keyRecall, "Recall in the trim pointer", "Puts recalled memory in the trim pointer (read and validated; the pointer carries no recall yet).", "bool", false,
		func(c *Config) string { return tomlBool(c.CompactionRecall) }, func(f *fileConfig) any { return f.Compaction.Recall }},
	{keyTTLDays, "Keep sessions (days)", "Sessions idle longer than this are deleted by the daily retention sweep; 0 keeps everything.", "int", true,
		func(c *Config) string { return intText(c.TTLDays) }, func(f *fileConfig) any { return f.ContextStore.TTLDays }},
	{keyEmbeddingModel, "Embedding model", "The model that embeds rows for hybrid search; empty turns vectors off.", "string", false,
		func(c *Config) string { return c.EmbeddingModel }, func(f *fileConfig) any { return f.ContextStore.EmbeddingModel }},
	{keyEmbeddingURL, "Embedding URL", "The OpenAI-compatible embeddings endpoint's base URL.", "string", false,
		func(c *Config) string { return c.EmbeddingURL }, func(f *fileConfig) any { return f.ContextStore.EmbeddingURL }},
	{keyEmbeddingTimeoutS, "Embedding timeout (seconds)", "How long one embeddings call may take.", "int", false,
		func(c *Config) string { return intText(int(c.EmbeddingTimeout / time.Second)) }, func(f *fileConfig) any { return f.ContextStore.EmbeddingTimeoutS }},
	{keyEmbeddingMaxChars, "Embedded characters per row", "How many characters of each row's head are embedded.", "int", false,
		func(c *Config) string { return intText(c.EmbeddingMaxChars) }, func(f *fileConfig) any { return f.ContextStore.EmbeddingMaxChars }},
	{keyUpstreamAnthropic, "Anthropic upstream", "Where Anthropic Messages API requests go (a gateway's base URL chains through it).", "string", true,
		func(c *Config) string { return c.Proxy.Upstreams["anthropic"] }, func(f *fileConfig) any { return f.Upstream.Anthropic }},
	{keyUpstreamOpenAI, "OpenAI upstream", "Where OpenAI Chat Completions and Responses requests go.", "string", true,
		func(c *Config) string { return c.Proxy.Upstreams["openai"] }, func(f *fileConfig) any { return f.Upstream.OpenAI }},
	{keyUpstreamCodex, "Codex upstream", "Where Codex's ChatGPT-login requests go.", "string", true,
		func(c *Config) string { return c.Proxy.Upstreams["codex"] }, func(f *fileConfig) any { return f.Upstream.Codex }},
}

// defaultConfig is the config without a file or environment: the settings' defaults.
var defaultConfig = sync.OnceValue(func() Config {
	rc, err := resolveConfigText("", nil, func(string) string { return "" })
	if err != nil {
		panic("app: the defaults do not resolve: " + err.Error())
	}
	return rc.cfg
})

// savedText is a decoded file value as text without quotes, "" when absent.
func savedText(v any) string {
	switch v := v.(type) {
	case *int64:
		if v != nil {
			return strconv.FormatInt(*v, 10)
		}
	case *float64:
		if v != nil {
			return floatText(*v)
		}
	case *bool:
		if v != nil {
			return tomlBool(*v)
		}
	case *string:
		if v != nil {
			return *v
		}
	}
	return ""
}

// settings lists settingDefs with their values. Callers hold s.mu.
func (s *state) settings() []web.Setting {
	def := defaultConfig()
	out := make([]web.Setting, 0, len(settingDefs))
	for _, d := range settingDefs {
		c := &s.cur
		if !d.live {
			c = &s.start
		}
		set := web.Setting{
			Key: d.id(), Label: d.label, Value: d.value(c), Saved: savedText(d.saved(&s.file)),
			Default: d.value(&def), Accepts: d.k.accepts, Help: d.help, Restart: !d.live, Kind: d.kind,
		}
		if _, ok := envOverride(d.k, s.getenv); ok {
			set.Env = d.k.env
		}
		out = append(out, set)
	}
	return out
}

// envOverride returns the key's environment variable's value when it is set.
func envOverride(k key, getenv func(string) string) (string, bool) {
	if k.env == "" {
		return "", false
	}
	v := strings.TrimSpace(getenv(k.env))
	return v, v != ""
}

// tomlValue turns what the user typed into the TOML text of d's value, checking its type;
// the range is checked by the resolver, as for the file.
func (d settingDef) tomlValue(raw string) (string, error) {
	bad := fmt.Errorf("%s = %s: must be %s", d.k, raw, d.k.accepts)
	switch d.kind {
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
		return floatText(f), nil
	case "bool":
		switch strings.ToLower(raw) {
		case "true", "false":
			return strings.ToLower(raw), nil
		}
		return "", fmt.Errorf("%s = %s: must be true or false", d.k, raw)
	}
	return tomlString(raw), nil
}

// SaveSettings validates, saves and applies settings (web.Control): values maps
// "<section>.<name>" to the value as typed ("" removes the key). The new config.toml text is
// built in memory and resolved exactly as LoadConfig would (the same messages as the CLI);
// a *web.SettingsError names each bad key, and nothing is saved then. A key whose
// environment variable is set is refused unless its value is unchanged.
func (s *state) SaveSettings(values map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fields := map[string]string{}
	sets := map[string][]configKey{}
	dels := map[string][]string{}
	for _, id := range slices.Sorted(maps.Keys(values)) {
		raw := strings.TrimSpace(values[id])
		i := slices.IndexFunc(settingDefs, func(d settingDef) bool { return d.id() == id })
		if i < 0 {
			fields[id] = fmt.Sprintf("%q is not a setting here: the settings page changes %s", id, strings.Join(settingIDs(), ", "))
			continue
		}
		d := settingDefs[i]
		if v, ok := envOverride(d.k, s.getenv); ok {
			// A form that posts every field sends the value it shows: no change, no error.
			if raw != savedText(d.saved(&s.file)) && raw != d.value(&s.cur) && raw != d.value(&s.start) {
				fields[id] = fmt.Sprintf("%s=%s is set in the service's environment and overrides %s: change or unset the variable where the service starts, then restart it", d.k.env, v, d.k)
			}
			continue
		}
		if raw == "" {
			dels[d.k.section] = append(dels[d.k.section], d.k.name)
			continue
		}
		text, err := d.tomlValue(raw)
		if err != nil {
			fields[id] = err.Error()
			continue
		}
		sets[d.k.section] = append(sets[d.k.section], configKey{d.k.name, text})
	}
	if len(fields) > 0 {
		return &web.SettingsError{Fields: fields}
	}

	old, err := readConfigText(s.path)
	if err != nil {
		return fmt.Errorf("read config %s: %v: nothing saved", s.path, err)
	}
	text := old
	for _, section := range slices.Sorted(maps.Keys(sets)) {
		if text, err = setConfigKeys(text, section, sets[section]); err != nil {
			return web.Refuse(fmt.Errorf("config %s: [%s]: %v: nothing saved", s.path, section, err))
		}
	}
	for _, section := range slices.Sorted(maps.Keys(dels)) {
		if text == nil {
			break // no file: nothing to remove
		}
		if text, err = removeConfigKeys(text, section, dels[section], true, true, false); err != nil {
			return web.Refuse(fmt.Errorf("config %s: [%s]: %v: nothing saved", s.path, section, err))
		}
	}
	rc, err := resolveConfigText(s.path, text, s.getenv)
	// A value that would fall back to its default with a warning is refused here: the
	// form says what is wrong instead of saving something that does not apply.
	for _, k := range rc.warnKeys {
		id := k.section + "." + k.name
		if raw, asked := values[id]; asked {
			fields[id] = fmt.Sprintf("%s = %s: must be %s", k, strings.TrimSpace(raw), k.accepts)
		}
	}
	if err != nil {
		kes, all := keyErrors(err)
		for _, ke := range kes {
			id := ke.key.section + "." + ke.key.name
			if _, asked := values[id]; asked {
				fields[id] = ke.detail
			} else {
				all = false
			}
		}
		if !all || len(fields) == 0 {
			return web.Refuse(fmt.Errorf("config %s does not load, so nothing was saved: fix it by hand first:\n%w", s.path, err))
		}
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

func settingIDs() []string {
	ids := make([]string, len(settingDefs))
	for i, d := range settingDefs {
		ids[i] = d.id()
	}
	return ids
}
