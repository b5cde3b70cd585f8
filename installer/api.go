package installer

// The installer's public shape (DESIGN.md §8; seed 004, InstallDiff). This file is the
// contract between the edit engine (edit_*.go, engine.go), the agents (claude.go,
// codex.go, opencode.go), the login service (service*.go) and the commands in app.

import (
	"encoding/json"
	"os"
	"time"
)

// Env is where an install acts. Every path is absolute; tests point Home and ConfigDir at
// temporary directories, so nothing here reads the process environment by itself.
type Env struct {
	Home      string // the user's home directory
	ConfigDir string // os.UserConfigDir(): ~/.config, ~/Library/Application Support, %APPDATA%
	// Getenv reads the environment (CODEX_HOME, XDG_CONFIG_HOME, OPENCODE_CONFIG_DIR, …);
	// nil means none is set.
	Getenv func(string) string
	Port   int    // the proxy's port on 127.0.0.1
	Exe    string // absolute path of the smarter-compact executable (hooks, MCP servers)
	// StateDir holds the install diffs and snapshots: <ConfigDir>/smarter-compact/install.
	StateDir string
	Now      func() time.Time
}

// Agent wires one coding agent. Plan reads the agent's files and returns the edits that
// wire it; it writes nothing. An agent that is not installed returns ErrNotInstalled
// (wrapped, with a line saying what was looked for).
type Agent interface {
	Name() string // "claude-code", "codex", "opencode"
	Plan(env Env) (*AgentPlan, error)
	// Files lists every file Plan may touch, existing or not (tier 2 of uninstall looks
	// for their snapshots).
	Files(env Env) []string
}

// AgentPlan is what installing one agent changes.
type AgentPlan struct {
	Agent string
	Files []FileEdit
	// Upstreams maps an API family ("anthropic", "openai", "codex") to a base URL the
	// agent's config pointed at before we replaced it: the proxy chains to it
	// (DESIGN.md §5).
	Upstreams map[string]string
	// Notes are lines for the user (e.g. "OpenCode's ChatGPT login cannot be routed").
	Notes []string
}

// FileEdit is one file's planned change: its bytes before (nil when absent) and after, and
// the operations that turned one into the other, recorded in the install diff so that
// uninstall can undo exactly them.
type FileEdit struct {
	Path   string
	Before []byte
	After  []byte
	Mode   os.FileMode // the mode to write with: the existing file's, else 0600
	Ops    []Op
}

// Op is one recorded change to a file.
//   - Format "json" (JSON or JSONC): Path is an RFC 6901 pointer.
//   - Format "toml": Path is a top-level key ("model_provider") or a table header in
//     brackets ("[model_providers.smarter-compact]"); Old/New hold the key's value or the
//     table's text as a JSON string.
//   - Format "file": a whole file we created (Path ""), removed on uninstall when it
//     still holds New.
//
// Old is nil when the key was absent; New is what we set.
type Op struct {
	Format string          `json:"format"`
	Path   string          `json:"path"`
	Old    json.RawMessage `json:"old,omitempty"`
	New    json.RawMessage `json:"new"`
}

// InstallDiff is the record one install leaves per agent, as JSON in
// <StateDir>/<agent>.json (seed 004: InstallDiff).
type InstallDiff struct {
	Version     int               `json:"version"` // 1
	Agent       string            `json:"agent"`
	InstalledAt string            `json:"installed_at"` // RFC 3339 UTC
	Files       []DiffFile        `json:"files"`
	Upstreams   map[string]string `json:"upstreams,omitempty"`
}

// DiffFile is one file of an InstallDiff.
type DiffFile struct {
	Path     string `json:"path"`
	Existed  bool   `json:"existed"`  // false: we created the file
	Snapshot string `json:"snapshot"` // copy of the file before install ("" when it did not exist)
	// AfterSHA256 is the hex SHA-256 of the bytes we wrote: when the file still hashes to
	// it, nobody edited it since, and uninstall restores the snapshot byte for byte.
	AfterSHA256 string `json:"after_sha256"`
	Ops         []Op   `json:"ops"`
}

// Report says what Install or Uninstall did (or would do, with DryRun) per agent.
type Report struct {
	Agents []AgentReport
}

// AgentReport is one agent's outcome. Skipped explains an agent that is not installed;
// Err is a parse error or a failed write (that agent's files are left untouched).
type AgentReport struct {
	Agent     string
	Skipped   string
	Err       error
	Files     []string          // files written (or that would be written)
	Diff      string            // unified diff of every file (always filled; printed by --dry-run)
	Upstreams map[string]string // chained upstreams found (install)
	Notes     []string
	Tier      int // uninstall: 1 inverse diff, 2 snapshot restore, 3 our wiring found by marker (no record), 0 nothing to do
}

// The functions below are the rest of the contract; each file named implements them.
//
// engine.go:
//
//	var ErrNotInstalled = errors.New("not installed")
//	func Install(env Env, agents []Agent, dryRun bool) Report
//	func Uninstall(env Env, agents []Agent, dryRun bool) Report
//
// Install plans every agent, writes each FileEdit atomically (temp file + rename in the
// same directory, mode kept, directories 0700), a snapshot of each existing file
// (<StateDir>/<agent>/<n>.snapshot, 0600) and the InstallDiff, and is idempotent: a
// second install changes nothing and keeps the first snapshot. Uninstall reads the diff:
// a file that still hashes to AfterSHA256 gets its snapshot back byte for byte (or is
// removed when we created it); an edited file gets the inverse ops, each only where the
// value is still ours (tier 1); a missing or corrupt diff falls back to the snapshots the
// agent's files have (tier 2), saying what it overwrites. Neither needs the service.
//
// edit_json.go (JSON and JSONC at the text level, github.com/tailscale/hujson):
//
//	func ParseJSONDoc(b []byte) (*JSONDoc, error) // error names line and column
//	func (d *JSONDoc) Get(ptr string) (json.RawMessage, bool) // standard JSON of the value
//	func (d *JSONDoc) Set(ptr string, value json.RawMessage) (Op, error) // makes parents; indents like its siblings
//	func (d *JSONDoc) Remove(ptr string) (Op, error)
//	func (d *JSONDoc) Bytes() []byte
//
// edit_toml.go (surgical line edits, positions from go-toml's unstable parser):
//
//	func ParseTOMLDoc(b []byte) (*TOMLDoc, error)
//	func (d *TOMLDoc) Key(key string) (json.RawMessage, bool)     // a top-level key's value as JSON
//	func (d *TOMLDoc) SetKey(key string, value json.RawMessage) (Op, error) // before the first table
//	func (d *TOMLDoc) Table(header string) (string, bool)         // "[a.b]" → its text
//	func (d *TOMLDoc) SetTable(header, text string) (Op, error)   // replace in place or append
//	func (d *TOMLDoc) Bytes() []byte
//
// Both keep every byte they do not change: comments, key order, indentation, CRLF line
// ends (new lines use the file's line end), trailing commas; no HTML escaping.
