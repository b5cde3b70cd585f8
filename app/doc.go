// Package app is the composition root of smarter-compact: the command line, the
// configuration (config.toml overlaid by the environment, DESIGN.md §7), and the wiring of
// the serve command (store, proxy, MCP at /mcp, one loopback listener with its Host and
// browser checks) and of the mcp command (the MCP tools over stdio).
// Later it also owns the tray and the service lifecycle.
//
// app may import every package of this module; no package imports app (deps_test.go).
// It is the only place that calls slog.SetDefault. It holds no business rules: trimming is
// proxy's, storage is store's.
package app
