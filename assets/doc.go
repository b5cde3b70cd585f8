// Package assets owns the files embedded in the binary (//go:embed): the dashboard's static
// files (vendored htmx, the CSS, the favicon; Web), the OpenCode plugin file the installer
// writes (OpenCodePlugin), and the tray icons (DESIGN.md §3). It exports read-only values and
// file systems.
//
// It imports nothing of ours; web and app import it. Nothing here is fetched at run time.
package assets
