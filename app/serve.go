package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/smarter-compact/smarter-compact/mcp"
	"github.com/smarter-compact/smarter-compact/proxy"
	"github.com/smarter-compact/smarter-compact/store"
)

// shutdownGrace is how long serve waits, after ctx is cancelled, for open requests (model
// streams included) to finish before it closes them.
const shutdownGrace = 10 * time.Second

// serve is the service (DESIGN.md §2): the proxy and the MCP tools (/mcp) on one loopback
// listener, with the retention sweep at start. It returns nil once ctx is cancelled and the
// server has shut down.
func serve(ctx context.Context, args []string, sys system) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configFlag := fs.String("config", "", "read config.toml from `PATH` (default: SMARTER_COMPACT_CONFIG, else the user config dir)")
	portFlag := fs.Int("port", 0, "listen on 127.0.0.1:`N`, overriding [context_proxy] port and CONTEXT_PROXY_PORT")
	noTray := fs.Bool("no-tray", false, "run without the tray icon")
	if err := parseFlags(fs, args, sys.stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	portSet := false
	fs.Visit(func(f *flag.Flag) { portSet = portSet || f.Name == "port" })
	if portSet && (*portFlag < 1 || *portFlag > 65535) {
		return usageError{fmt.Sprintf("serve: --port %d: must be an integer from 1 to 65535", *portFlag)}
	}

	path, explicit, err := ConfigPath(*configFlag, sys.getenv, sys.configDir)
	if err != nil {
		return err
	}
	cfg, err := LoadConfig(path, explicit, sys.getenv)
	if err != nil {
		return err
	}
	if portSet {
		cfg.Port = *portFlag
	}
	log := sys.log
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	if !*noTray {
		log.Info("tray: not built yet, running headless")
	}

	// Listen before touching the store, so that a second instance stops here.
	ln, err := listen(ctx, cfg.Port)
	if err != nil {
		return err
	}
	defer ln.Close()
	// `smarter-compact service stop` reaches this process through a per-session event on
	// Windows; elsewhere the service manager signals it.
	ctx, releaseStop := stopOnRequest(ctx, cfg.Port, sys)
	defer releaseStop()
	root, err := openStore(sys)
	if err != nil {
		return err
	}
	defer root.Close()
	toggles := newToggles(cfg.Agents)
	var embedder *store.Embedder
	if cfg.EmbeddingModel != "" {
		// Vectors (contract: Vectors): the proxy queues a database after it stored new rows.
		embedder = store.NewEmbedder(root, embedConfig(cfg, sys.getenv), log)
		cfg.Proxy.OnRowsStored = embedder.Notify
	}
	px := proxy.New(cfg.Proxy, toggles, root, log)
	defer px.Close() // after the server drained, before root.Close
	recall := mcp.New(root, mcpOptions(cfg, sys))
	srv := &http.Server{
		Handler:           routes(cfg.Port, px, recall.Handler(), toggles, log),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// No WriteTimeout: a model's answer streams for minutes.
	}
	configName := cfg.Path
	if configName == "" {
		configName = "none (defaults)"
	}
	log.Info("smarter-compact serving", "version", version, "addr", "http://"+ln.Addr().String(),
		"store", root.Dir(), "config", configName, "agents", toggles.String(),
		"upstream_anthropic", upstreamHost(cfg.Proxy.Upstreams["anthropic"]),
		"upstream_openai", upstreamHost(cfg.Proxy.Upstreams["openai"]),
		"upstream_codex", upstreamHost(cfg.Proxy.Upstreams["codex"]),
		"upstream_agents", agentUpstreamsLog(cfg.Proxy.AgentUpstreams))
	var wg sync.WaitGroup
	defer wg.Wait() // before root.Close
	bg, stopBG := context.WithCancel(ctx)
	defer stopBG() // runs before wg.Wait
	if embedder != nil {
		wg.Go(func() { embedder.Run(bg) })
	}
	wg.Go(func() {
		// At start, then hourly: Sweep itself runs at most once a day (.ttl-stamp), so a
		// service that stays up for weeks still retires idle sessions (contract: Retention).
		sweep(root, cfg.TTLDays, log)
		t := time.NewTicker(time.Hour)
		defer t.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-t.C:
				sweep(root, cfg.TTLDays, log)
			}
		}
	})

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("requests still open after the grace period were cut", "grace", shutdownGrace)
		_ = srv.Close()
	}
	return nil
}

// listen binds 127.0.0.1:port, never another address (STYLE.md: bind nothing but loopback).
func listen(ctx context.Context, port int) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if addrInUse(err) {
		return nil, fmt.Errorf("port %d is in use: is smarter-compact already running? `curl http://127.0.0.1:%d/healthz`; or set CONTEXT_PROXY_PORT (or [context_proxy] port)", port, port)
	}
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return ln, nil
}

// sweep runs the retention pass once at start (contract: Retention) and logs the outcome.
func sweep(root *store.Root, ttlDays int, log *slog.Logger) {
	rep, err := root.Sweep(ttlDays, time.Now())
	switch {
	case err != nil:
		log.Warn("retention sweep failed", "err", err)
	case !rep.Ran:
		log.Debug("retention sweep skipped: it ran less than 24 h ago")
	default:
		log.Info("retention sweep", "ttl_days", ttlDays, "sessions_deleted", len(rep.SessionsDeleted),
			"blobs_deleted", rep.BlobsDeleted, "blob_pass_skipped", rep.BlobPassSkipped)
	}
}

// agentUpstreamsLog is the per-agent upstreams for the startup line, compactly:
// "claude-code.anthropic=https://gw.example/anthropic opencode.openai=…", or "none".
func agentUpstreamsLog(m map[string]map[string]string) string {
	var parts []string
	for _, agent := range configuredAgents {
		for _, fam := range upstreamFamilies {
			if u := m[agent][fam]; u != "" {
				parts = append(parts, agent+"."+fam+"="+upstreamHost(u))
			}
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// upstreamHost is an upstream URL without user info or query: enough to see where traffic
// goes (the path matters for the Codex backend), nothing that could carry a credential.
func upstreamHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid)"
	}
	return u.Scheme + "://" + u.Host + u.Path
}
