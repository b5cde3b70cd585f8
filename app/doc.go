// Package app is the composition root of smarter-compact: the command line, the runtime
// state built on the configuration (package proxy/config loads config.toml overlaid by the
// environment, DESIGN.md §7; app watches it, applies it and saves switches), and the wiring of
// the serve command (store, proxy, MCP at /mcp, one loopback listener with its Host and
// browser checks, the tray) and of the mcp command (the MCP tools over stdio), and the
// flags of the login-service commands (their work and reports are installer's). On Windows
// the same package is also linked as the console-less smarter-compact-gui.exe
// (gui_windows.go: no arguments runs serve, output goes to the log file in the state dir).
//
// app may import every package of this module; no package imports app (deps_test.go).
// It is the only place that calls slog.SetDefault. It holds no business rules: trimming is
// proxy's, the config schema proxy/config's, storage and its doctor checks store's, agent
// wiring, the login service, the hook protocol and the API token installer's.
package app
