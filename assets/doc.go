// Package assets will own the files embedded in the binary (//go:embed): the tray and
// dashboard icons, the vendored htmx, the CSS, and the OpenCode plugin file the installer
// writes (DESIGN.md §3). It exports read-only file systems; under a dev build tag the same
// names may be served from disk.
//
// It imports nothing of ours; web and app import it. Nothing here is fetched at run time.
//
// Empty for now: a later issue fills it.
package assets
