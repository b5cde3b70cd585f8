package app

import (
	"log/slog"
	"net/http"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy"
	"github.com/smarter-compact/smarter-compact/web"
)

// routes is the route table of the one loopback listener (DESIGN.md §5), built by package web
// (chi stays there): models serves the model-API routes (the proxy), recall the MCP tools over
// streamable HTTP, and dash the dashboard (/, /ui/…) and the control API of the CLI and the
// tray (/api/…), with its own CSRF, token and header checks. Everything sits behind the Host
// check; the model and MCP routes also refuse browsers.
func routes(port int, models, recall http.Handler, dash *web.Server, log *slog.Logger) http.Handler {
	return dash.Handler(web.Listener{
		Guard:          web.CheckHost(port, log),
		RefuseBrowsers: web.RefuseBrowsers,
		Healthz:        healthz,
		MCP:            recall,
		Models:         models,
		ModelPrefixes:  proxy.RoutePrefixes(),
	})
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set(healthzHeader, version) // a second serve recognises us by it (handOff)
	w.Header().Set(installer.HealthBuildHeader, proxy.CodeVersion())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
}
