package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// proc is a child process that serves HTTP on a loopback port: the real `smarter-compact
// serve`, or this program in one of its helper roles (the bare reverse proxy, the profiled
// in-process serve). Each serve gets its own config.toml, state directory and HOME, so a run
// never touches the user's store, config or port.
type proc struct {
	name     string
	cmd      *exec.Cmd
	port     int
	dir      string // temp dir: config.toml, state/, home/
	stateDir string
	health   string // the path answering 200 once it serves
	log      *lockedBuffer
	done     chan struct{}
	err      error
}

// serveConfig is the config.toml of one serve: the upstream and the [context_proxy] keys.
type serveConfig struct {
	Upstream     string // Anthropic upstream base URL
	TrimAt       int    // [context_proxy] trim_at_tokens; 0 leaves it unset (model default)
	AgentOff     bool   // [context_proxy.agents] claude-code = false: plain pass-through
	ExtraContext string // more [context_proxy] lines
}

func (c serveConfig) toml() string {
	var b strings.Builder
	b.WriteString("# written by cmd/bench\n[context_proxy]\n")
	if c.TrimAt > 0 {
		fmt.Fprintf(&b, "trim_at_tokens = %d\n", c.TrimAt)
	}
	b.WriteString(c.ExtraContext)
	if c.AgentOff {
		b.WriteString("\n[context_proxy.agents]\nclaude-code = false\n")
	}
	fmt.Fprintf(&b, "\n[upstream]\nanthropic = %q\n", c.Upstream)
	return b.String()
}

// startServe runs `bin serve --no-tray --port N` in a fresh temp dir under base.
func startServe(name, bin, base string, cfg serveConfig) (*proc, error) {
	return startProc(name, base, cfg, func(port int, _ string, env []string) *exec.Cmd {
		c := exec.Command(bin, "serve", "--no-tray", "--port", strconv.Itoa(port))
		c.Env = env
		return c
	}, "/healthz")
}

// startProc starts the command mk builds on a free port with an isolated environment (its
// temp dir, which holds config.toml and home/, is mk's dir) and waits for GET health to
// answer 200 (serve and the helper roles answer /healthz).
func startProc(name, base string, cfg serveConfig, mk func(port int, dir string, env []string) *exec.Cmd, health string) (*proc, error) {
	dir, err := os.MkdirTemp(base, name+"-")
	if err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(config, []byte(cfg.toml()), 0o600); err != nil {
		return nil, err
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		p := &proc{name: name, port: port, dir: dir, stateDir: filepath.Join(dir, "state"), health: health, log: &lockedBuffer{}, done: make(chan struct{})}
		env := []string{
			"PATH=" + os.Getenv("PATH"),
			"HOME=" + filepath.Join(dir, "home"),
			"XDG_CONFIG_HOME=" + filepath.Join(dir, "home", ".config"),
			"SMARTER_COMPACT_CONFIG=" + config,
			"SMARTER_COMPACT_STATE_DIR=" + p.stateDir,
		}
		// the Go runtime's knobs pass through, so their effect on serve can be measured
		for _, k := range []string{"GOGC", "GOMEMLIMIT", "GODEBUG"} {
			if v, ok := os.LookupEnv(k); ok {
				env = append(env, k+"="+v)
			}
		}
		p.cmd = mk(port, dir, env)
		p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
		if err := p.cmd.Start(); err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		go func() { p.err = p.cmd.Wait(); close(p.done) }()
		if last = p.waitHealthy(30 * time.Second); last == nil {
			return p, nil
		}
		p.cmd.Process.Kill()
		<-p.done
		if !strings.Contains(p.log.String(), "in use") {
			break
		}
	}
	return nil, fmt.Errorf("%s did not start: %w", name, last)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (p *proc) url() string { return "http://127.0.0.1:" + strconv.Itoa(p.port) }

func (p *proc) waitHealthy(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v) before answering %s:\n%s", p.name, p.err, p.health, p.log)
		default:
		}
		resp, err := http.Get(p.url() + p.health)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", p.health, resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %s: %v\n%s", p.health, limit, err, p.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop interrupts the process (serve shuts down gracefully and closes its databases) and
// waits for it.
func (p *proc) stop() error {
	// the log goes beside the process's files, kept with them under -work
	defer func() { _ = os.WriteFile(filepath.Join(p.dir, p.name+".log"), []byte(p.log.String()), 0o600) }()
	select {
	case <-p.done:
		return p.exitErr()
	default:
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		return fmt.Errorf("interrupt %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return p.exitErr()
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within 30 s of an interrupt", p.name)
	}
}

func (p *proc) exitErr() error {
	if p.err != nil {
		return fmt.Errorf("%s exited: %w\n%s", p.name, p.err, tail(p.log.String(), 2000))
	}
	return nil
}

// status reads a field of /proc/<pid>/status in kB (VmHWM: peak resident set; VmRSS: now).
func (p *proc) status(field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, p.cmd.Process.Pid)
}

// peakMB returns VmHWM in MB, NaN when it cannot be read (not Linux).
func (p *proc) peakMB() float64 {
	kb, err := p.status("VmHWM")
	if err != nil {
		return nan
	}
	return float64(kb) / 1024
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 8<<20 { // keep the head and stop growing: serve logs a line per trim
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// cpu is the process's CPU time so far: the sum over its threads of the first field of
// /proc/<pid>/task/<tid>/schedstat (nanoseconds on a CPU, exact, unlike the clock ticks of
// /proc/<pid>/stat). Go keeps its threads, so none of the time leaves with an exited thread.
// It is -1 when it cannot be read (not Linux).
func (p *proc) cpu() time.Duration {
	dir := fmt.Sprintf("/proc/%d/task", p.cmd.Process.Pid)
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return -1
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited between the listing and the read
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return -1
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return -1
		}
		sum += time.Duration(n)
	}
	return sum
}

// idleCPU waits until the process is idle (less than 0.3 ms of CPU in 30 ms, at most 3 s:
// serve's store writes run after the answer) and returns its CPU time, -1 when it cannot
// be read.
func (p *proc) idleCPU() time.Duration {
	prev := p.cpu()
	if prev < 0 {
		return -1
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		time.Sleep(30 * time.Millisecond)
		now := p.cpu()
		if now-prev < 300*time.Microsecond {
			return now
		}
		prev = now
	}
	return prev
}
