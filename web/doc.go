// Package web serves the local dashboard and the JSON control API (DESIGN.md §5, §9): the
// chi routes for / and /ui/… (templ components in web/ui, htmx) and /api/… for the tray and
// the CLI. Server.Handler builds the listener's route table from app's parts, inside the
// guards of guard.go that app hands in: the Host check (CheckHost, DNS rebinding) and the
// refusal of browsers on the model and MCP routes (RefuseBrowsers); BodyDeadline bounds a
// request body's arrival ([context_proxy] body_read_timeout_s).
// SetAgentMode (and SetAgentModes for several agents) is the control API's client, beside the handlers that define its protocol
// (`smarter-compact on|off` switches a running service through it).
//
// Pages: the overview (service, per-agent switches, pause, the last 24 hours, tokens saved
// per day), sessions (list, one session's rows, usage and prompt-tokens chart, blobs),
// search across sessions (the MCP search engine) and settings. Charts are server-rendered
// SVG; every page works without JavaScript, htmx only swaps fragments.
//
// Security: every response carries CSP default-src 'self' (no inline script or style
// anywhere), nosniff, frame-ancestors none; state-changing /ui requests pass
// http.CrossOriginProtection and a per-process CSRF token; /api refuses browsers and needs
// the bearer token (constant-time compare). Handlers return errors; one adapter (handle)
// writes the user-safe message and logs the cause.
//
// It may import store and assets, nothing else of ours; only app imports it. It loads
// nothing from a CDN. It changes the switches through Control, which app implements, never
// by importing app.
package web
