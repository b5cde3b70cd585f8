// Package installer owns agent wiring and its exact removal (DESIGN.md §8): the
// minimal, text-level edits to Claude Code, Codex and OpenCode config files, the install
// diff and snapshot that let uninstall revert only what is still ours (seed 004,
// InstallDiff), the base URLs the agents pointed at before, chained into smarter-compact's
// config.toml and recorded so that uninstall removes exactly them (upstreams.go), a
// read-only view of each agent's base URLs for doctor (wiring.go), the text of the install
// and uninstall report (report_text.go), the Claude Code hook protocol of the hooks it wires
// (claude_hook.go), the per-user login service registration and what the service command
// prints about it (service_cmd.go), and the service's own files beside the config: the API
// token (token.go) and the address file (addrfile.go).
//
// It imports nothing of ours and is imported only by app. It never parses and re-marshals
// a user's file, and never writes after a parse error.
package installer
