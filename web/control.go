package web

import (
	"context"
	"errors"
	"time"
)

// Mode is one agent's trimming switch as saved in config.toml [context_proxy.agents]
// (DESIGN.md §5): on, off, or following the master switch ([context_proxy] enabled) when
// the agent has no key.
type Mode string

const (
	ModeOn     Mode = "on"
	ModeOff    Mode = "off"
	ModeFollow Mode = "follow"
)

// Wiring is what the installer finds in an agent's own config files.
type Wiring string

const (
	WiringWired        Wiring = "wired"         // the agent's config points at our route
	WiringNotWired     Wiring = "not wired"     // the agent is installed, its config does not point here
	WiringNotInstalled Wiring = "not installed" // no config and no executable found
	WiringUnknown      Wiring = "unknown"       // the check failed; Detail says why
)

// AgentSwitch is one agent's row on the overview and in GET /api/status.
type AgentSwitch struct {
	Agent string `json:"agent"` // claude-code, codex, opencode, unknown
	Mode  Mode   `json:"mode"`  // the saved switch; "unknown" is always ModeFollow
	// Trimming is the effective state the proxy applies to the agent's next request: the
	// mode, the master switch, pause and CONTEXT_PROXY_ENABLED together.
	Trimming bool `json:"trimming"`
	// Why says in words why Trimming is what it is, e.g. "on (saved)", "off: paused",
	// "on (follows the master switch)", "off: CONTEXT_PROXY_ENABLED=0 overrides".
	Why          string `json:"why"`
	Wiring       Wiring `json:"wiring"`
	WiringDetail string `json:"wiringDetail,omitempty"` // the file checked, or the error
	Route        string `json:"route"`                  // e.g. http://127.0.0.1:4100/claude-code
}

// Setting is one config.toml key the settings page shows and edits.
type Setting struct {
	Key     string `json:"key"`           // "<section>.<name>", e.g. "context_proxy.trim_at_tokens"
	Label   string `json:"label"`         // short human name
	Value   string `json:"value"`         // the value in effect, as TOML text without quotes ("" when unset and no default)
	Saved   string `json:"saved"`         // the value written in config.toml, "" when the key is absent
	Default string `json:"default"`       // the default when the key is absent
	Accepts string `json:"accepts"`       // what the key accepts, e.g. "an integer of at least 1"
	Help    string `json:"help"`          // one sentence on what it does
	Env     string `json:"env,omitempty"` // the environment variable that overrides it, when set now
	Restart bool   `json:"restart"`       // a change takes effect only after a restart of the service
	Kind    string `json:"kind"`          // "int", "float", "bool", "string"
}

// State is the one runtime state the dashboard, the tray, the CLI and the proxy share
// (DESIGN.md §9). It is a copy: changing it changes nothing.
type State struct {
	Version    string        `json:"version"`
	Addr       string        `json:"addr"` // http://127.0.0.1:<port>
	StartedAt  time.Time     `json:"startedAt"`
	ConfigPath string        `json:"configPath"` // the config.toml saves go to
	StoreDir   string        `json:"storeDir"`
	Master     bool          `json:"master"`            // [context_proxy] enabled, default true
	Paused     bool          `json:"paused"`            // pause all: every agent passes through untouched
	EnvLock    string        `json:"envLock,omitempty"` // e.g. "CONTEXT_PROXY_ENABLED=0" when the environment overrides every switch
	Agents     []AgentSwitch `json:"agents"`            // claude-code, codex, opencode, unknown
	Settings   []Setting     `json:"settings"`
	Tray       string        `json:"tray"` // "running", "headless: <why>", "off (--no-tray)"
	// ConfigError is why the last hand edit of config.toml did not load ("" when it did):
	// the service keeps the state it had before that edit until the file is fixed.
	ConfigError string `json:"configError,omitempty"`
	// ProxyStale is set when the executable on disk is another build than the one this
	// service runs (an upgrade in place; the seed's proxy_stale): Build is the running
	// build, InstalledBuild the file's (proxy:<12 hex>), RestartCommand what restarts it.
	ProxyStale     bool   `json:"proxy_stale"`
	Build          string `json:"build,omitempty"`
	InstalledBuild string `json:"installedBuild,omitempty"`
	RestartCommand string `json:"restartCommand,omitempty"`
	// Revision grows by one on every change; clients compare it to know whether to redraw.
	Revision uint64 `json:"revision"`
}

// SettingsError is returned by Control.SaveSettings when values do not validate: one
// message per key, nothing saved.
type SettingsError struct {
	Fields map[string]string // key → what is wrong and what the key accepts
}

func (e *SettingsError) Error() string {
	return "settings not saved: some values are not valid"
}

// ErrRefused marks a Control setter's error as a refusal: the change cannot be made in the
// service's present situation and nothing changed, e.g. CONTEXT_PROXY_ENABLED overrides the
// switches, config.toml does not load, or config.toml is read-only. The message says what to
// do. The dashboard and /api answer it 409 Conflict with that message and do not log it as a
// failure of the service; any other setter error is a 500. Test with errors.Is; app marks its
// errors with Refuse.
var ErrRefused = errors.New("the change was refused")

// Refuse marks err as a refusal (errors.Is(err, ErrRefused)); its message is unchanged. A nil
// err stays nil.
func Refuse(err error) error {
	if err == nil {
		return nil
	}
	return refusedError{err}
}

type refusedError struct{ err error }

func (e refusedError) Error() string   { return e.err.Error() }
func (e refusedError) Unwrap() []error { return []error{e.err, ErrRefused} }

// Control is the one state in app (DESIGN.md §9) as the dashboard and /api see it; app
// implements it. Every setter validates, saves config.toml without losing the user's
// comments, applies the change to the running proxy at once and bumps Revision. An error
// says what to do; nothing is half-applied. An error that wraps ErrRefused (Refuse) is the
// user's to resolve (409); any other is the service's (500).
type Control interface {
	State() State
	// SetAgent saves one agent's mode ("unknown" cannot be set: it follows the master).
	SetAgent(agent string, mode Mode) error
	// SetMaster saves [context_proxy] enabled.
	SetMaster(on bool) error
	// SetPaused saves [context_proxy] paused.
	SetPaused(paused bool) error
	// SaveSettings validates then saves the given keys ("<section>.<name>" → TOML value
	// text as typed, "" removes the key so the default applies). A *SettingsError lists
	// invalid values; nothing is saved then.
	SaveSettings(values map[string]string) error
	// Changed returns a channel that receives (without blocking the sender; a missed send
	// is coalesced) after every change, including a hand edit of config.toml picked up
	// by the file watcher. It is closed when ctx ends.
	Changed(ctx context.Context) <-chan struct{}
}
