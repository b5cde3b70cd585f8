// Package e2e holds the end-to-end tests (build tag e2e; `make e2e` runs them): the real
// smarter-compact binary, built once per run, as `serve` and `mcp` subprocesses driven by the
// real agent CLIs (Claude Code, Codex, OpenCode), Chromium, a private D-Bus session bus and
// raw stdio pipes, against the strict fake upstream (proxy/fakeupstream); and the soak, which
// runs app.Main("serve") in process under eight writers and eight MCP readers for a minute.
//
// Its tests reach the product only as a user does — the binary, its HTTP routes, the files it
// writes — or through app.Main, and read the session databases read-only. It must not hold
// fast unit tests (those live beside the code they test, in `make test`), and it has no
// non-test code. Nothing imports it.
package e2e
