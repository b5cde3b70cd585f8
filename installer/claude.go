package installer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tailscale/hujson"
)

// ClaudeCode wires Claude Code (DESIGN.md §8, issue 5 item 2): in ~/.claude/settings.json
// env.ANTHROPIC_BASE_URL → http://127.0.0.1:<port>/claude-code and the SessionStart and
// UserPromptSubmit hooks that run `smarter-compact hook …`; in ~/.claude.json the stdio MCP
// server (user scope, top-level mcpServers).
//
// ENABLE_TOOL_SEARCH is deliberately not set. peers.md item 7 (Headroom PR #753) says a
// custom ANTHROPIC_BASE_URL turns Claude Code's tool-search deferral off (~25k tokens a
// request), but Claude Code 2.1.332 captured with ANTHROPIC_BASE_URL pointing at a local
// fake still deferred every MCP tool and sent ToolSearch (research/clients.md, run 05): the
// deferral survives a loopback base URL, so setting the variable would only add a key to
// remove on uninstall. The end-to-end test against the real CLI checks it.
type ClaudeCode struct{}

// Name is the agent's name in --agents, the toggles and the install diff.
func (ClaudeCode) Name() string { return "claude-code" }

func claudeSettingsPath(env Env) string { return filepath.Join(env.Home, ".claude", "settings.json") }
func claudeStatePath(env Env) string    { return filepath.Join(env.Home, ".claude.json") }
func claudeCommandPath(env Env) string {
	return filepath.Join(env.Home, ".claude", "commands", "smarter-compact.md")
}

// Files lists ~/.claude/settings.json, ~/.claude.json and our slash command file.
func (ClaudeCode) Files(env Env) []string {
	return []string{claudeSettingsPath(env), claudeStatePath(env), claudeCommandPath(env)}
}

// claudeCommand is ~/.claude/commands/smarter-compact.md. Interactive Claude Code answers
// "Unknown command" to a slash command it has no file for, and the UserPromptSubmit hook
// never sees the prompt; with the file, the hook receives "/smarter-compact", sets the
// force flag and blocks the prompt, so the body below never reaches the model.
const claudeCommand = `---
description: Trim this session's context on the next request (Smarter Compact); trimmed turns stay searchable
---
<!-- smarter-compact:command -->
Smarter Compact trims this session's context on the next request.
`

// planCommand writes the slash command file: created when absent, left alone when current;
// a file of someone else's at our path fails the plan.
func (a ClaudeCode) planCommand(env Env) (FileEdit, error) {
	path := claudeCommandPath(env)
	cur, err := readCurrent(path)
	if err != nil {
		return FileEdit{}, err
	}
	want := []byte(claudeCommand)
	switch {
	case bytes.Equal(cur.before, want):
		return cur.edit(cur.before, nil), nil
	case cur.before != nil && !bytes.Contains(cur.before, []byte("smarter-compact:command")):
		return FileEdit{}, fmt.Errorf("%s exists and was not written by smarter-compact: move it away, then install again", path)
	}
	op := Op{Format: "file", New: jsonString(claudeCommand)}
	if cur.before != nil {
		op.Old = jsonString(string(cur.before))
	}
	return cur.edit(want, []Op{op}), nil
}

// claudeHooks are the hook events we add, with the `smarter-compact hook` event each runs.
var claudeHooks = []struct{ event, sub string }{
	{"SessionStart", "session-start"},
	{"UserPromptSubmit", "prompt-submit"},
}

// Plan wires Claude Code when ~/.claude or ~/.claude.json exists. A settings.json that is
// absent is created from {}; one that does not parse fails the plan, and so does one with
// comments or trailing commas (JSONC): Claude Code reads both files as strict JSON and
// ignores one that is not, so wiring it would report an agent wired that never reads the
// wiring (issue 15, Deliver 3). The error says so and what to do (strictJSON).
func (a ClaudeCode) Plan(env Env) (*AgentPlan, error) {
	dir := filepath.Join(env.Home, ".claude")
	if !isDir(dir) && !exists(claudeStatePath(env)) {
		return nil, notInstalled(a.Name(), dir, claudeStatePath(env))
	}
	plan := &AgentPlan{Agent: a.Name()}

	settings, err := a.planSettings(env, plan)
	if err != nil {
		return nil, err
	}
	state, err := a.planState(env)
	if err != nil {
		return nil, err
	}
	command, err := a.planCommand(env)
	if err != nil {
		return nil, err
	}
	plan.Files = []FileEdit{settings, state, command}
	return plan, nil
}

func (a ClaudeCode) planSettings(env Env, plan *AgentPlan) (FileEdit, error) {
	cur, doc, err := readClaudeJSON(claudeSettingsPath(env))
	if err != nil {
		return FileEdit{}, err
	}
	want := proxyURL(env, "/claude-code")
	if old, ok := getString(doc, "env", "ANTHROPIC_BASE_URL"); ok {
		if old != want && old != "" && !chain(env, plan, "anthropic", old, "") {
			plan.Notes = append(plan.Notes, fmt.Sprintf("Claude Code: ANTHROPIC_BASE_URL was %s (this proxy, or an earlier install of it): replaced, not chained", old))
		}
	} else if old := getenv(env, "ANTHROPIC_BASE_URL"); old != "" && chain(env, plan, "anthropic", old, "") {
		// Claude Code applies settings.json's env over the shell's, so a gateway set in the
		// shell would be bypassed: chain to it instead.
		plan.Notes = append(plan.Notes, fmt.Sprintf("Claude Code: ANTHROPIC_BASE_URL=%s in this environment: the proxy forwards to it", old))
	}
	ops, err := setJSON(doc, jsonString(want), "env", "ANTHROPIC_BASE_URL")
	if err != nil {
		return FileEdit{}, fmt.Errorf("%s: %w", cur.path, err)
	}
	for _, h := range claudeHooks {
		hookOps, err := addClaudeHook(doc, h.event, shellQuote(env.Exe)+" hook "+h.sub, h.sub)
		if err != nil {
			return FileEdit{}, fmt.Errorf("%s: %w", cur.path, err)
		}
		ops = append(ops, hookOps...)
	}
	return cur.edit(doc.Bytes(), ops), nil
}

// planState adds the stdio MCP server to ~/.claude.json (user scope: every project sees
// it). The file is Claude Code's own state and large; only our key changes.
func (a ClaudeCode) planState(env Env) (FileEdit, error) {
	cur, doc, err := readClaudeJSON(claudeStatePath(env))
	if err != nil {
		return FileEdit{}, err
	}
	server := object{{"type", "stdio"}, {"command", env.Exe}, {"args", []string{"mcp"}}}
	ops, err := setJSON(doc, marshal(server), "mcpServers", mcpServerName)
	if err != nil {
		return FileEdit{}, fmt.Errorf("%s: %w", cur.path, err)
	}
	return cur.edit(doc.Bytes(), ops), nil
}

// claudeHookEntry is one matcher group of Claude Code's hooks setting running command
// (no matcher: every SessionStart source, every prompt).
func claudeHookEntry(command string) json.RawMessage {
	return marshal(object{{"hooks", []any{object{{"type", "command"}, {"command", command}}}}})
}

// addClaudeHook adds our entry to hooks.<event>, after the user's entries, which stay as
// they are. An entry already running command means nothing to do; an entry of ours with
// another executable (the binary moved) is replaced in place rather than left to fail on
// every event.
//
// The Op of an append has the new element's index as its path (/hooks/SessionStart/2):
// uninstall removes that element while it still holds our entry. Should the user insert
// an entry before ours between install and uninstall, ours is no longer at that index and
// stays (tier 1 removes only what is still ours); reinstall and uninstall then clean it.
func addClaudeHook(doc *JSONDoc, event, command, sub string) ([]Op, error) {
	entry := claudeHookEntry(command)
	raw, ok := doc.Get(pointer("hooks", event))
	if !ok {
		return setJSON(doc, marshal([]json.RawMessage{entry}), "hooks", event)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("hooks.%s is %s, not an array: fix it by hand, then install again", event, jsonKind(raw))
	}
	for _, e := range list {
		if cmds := hookCommands(e); len(cmds) == 1 && cmds[0] == command {
			return nil, nil
		}
	}
	for i, e := range list {
		if isOurHook(e, sub) {
			op, err := doc.Set(pointer("hooks", event, strconv.Itoa(i)), entry)
			if err != nil {
				return nil, err
			}
			return []Op{op}, nil
		}
	}
	op, err := doc.Set(pointer("hooks", event, strconv.Itoa(len(list))), entry)
	if err != nil {
		return nil, err
	}
	return []Op{op}, nil
}

// hookCommands lists the commands of one matcher group.
func hookCommands(entry json.RawMessage) []string {
	var g struct {
		Hooks []struct {
			Type    string `json:"type"`
			Command string `json:"command"`
		} `json:"hooks"`
	}
	if json.Unmarshal(entry, &g) != nil {
		return nil
	}
	var out []string
	for _, h := range g.Hooks {
		out = append(out, h.Command)
	}
	return out
}

// isOurHook reports whether entry is a group we wrote earlier with another executable path:
// one command, running a smarter-compact binary with `hook <sub>`.
func isOurHook(entry json.RawMessage, sub string) bool {
	cmds := hookCommands(entry)
	if len(cmds) != 1 {
		return false
	}
	exe, ok := strings.CutSuffix(cmds[0], " hook "+sub)
	return ok && strings.Contains(strings.ToLower(exe), "smarter-compact")
}

// Unwire removes what is recognizably ours without an install record (tier 3 of
// uninstall, Unwirer): env.ANTHROPIC_BASE_URL when it is a loopback URL of our
// /claude-code route, the hook entries that run `<smarter-compact> hook session-start` or
// `… hook prompt-submit`, mcpServers.smarter-compact in ~/.claude.json, and the slash
// command file when it holds our marker. Containers left empty go too.
func (a ClaudeCode) Unwire(env Env) (*AgentPlan, error) {
	plan := &AgentPlan{Agent: a.Name()}
	settings, err := readCurrent(claudeSettingsPath(env))
	if err != nil {
		return nil, err
	}
	if settings.before != nil {
		if err := unwireClaudeSettings(env, settings, plan); err != nil {
			return nil, err
		}
	}

	state, err := readCurrent(claudeStatePath(env))
	if err != nil {
		return nil, err
	}
	if state.before != nil {
		if err := unwireClaudeState(state, plan); err != nil {
			return nil, err
		}
	}

	if fe, ok, err := unwireFile(claudeCommandPath(env), "smarter-compact:command"); err != nil {
		return nil, err
	} else if ok {
		plan.Files = append(plan.Files, fe)
		plan.Notes = append(plan.Notes, "Claude Code: removed the /smarter-compact command file "+fe.Path)
	}
	return plan, nil
}

// unwireClaudeSettings adds to plan the edit of settings.json that removes our
// env.ANTHROPIC_BASE_URL and our hooks, with a note for each (no edit when neither is
// there). A step of its own because settings.json is one of the two files Unwire edits,
// each parsed and written on its own.
func unwireClaudeSettings(env Env, settings current, plan *AgentPlan) error {
	doc, err := parseJSONFile(settings)
	if err != nil {
		return err
	}
	var ops []Op
	if old, ok := getString(doc, "env", "ANTHROPIC_BASE_URL"); ok && isOurRoute(old, "/claude-code") {
		if err := unwireJSON(doc, &ops, "env", "ANTHROPIC_BASE_URL"); err != nil {
			return fmt.Errorf("%s: %w", settings.path, err)
		}
		plan.Notes = append(plan.Notes, fmt.Sprintf("Claude Code: removed env.ANTHROPIC_BASE_URL (%s) from %s: Claude Code talks to its default API again", old, settings.path))
	}
	if err := unwireClaudeHooks(env, doc, settings.path, &ops, plan); err != nil {
		return err
	}
	if len(ops) > 0 {
		plan.Files = append(plan.Files, settings.edit(doc.Bytes(), ops))
	}
	return nil
}

// unwireClaudeHooks removes from doc (settings.json at path) every hook entry of
// claudeHooks that runs a smarter-compact binary's `hook <sub>`, or env.Exe's, last first
// so the indexes of the ones left stay right, adding the ops and a note per entry. A step
// of its own because hooks are found by their command, not by a fixed key.
func unwireClaudeHooks(env Env, doc *JSONDoc, path string, ops *[]Op, plan *AgentPlan) error {
	for _, h := range claudeHooks {
		raw, ok := doc.Get(pointer("hooks", h.event))
		if !ok {
			continue
		}
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil {
			continue
		}
		ours := shellQuote(env.Exe) + " hook " + h.sub
		for i := len(list) - 1; i >= 0; i-- {
			if !isOurHook(list[i], h.sub) && !(env.Exe != "" && slices.Equal(hookCommands(list[i]), []string{ours})) {
				continue
			}
			if err := unwireJSON(doc, ops, "hooks", h.event, strconv.Itoa(i)); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			plan.Notes = append(plan.Notes, fmt.Sprintf("Claude Code: removed the %s hook running `%s` from %s", h.event, strings.Join(hookCommands(list[i]), " "), path))
		}
	}
	return nil
}

// unwireClaudeState adds to plan the edit of ~/.claude.json that removes
// mcpServers.smarter-compact, with a note (nothing when it is not there). A step of its own
// because ~/.claude.json is the other file Unwire edits.
func unwireClaudeState(state current, plan *AgentPlan) error {
	doc, err := parseJSONFile(state)
	if err != nil {
		return err
	}
	if _, ok := doc.Get(pointer("mcpServers", mcpServerName)); ok {
		var ops []Op
		if err := unwireJSON(doc, &ops, "mcpServers", mcpServerName); err != nil {
			return fmt.Errorf("%s: %w", state.path, err)
		}
		plan.Files = append(plan.Files, state.edit(doc.Bytes(), ops))
		plan.Notes = append(plan.Notes, fmt.Sprintf("Claude Code: removed the MCP server mcpServers.%s from %s", mcpServerName, state.path))
	}
	return nil
}

// ErrJSONC is wrapped by strictJSON's error: a Claude Code file with comments or trailing
// commas, which Claude Code does not read.
var ErrJSONC = errors.New("comments or trailing commas (JSONC), which Claude Code does not accept")

// readClaudeJSON reads one of Claude Code's JSON files (absent reads as empty) and parses
// it for editing; a file that is not strict JSON (strictJSON) is an error naming it.
func readClaudeJSON(path string) (current, *JSONDoc, error) {
	cur, err := readCurrent(path)
	if err != nil {
		return current{}, nil, err
	}
	if err := strictJSON(cur.path, cur.before); err != nil {
		return current{}, nil, err
	}
	doc, err := parseJSONFile(cur)
	if err != nil {
		return current{}, nil, err
	}
	return cur, doc, nil
}

// strictJSON returns nil when b is absent, blank, strict JSON, or not even JSONC (the edit
// engine's parse error names the line then). For JSONC it returns an error wrapping
// ErrJSONC that names the file and the line of the first comment or trailing comma, and
// says what to do.
func strictJSON(path string, b []byte) error {
	if len(bytes.TrimSpace(b)) == 0 || json.Valid(b) {
		return nil
	}
	if _, err := hujson.Parse(b); err != nil {
		return nil
	}
	line := 1
	var se *json.SyntaxError
	if errors.As(json.Unmarshal(b, new(any)), &se) && se.Offset > 0 {
		line += bytes.Count(b[:min(int(se.Offset), len(b))], []byte("\n"))
	}
	return fmt.Errorf("%s: line %d: %w: Claude Code ignores the whole file, so it cannot be wired: "+
		"remove the comments and trailing commas, then run 'smarter-compact install --agents claude-code'", path, line, ErrJSONC)
}
