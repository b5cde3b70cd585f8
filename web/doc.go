// Package web will own the local dashboard and the JSON control API (DESIGN.md §5, §9):
// the chi routes for / and /ui/… (templ components, htmx), /api/… for the tray and the CLI
// (status, per-agent toggles), events, sessions, search and charts.
//
// It may import store and assets, nothing else of ours; only app imports it. It loads
// nothing from a CDN, checks the Host header, requires a CSRF token on state-changing
// requests and sends CSP default-src 'self'. It flips the per-agent toggles through an
// interface it declares and app satisfies, never by importing app.
//
// Empty for now: a later issue fills it.
package web
