package app

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/web"
)

// state is the one runtime state of the service (DESIGN.md §9; issue 6): the trimming
// switches, pause and the settings. The proxy asks it per request (proxy.Toggles); the
// dashboard, /api, the tray and the CLI change it (web.Control); config.toml is where it
// lives, so a change survives a restart, and a hand edit of that file is picked up by the
// watcher (run).
//
// Every setter validates, saves config.toml with the comment-preserving editor
// (installer.SetKeysIn and installer.RemoveKeysIn over installer.TOMLDoc), then applies the result: the switches at once,
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
	// build compares the executable on disk with the running build (proxy_stale); nil
	// outside serve. Set before the state is shared.
	build *buildCheck
	// start is the config as resolved at start: the values in effect of the settings that
	// need a restart.
	start config.Config

	// on is the effective trimming per agent (claude-code, codex, opencode, unknown),
	// replaced whole on every change: Enabled reads it without a lock.
	on atomic.Pointer[map[string]bool]

	mu           sync.Mutex
	px           *proxy.Proxy     // nil until attach
	onRowsStored func(sid string) // kept in every proxy.Settings pushed
	cur          config.Config    // in effect; Proxy.OnRowsStored always nil here
	file         config.File      // config.toml as last loaded
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
	Path     string // config.toml (config.Path), existing or not
	Explicit bool   // the user named Path: it must exist
	Port     int    // serve --port; 0: the config's port
	StoreDir string // the context store, for State
	Tray     string // the tray's state at start, e.g. "off (--no-tray)"
	Sys      system
}

// newState loads config.toml at o.Path (the same config.Load serve always ran) and builds the
// state from it. An invalid config is an error: the service does not start with it.
func newState(o stateOptions) (*state, error) {
	// seen is the content loaded, read once: an edit after it differs, and the watcher
	// applies it.
	rc, before, err := config.LoadText(o.Path, o.Explicit, o.Sys.getenv)
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
	cfg := rc.Config
	if s.portFlag {
		cfg.Port = o.Port
	}
	s.port = cfg.Port
	cfg.Proxy.OnRowsStored = nil
	s.start, s.cur, s.file = cfg, cfg, rc.File
	s.storeEnabled()
	s.wiring = s.checkWiring()
	return s, nil
}

// config returns the configuration in effect (the values of the settings applied live;
// the others as at start are in s.start).
func (s *state) config() config.Config {
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
func (s *state) proxySettings(c config.Config) proxy.Settings {
	ps := c.Proxy
	ps.OnRowsStored = s.onRowsStored
	c.RecallSettings(&ps)
	return ps
}

// Enabled reports whether the proxy trims agent's next request (proxy.Toggles); an agent
// name we do not know is treated as "unknown". It takes no lock.
func (s *state) Enabled(agent string) bool {
	m := *s.on.Load()
	if v, ok := m[agent]; ok {
		return v
	}
	return m[config.AgentUnknown]
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
	for i, agent := range slices.Concat(config.ConfiguredAgents, []string{config.AgentUnknown}) {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(agent + "=" + onOffWord(s.Enabled(agent)))
	}
	return sb.String()
}

// State returns a copy of the state (web.Control).
func (s *state) State() web.State {
	installed, stale := s.build.check() // a stat, outside s.mu
	s.mu.Lock()
	defer s.mu.Unlock()
	sw := config.SwitchesOf(&s.file.ContextProxy, s.getenv)
	base := "http://127.0.0.1:" + strconv.Itoa(s.port)
	st := web.State{
		Version:     version,
		Addr:        base,
		StartedAt:   s.started,
		ConfigPath:  s.path,
		StoreDir:    s.storeDir,
		Master:      sw.Master,
		Paused:      sw.Paused,
		Tray:        s.tray,
		ConfigError: s.configErr,
		Revision:    s.rev,
		Settings:    s.settings(),
	}
	if sw.Env != "" {
		st.EnvLock = config.KeyEnabled.Env + "=" + sw.Env
	}
	if s.build != nil {
		st.Build, st.InstalledBuild, st.ProxyStale = s.build.running, installed, stale
		if stale {
			st.RestartCommand = restartCommand
		}
	}
	for _, agent := range slices.Concat(config.ConfiguredAgents, []string{config.AgentUnknown}) {
		on, why := trimming(sw, agent)
		a := web.AgentSwitch{Agent: agent, Mode: web.Mode(sw.Mode(agent)), Trimming: on, Why: why, Route: base + routeOf(agent)}
		if agent == config.AgentUnknown {
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

// trimming is rule with the reason in words.
func trimming(sw config.Switches, agent string) (on bool, why string) {
	on, source := sw.Rule(agent)
	switch source {
	case config.SourcePaused:
		return on, "off: paused"
	case config.KeyEnabled.Env:
		return on, fmt.Sprintf("%s: %s=%s overrides", onOffWord(on), config.KeyEnabled.Env, sw.Env)
	case config.SourceSaved:
		return on, onOffWord(on) + " (saved)"
	}
	return on, onOffWord(on) + " (follows the master switch)"
}
