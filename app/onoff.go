package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// apiTimeout bounds one call of the running service's control API.
const apiTimeout = 3 * time.Second

// onOff is the `on` and `off` command (DESIGN.md §2, §5; seed 001, "Turn it on or off"): it
// saves [context_proxy.agents] <agent> = true|false in config.toml, then tells the running
// service, whose toggles take effect on the next request. No agent means every agent. With
// the service down the change is saved only, and applies when it starts.
func onOff(ctx context.Context, on bool, args []string, sys system) error {
	name := "off"
	if on {
		name = "on"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	configFlag := fs.String("config", "", "edit config.toml at `PATH` (default: SMARTER_COMPACT_CONFIG, else the user config dir)")
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(sys.stdout, "Usage: smarter-compact %s [flags] [agent…]\n\nTurns trimming %s for the agents named (%s), every agent when none is named.\n\nFlags:\n",
			name, name, strings.Join(configuredAgents, ", "))
		fs.SetOutput(sys.stdout)
		fs.PrintDefaults()
		return nil
	}
	if err != nil {
		return usageError{fmt.Sprintf("%s: %v: run 'smarter-compact %s -h'", name, err, name)}
	}
	agents, err := pickAgents(name, fs.Args())
	if err != nil {
		return err
	}

	path, _, err := ConfigPath(*configFlag, sys.getenv, sys.configDir)
	if err != nil {
		return err
	}
	// The file must be valid before we touch it; a missing one (even a named one) is created.
	cfg, err := LoadConfig(path, false, sys.getenv)
	if err != nil {
		return fmt.Errorf("%w\nnothing changed: fix the config first", err)
	}
	old, err := readConfigText(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	keys := make([]configKey, len(agents))
	for i, a := range agents {
		keys[i] = configKey{a, tomlBool(on)}
	}
	text, err := setConfigKeys(old, "context_proxy.agents", keys)
	if err != nil {
		var lines strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&lines, "\n  %s = %s", k.name, k.value)
		}
		return fmt.Errorf("config %s: %v; under [context_proxy.agents] put:%s", path, err, lines.String())
	}
	if !bytes.Equal(text, old) {
		if err := writeConfigFile(path, text); err != nil {
			return fmt.Errorf("save config: %w", err)
		}
	}
	fmt.Fprintf(sys.stdout, "trimming %s for %s: saved in %s\n", name, strings.Join(agents, ", "), path)
	if v := strings.TrimSpace(sys.getenv(keyEnabled.env)); v != "" {
		fmt.Fprintf(sys.stdout, "note: %s=%s is set here; where it is set for the service, it overrides [context_proxy.agents]\n", keyEnabled.env, v)
	}

	base := "http://127.0.0.1:" + strconv.Itoa(cfg.Port)
	for i, a := range agents {
		state, err := setRemoteToggle(ctx, base, a, on)
		var down *serviceDownError
		switch {
		case errors.As(err, &down) && i == 0:
			fmt.Fprintf(sys.stdout, "the service is not running at %s: the change applies when it starts\n", base)
			return nil
		case err != nil:
			return fmt.Errorf("saved, but the running service did not take the change for %s: %w\nrestart the service to apply it: smarter-compact service stop && smarter-compact service start", a, err)
		case state != on:
			return fmt.Errorf("saved, but the running service reports %s %s", a, onOffWord(state))
		}
	}
	fmt.Fprintf(sys.stdout, "the running service at %s switched: the next request follows it\n", base)
	return nil
}

func onOffWord(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// pickAgents validates the agents named on the command line, in display order without
// duplicates; none means all.
func pickAgents(cmd string, names []string) ([]string, error) {
	if len(names) == 0 {
		return slices.Clone(configuredAgents), nil
	}
	var out []string
	for _, n := range names {
		if !slices.Contains(configuredAgents, n) {
			return nil, usageError{fmt.Sprintf("%s: unknown agent %q: use %s", cmd, n, strings.Join(configuredAgents, ", "))}
		}
	}
	for _, a := range configuredAgents {
		if slices.Contains(names, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// serviceDownError is a control API call that found no service listening.
type serviceDownError struct{ err error }

func (e *serviceDownError) Error() string { return e.err.Error() }
func (e *serviceDownError) Unwrap() error { return e.err }

// setRemoteToggle calls POST <base>/api/agents/<agent> and returns the state the service
// reports.
func setRemoteToggle(ctx context.Context, base, agent string, on bool) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]bool{"enabled": on})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/agents/"+agent, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		if isConnRefused(err) {
			return false, &serviceDownError{err}
		}
		return false, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return false, fmt.Errorf("%s: %s", resp.Status, e.Error)
		}
		return false, fmt.Errorf("POST /api/agents/%s answered %s (an older smarter-compact, or another program on the port?)", agent, resp.Status)
	}
	var st agentState
	if err := json.Unmarshal(b, &st); err != nil || st.Agent != agent {
		return false, fmt.Errorf("POST /api/agents/%s: unexpected answer %q", agent, b)
	}
	return st.Enabled, nil
}

// isConnRefused reports a failed dial: nothing listens on the port (on every OS, where
// the refusal's errno differs).
func isConnRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
