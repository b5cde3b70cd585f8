package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cli/browser"

	"github.com/smarter-compact/smarter-compact/app/tray"
	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/mcp"
	"github.com/smarter-compact/smarter-compact/proxy"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/embedding"
	"github.com/smarter-compact/smarter-compact/store/savings"
	"github.com/smarter-compact/smarter-compact/web"
)

// shutdownGrace is how long serve waits, after ctx is cancelled, for open requests (model
// streams included) to finish before it closes them.
const shutdownGrace = 10 * time.Second

// serve is the service (DESIGN.md §2, §9): the proxy, the MCP tools (/mcp), the dashboard
// and its /api on one loopback listener, the tray unless --no-tray, and the one runtime
// state they share (state), which watches config.toml. It returns nil once ctx is cancelled
// (SIGTERM, `service stop`, the tray's Quit) and everything has shut down.
func serve(ctx context.Context, args []string, sys system) error {
	f, err := parseServeFlags(args, sys)
	if err != nil {
		return err
	}
	st, err := serveState(f, sys)
	if err != nil {
		return err
	}
	cfg := st.config()
	log := sys.log
	token, err := installer.EnsureToken(sys.configDir)
	if err != nil {
		return err
	}

	// Listen before touching the store, so that a second instance stops here: when the
	// first one is smarter-compact, it hands over to it.
	ln, err := listen(ctx, cfg.Port)
	if err != nil {
		var inUse portInUseError
		if errors.As(err, &inUse) {
			return handOff(ctx, inUse.port, sys)
		}
		return err
	}
	defer ln.Close()
	// `smarter-compact service stop` reaches this process through a per-session event on
	// Windows; elsewhere the service manager signals it.
	ctx, releaseStop := stopOnRequest(ctx, cfg.Port, sys)
	defer releaseStop()
	// The tray's Quit ends the service as a signal does.
	ctx, quit := context.WithCancel(ctx)
	defer quit()
	root, err := openStore(sys)
	if err != nil {
		return err
	}
	defer root.Close()
	// The health record outside the session databases, kept in health.json (issue 16 item 1).
	if err := root.KeepHealth(); err != nil {
		log.Warn("health record: " + err.Error() + " (it is kept in memory meanwhile)")
	}
	st.storeDir = root.Dir() // before anything reads the state concurrently
	if exe, err := sys.executable(); err == nil {
		st.build = newBuildCheck(exe)
	}
	var embedder *embedding.Embedder
	var onRowsStored func(string)
	if cfg.EmbeddingModel != "" {
		// Vectors (contract: Vectors): the proxy queues a database after it stored new rows.
		embedder = embedding.NewEmbedder(root, embedConfig(cfg, sys.getenv), log)
		onRowsStored = embedder.Notify
	}
	px := proxy.New(cfg.Proxy, st, root, log)
	defer px.Close()            // after the server drained, before root.Close
	st.attach(px, onRowsStored) // adds the embedder's hook before anything is served
	recallOpts := mcpOptions(cfg, sys)
	recallOpts.Workspace, recallOpts.WorkspaceFromRoots = "", true // the caller's roots, not our cwd
	recall := mcp.New(root, recallOpts)
	// The dashboard's install and uninstall read the config serve reads (--config, else
	// SMARTER_COMPACT_CONFIG, else the default).
	dash := newDashboard(root, st, token, newWirer(st, sys, f.config), log)
	srv := &http.Server{
		Handler:           web.BodyDeadline(cfg.BodyReadTimeout, routes(cfg.Port, px, recall.Handler(), dash, log)),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// No WriteTimeout: a model's answer streams for minutes.
	}
	base := "http://" + ln.Addr().String()
	// Where we listen, for `on` and `off` (a --port they cannot read from the config).
	if removeAddr, err := installer.WriteAddrFile(sys.configDir, base); err != nil {
		log.Warn("cannot record the service's address: 'smarter-compact on|off' look on the config's port only", "err", err)
	} else {
		defer removeAddr()
	}
	logServing(log, base, root.Dir(), cfg, st.agentsString())
	var wg sync.WaitGroup
	defer wg.Wait() // before root.Close
	bg, stopBG := context.WithCancel(ctx)
	defer stopBG() // runs before wg.Wait
	wg.Go(func() { st.run(bg) })
	// Fill the store's per-session caches in the background, so the first dashboard load
	// after a start does not read every session database.
	wg.Go(func() { dash.Warm(bg) })
	if embedder != nil {
		wg.Go(func() { embedder.Run(bg) })
	}
	wg.Go(func() { sweepHourly(bg, root, st, log) })
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if !f.noTray {
		// Serving first, the tray in the background: finding the session bus can take up to
		// tray.DialTimeout (a bus that accepts and never answers), and requests must not wait
		// for it. The tray stops before the store closes (defers run last-in first-out).
		stops := make(chan func(), 1)
		go func() {
			app := &trayApp{state: st, dashboard: base + "/", quit: quit, log: log, sys: sys, configFlag: f.config}
			stops <- tray.Start(bg, app, tray.Options{Agents: config.ConfiguredAgents, Root: root, Log: log, Getenv: sys.getenv, MainThread: sys.mainThread,
				Prices: func() savings.Prices { return st.config().Prices }})
		}()
		defer func() { (<-stops)() }()
	}

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

// serveFlags are serve's flags; port is 0 without --port.
type serveFlags struct {
	config string
	port   int
	noTray bool
}

func parseServeFlags(args []string, sys system) (serveFlags, error) {
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&f.config, "config", "", "read config.toml from `PATH` (default: SMARTER_COMPACT_CONFIG, else the user config dir)")
	portFlag := fs.Int("port", 0, "listen on 127.0.0.1:`N`, overriding [context_proxy] port and CONTEXT_PROXY_PORT")
	fs.BoolVar(&f.noTray, "no-tray", false, "run without the tray icon")
	if err := parseFlags(fs, args, sys.stdout); err != nil {
		return f, err
	}
	portSet := false
	fs.Visit(func(f *flag.Flag) { portSet = portSet || f.Name == "port" })
	if portSet && (*portFlag < 1 || *portFlag > 65535) {
		return f, usageError{fmt.Sprintf("serve: --port %d: must be an integer from 1 to 65535", *portFlag)}
	}
	if portSet {
		f.port = *portFlag
	}
	return f, nil
}

// serveState loads the config serve runs with and logs its warnings.
func serveState(f serveFlags, sys system) (*state, error) {
	path, explicit, err := config.Path(f.config, sys.getenv, sys.configDir)
	if err != nil {
		return nil, err
	}
	trayStatus := "off (--no-tray)"
	if !f.noTray {
		trayStatus = "starting"
	}
	st, err := newState(stateOptions{Path: path, Explicit: explicit, Tray: trayStatus, Sys: sys, Port: f.port})
	if err != nil {
		return nil, err
	}
	cfg := st.config()
	for _, w := range cfg.Warnings {
		sys.log.Warn(w)
	}
	if cfg.Memory.Configured() {
		sys.log.Info("memory recall on trim: " + cfg.Memory.String()) // never the API key
	}
	return st, nil
}

// newDashboard is the dashboard over root and st. Its install and uninstall read the config
// serve reads (--config, else SMARTER_COMPACT_CONFIG, else the default).
func newDashboard(root *store.Root, st *state, token string, wirer web.Wirer, log *slog.Logger) *web.Server {
	return web.New(web.Options{Root: root, Control: st, APIToken: token, Log: log, Wirer: wirer,
		Prices: func() savings.Prices { return st.config().Prices },
		TrimBlocks: func(sid string) []string {
			b, err := root.LoadTrimState(sid)
			if err != nil {
				return nil
			}
			return proxy.TrimBlocks(b)
		}})
}

// logServing is serve's start line.
func logServing(log *slog.Logger, base, storeDir string, cfg config.Config, agents string) {
	configName := cfg.Path
	if configName == "" {
		configName = "none (defaults)"
	}
	log.Info("smarter-compact serving", "version", version, "addr", base, "dashboard", base+"/",
		"store", storeDir, "config", configName, "agents", agents,
		"upstream_anthropic", upstreamHost(cfg.Proxy.Upstreams["anthropic"]),
		"upstream_openai", upstreamHost(cfg.Proxy.Upstreams["openai"]),
		"upstream_codex", upstreamHost(cfg.Proxy.Upstreams["codex"]),
		"upstream_agents", agentUpstreamsLog(cfg.Proxy.AgentUpstreams))
}

// sweepHourly sweeps at start, then hourly until ctx ends: Sweep itself runs at most once a
// day (.ttl-stamp), so a service that stays up for weeks still retires idle sessions
// (contract: Retention). ttl_days applies live: each pass reads the value in effect.
func sweepHourly(ctx context.Context, root *store.Root, st *state, log *slog.Logger) {
	sweep(root, st.config().TTLDays, log)
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sweep(root, st.config().TTLDays, log)
		}
	}
}

// listen binds 127.0.0.1:port, never another address (STYLE.md: bind nothing but loopback).
// A port another process holds is a portInUseError.
func listen(ctx context.Context, port int) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if addrInUse(err) {
		return nil, portInUseError{port: port, err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return ln, nil
}

// portInUseError: another process listens on 127.0.0.1:port.
type portInUseError struct {
	port int
	err  error
}

func (e portInUseError) Error() string { return fmt.Sprintf("port %d is in use", e.port) }

func (e portInUseError) Unwrap() error { return e.err }

// healthzHeader is the response header of /healthz that names smarter-compact and its
// version: a second serve recognises the first by it (handOff).
const healthzHeader = "X-Smarter-Compact"

// handOffTimeout bounds handOff's request to the program that holds the port.
const handOffTimeout = 3 * time.Second

// handOff is serve on a port another process holds. A second launch (the app, the
// .desktop entry or the Start-menu shortcut while the login copy runs) finds
// smarter-compact's /healthz there (healthzHeader): it opens that instance's dashboard in
// the browser (sys.openURL), logs one line and returns nil, so the launch exits 0; when the
// browser fails, that line names the address to open instead, and the launch still
// succeeds: the service it asked for runs. Any other program on the port is an error that
// says what to do.
func handOff(ctx context.Context, port int, sys system) error {
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := isSmarterCompact(ctx, base); err != nil {
		return fmt.Errorf("port %d is in use by another program, not smarter-compact (%v): stop that program, or give smarter-compact another port with CONTEXT_PROXY_PORT, [context_proxy] port or serve --port", port, err)
	}
	dashboard := base + "/"
	open := sys.openURL
	if open == nil {
		open = browser.OpenURL
	}
	if err := open(dashboard); err != nil {
		sys.log.Warn(fmt.Sprintf("port %d is in use by smarter-compact, already running here; cannot open the browser: open its dashboard yourself", port), "dashboard", dashboard, "err", err)
		return nil
	}
	sys.log.Info(fmt.Sprintf("port %d is in use by smarter-compact, already running here: opened its dashboard", port), "dashboard", dashboard)
	return nil
}

// isSmarterCompact asks base's /healthz whether smarter-compact answers there: 200, "ok"
// and healthzHeader. It returns what it found instead when not.
func isSmarterCompact(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, handOffTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
	if err != nil {
		return err
	}
	c := &http.Client{
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true}, // straight to loopback
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("it does not answer HTTP at %s/healthz: %w", base, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
	if resp.StatusCode != http.StatusOK || resp.Header.Get(healthzHeader) == "" || string(body) != "ok" {
		return fmt.Errorf("its %s/healthz answered %s without smarter-compact's %s header", base, resp.Status, healthzHeader)
	}
	return nil
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
			"blobs_deleted", rep.BlobsDeleted, "blob_pass_skipped", rep.BlobPassSkipped,
			"deferred", len(rep.Deferred)) // held by another handle (Windows): the next pass tries again
	}
}

// agentUpstreamsLog is the per-agent upstreams for the startup line, compactly:
// "claude-code.anthropic=https://gw.example/anthropic opencode.openai=…", or "none".
func agentUpstreamsLog(m map[string]map[string]string) string {
	var parts []string
	for _, agent := range config.ConfiguredAgents {
		for _, fam := range config.UpstreamFamilies {
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
