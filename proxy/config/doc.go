// Package config is the schema and loader of the service's config.toml (DESIGN.md §7; seed
// 001, "Configuration"): every key with its section, environment override and accepted
// range, the resolution "environment over file over default" with all errors at once and
// the seed's fallbacks as warnings (config.go), the [memory] table (memory.go), [prices]
// (prices.go), the proxy's timeouts (timeouts.go), the bounded read that refuses FIFOs,
// devices and files over 1 MiB and the text our commands edit (read.go: ReadFile, ReadText), the trimming switches and their rule (pause, then
// CONTEXT_PROXY_ENABLED, then the agent's key, then the master switch; switches.go), and the
// "did you mean" of unknown names (suggest.go, which the CLI reuses for its commands).
//
// Where it lives, decided for issue 13: most of config.toml is the proxy's settings
// ([context_proxy], [upstream], [compaction] recall, [memory]; the result carries a
// proxy.Settings), so the schema sits under proxy; the few keys of other packages
// ([context_store], [prices]) resolve to plain values that app hands on. It reads and
// validates only: app owns the runtime state built on it (the watcher, the settings page,
// saving a switch through installer's TOML editor).
//
// It imports proxy, proxy/memory and store/savings; app is its only importer.
package config
