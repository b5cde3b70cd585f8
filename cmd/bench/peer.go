package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The peer arm (-peers, `make bench PEERS=1`): a Claude Code gateway from npm, run in the
// same interleaved latency streams as the other arms and pointed at the same lean upstream.

// Peer: claude-code-router, pinned (`npm view @musistudio/claude-code-router versions`:
// 1.0.73, 2.0.0, 3.1.1; 3.x needs Node 22 and pulls native modules, 2.0.0 is one bundled
// file for Node 20).
const (
	peerPackage = "@musistudio/claude-code-router"
	peerVersion = "2.0.0"
	peerName    = "claude-code-router " + peerVersion
)

// peerInfo says what the peer arm ran, or why it did not.
type peerInfo struct {
	Name    string // "claude-code-router 2.0.0"
	Ran     bool
	Skipped string        // why not, when !Ran
	Install time.Duration // npm install, 0 when cached
	Node    string        // node --version
}

// peerCLI installs the pinned peer under cache (npm install --prefix, kept between runs)
// and returns its CLI script and how long the install took (0 when it was there already).
func peerCLI(ctx context.Context, cache string) (string, time.Duration, error) {
	prefix, err := filepath.Abs(filepath.Join(cache, "claude-code-router-"+peerVersion))
	if err != nil {
		return "", 0, err
	}
	cli := filepath.Join(prefix, "node_modules", filepath.FromSlash(peerPackage), "dist", "cli.js")
	if _, err := os.Stat(cli); err == nil {
		return cli, 0, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", 0, fmt.Errorf("npm is not on PATH: %w", err)
	}
	if err := os.MkdirAll(prefix, 0o700); err != nil {
		return "", 0, err
	}
	start := time.Now()
	ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ictx, "npm", "install", "--no-audit", "--no-fund", "--ignore-scripts",
		"--prefix", prefix, peerPackage+"@"+peerVersion).CombinedOutput()
	if err != nil {
		return "", 0, fmt.Errorf("npm install %s@%s: %v: %s", peerPackage, peerVersion, err, tail(strings.TrimSpace(string(out)), 300))
	}
	if _, err := os.Stat(cli); err != nil {
		return "", 0, fmt.Errorf("npm install %s@%s left no %s", peerPackage, peerVersion, filepath.Base(cli))
	}
	return cli, time.Since(start), nil
}

// ccrConfig is claude-code-router's ~/.claude-code-router/config.json for the bench: one
// provider, the lean upstream, spoken to in Anthropic's format (its "Anthropic" transformer),
// every request routed to it, logging off, loopback only.
func ccrConfig(port int, upstream string) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"PORT": port, "HOST": "127.0.0.1", "LOG": false, "APIKEY": "", "API_TIMEOUT_MS": 600000,
		"Providers": []map[string]any{{
			"name": "lean", "api_base_url": upstream + "/v1/messages", "api_key": "sk-ant-bench",
			"models": []string{"claude-opus-5-5"}, "transformer": map[string]any{"use": []string{"Anthropic"}},
		}},
		"Router": map[string]any{"default": "lean,claude-opus-5-5"},
	}, "", "  ")
}

// startPeer installs (when needed) and starts the peer in the foreground (`ccr start`) with its
// own HOME under tmp, pointed at upstream. info says what happened; the proc is nil when the
// arm is skipped.
func startPeer(ctx context.Context, cache, tmp, upstream string, logf func(string, ...any)) (*proc, peerInfo) {
	info := peerInfo{Name: peerName}
	node, err := exec.LookPath("node")
	if err != nil {
		info.Skipped = "node is not on PATH"
		return nil, info
	}
	if v, err := exec.Command(node, "--version").Output(); err == nil {
		info.Node = strings.TrimSpace(string(v))
	}
	cli, took, err := peerCLI(ctx, cache)
	if err != nil {
		info.Skipped = "install failed: " + err.Error()
		return nil, info
	}
	info.Install = took
	if took > 0 {
		logf("peer: installed %s in %s", peerName, took.Round(time.Millisecond))
	}
	p, err := startProc("peer-ccr", tmp, serveConfig{}, func(port int, dir string, env []string) *exec.Cmd {
		home := filepath.Join(dir, "home", ".claude-code-router")
		cfg, err := ccrConfig(port, upstream)
		if err == nil {
			if err = os.MkdirAll(home, 0o700); err == nil {
				err = os.WriteFile(filepath.Join(home, "config.json"), cfg, 0o600)
			}
		}
		if err != nil {
			logf("peer: config: %v", err)
		}
		c := exec.Command(node, cli, "start")
		c.Env = env
		return c
	}, "/health")
	if err != nil {
		info.Skipped = "did not start: " + tail(err.Error(), 300)
		return nil, info
	}
	info.Ran = true
	return p, info
}
