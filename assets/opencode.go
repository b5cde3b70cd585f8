package assets

import _ "embed" // the OpenCode plugin file

//go:embed opencode-plugin.js
var openCodePlugin string

// OpenCodePlugin returns the OpenCode plugin file the installer writes to
// <opencode config dir>/plugin/smarter-compact.js (DESIGN.md §8): an ES module that sends
// x-smarter-compact-session-id on every model request and registers sessions through
// `smarter-compact hook`. Its one "__SMARTER_COMPACT_EXE__" string literal is where the
// installer puts the executable's path. Each call returns a fresh copy.
func OpenCodePlugin() []byte { return []byte(openCodePlugin) }
