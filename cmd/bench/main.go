// Command bench measures smarter-compact on this machine and writes docs/benchmarks.md and
// the plots in docs/bench/*.svg (issues 7 and 18): the proxy's overhead against a bare
// reverse proxy, a direct connection and, with -peers, a peer gateway; a replay of long
// ContextBench-like sessions through `serve` against the strict fake upstream's prompt-cache
// model; the context store at scale; and hybrid, pattern and lexical search on one seeded
// session, directly and through `smarter-compact mcp`. The aims of issue 18 head the report
// with their verdicts.
//
// Run it with `make bench`, or
//
//	go run -tags sqlite_fts5 ./cmd/bench -bin bin/smarter-compact -out docs
//
// -quick runs every part at tiny sizes (the unit test does). Everything runs on loopback with
// its own temp config, state and HOME; nothing of the user's is read or written. The
// numbers in the markdown come from this program only: never edit them by hand.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

var nan = math.NaN()

// options of one run.
type options struct {
	Bin   string // the smarter-compact binary (serve)
	Out   string // docs directory: benchmarks.md and bench/*.svg
	Tmp   string // scratch directory; "" makes one
	Quick bool
	Only  string // comma-separated parts: overhead, replay, scale, search; "" for all
	Seed  uint64
	Peers bool // add the peer arm (claude-code-router from npm) to the latency streams
	// PeerCache is where npm installs the peer, kept between runs.
	PeerCache string
	Log       func(string, ...any)
}

// results of one run, for the report and the unit test.
type results struct {
	Opts     options
	Machine  machine
	Overhead *overheadResult
	OPlan    overheadPlan
	Replay   []*replayCase
	RPlan    replayPlan
	Scale    []*scaleCase
	SPlan    scalePlan
	Search   *searchResult
	QPlan    searchPlan
	Wall     time.Duration
	Markdown string
}

func plans(quick bool, seed uint64) (overheadPlan, replayPlan, scalePlan, searchPlan) {
	if quick {
		return overheadPlan{
				Tokens:    []int{10_000, 120_000, 400_000},
				WarmN:     map[int]int{10_000: 6, 120_000: 6, 400_000: 3},
				CutN:      map[int]int{10_000: 3, 120_000: 3, 400_000: 2},
				RPSTokens: 120_000, RPSLevels: []int{1, 4}, RPSSeconds: 0.4, Profile: true,
			}, replayPlan{KV: []int{60, 300}, Log: []int{300}, Questions: 8, TrimAt: 12_000, Mini: true, Seed: seed},
			scalePlan{Sessions: []int{3, 10}, RowsPerSession: 30, Rows: []int{2_000}, Searches: 10, Seed: seed},
			searchPlan{Rows: 2_000, Dim: 768, Matching: 50, Searches: 10, Seed: seed}
	}
	return overheadPlan{
			Tokens:    []int{10_000, 120_000, 400_000, 1_000_000},
			WarmN:     map[int]int{10_000: 300, 120_000: 300, 400_000: 100, 1_000_000: 60},
			CutN:      map[int]int{10_000: 200, 120_000: 150, 400_000: 60, 1_000_000: 20},
			RPSTokens: 120_000, RPSLevels: []int{1, 8, 32}, RPSSeconds: 6, Profile: true,
		}, replayPlan{KV: []int{1000, 4000, 16000}, Log: []int{1600, 6400, 12800}, Questions: 24, TrimAt: 120_000, Seed: seed},
		scalePlan{Sessions: []int{10, 100, 1000}, RowsPerSession: 200, Rows: []int{10_000, 100_000, 1_000_000}, Searches: 100, Seed: seed},
		searchPlan{Rows: 50_000, Dim: 768, Matching: 500, Searches: 100, Seed: seed}
}

func (o options) wants(part string) bool {
	if o.Only == "" {
		return true
	}
	for _, p := range strings.Split(o.Only, ",") {
		if strings.TrimSpace(p) == part {
			return true
		}
	}
	return false
}

// run measures and writes the report.
func run(ctx context.Context, o options) (*results, error) {
	start := time.Now()
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.Tmp == "" {
		d, err := os.MkdirTemp("", "smarter-compact-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		o.Tmp = d
	} else if err := os.MkdirAll(o.Tmp, 0o700); err != nil {
		return nil, err
	}
	bin, err := filepath.Abs(o.Bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the smarter-compact binary: %w (run `make build`, or pass -bin)", err)
	}
	res := &results{Opts: o, Machine: readMachine()}
	res.OPlan, res.RPlan, res.SPlan, res.QPlan = plans(o.Quick, o.Seed)
	res.OPlan.Peers, res.OPlan.PeerCache = o.Peers, o.PeerCache
	if !o.wants("overhead") && o.wants("throughput") {
		// the throughput and memory part of overhead alone, for work on serve's memory
		res.OPlan.Tokens, res.OPlan.Profile = nil, false
		o.Only += ",overhead"
	}
	if o.wants("overhead") {
		o.Log("overhead: direct, bare reverse proxy and serve, interleaved")
		if res.Overhead, err = runOverhead(ctx, res.OPlan, bin, o.Tmp, o.Log); err != nil {
			return nil, err
		}
	}
	if o.wants("replay") {
		res.RPlan.DumpDir = o.Out
		o.Log("replay: long sessions through serve against the strict fake's prompt cache")
		if res.Replay, err = runReplay(ctx, res.RPlan, bin, o.Tmp, o.Log); err != nil {
			return nil, err
		}
	}
	if o.wants("scale") {
		o.Log("scale: the context store")
		if res.Scale, err = runScale(ctx, res.SPlan, o.Tmp, o.Log); err != nil {
			return nil, err
		}
	}
	if o.wants("search") {
		o.Log("search: hybrid, pattern and lexical search on one seeded session, and lexical through `smarter-compact mcp`")
		if res.Search, err = runSearch(ctx, res.QPlan, bin, o.Tmp, o.Log); err != nil {
			return nil, err
		}
	}
	res.Machine.LoadEnd = loadAvg()
	res.Wall = time.Since(start)
	res.Markdown = report(res)
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	if err := writePlots(res, filepath.Join(o.Out, "bench")); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "benchmarks.md"), []byte(res.Markdown), 0o644); err != nil {
		return nil, err
	}
	return res, nil
}

// machine is where and what was measured.
type machine struct {
	Date, Commit, CPU, OS, Go string
	Cores                     int
	LoadStart, LoadEnd        string
}

func readMachine() machine {
	m := machine{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Cores: runtime.NumCPU(),
		OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version(), CPU: "unknown", LoadStart: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	m.Commit = "unknown"
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		// The report's own files do not count: a second run before the first one's report is
		// committed would otherwise say its code was not the commit's.
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ".",
			":(exclude)docs/benchmarks.md", ":(exclude)docs/bench").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			m.Commit += " (with uncommitted changes)"
		}
	}
	return m
}

// loadAvg is the 1, 5 and 15 minute load average from /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func main() {
	role := flag.String("role", "", "internal: run as a helper child (bare-proxy, serve-profiled)")
	bin := flag.String("bin", "bin/smarter-compact", "the smarter-compact `binary` to run as serve")
	out := flag.String("out", "docs", "write benchmarks.md and bench/*.svg under `dir`")
	quick := flag.Bool("quick", false, "tiny sizes: checks that every part runs, in about a minute")
	only := flag.String("only", "", "run only these `parts` (comma-separated: overhead, replay, scale, search; throughput is the throughput and memory table of overhead alone); the report leaves the others out")
	seed := flag.Uint64("seed", 42, "seed of the generated sessions")
	peers := flag.Bool("peers", false, "add the peer arm: claude-code-router "+peerVersion+" from npm, in the latency streams (skipped, with the reason in the report, when it cannot be installed)")
	peerCache := flag.String("peer-cache", ".cache/bench-peers", "install the peer under `dir` (kept between runs)")
	work := flag.String("work", "", "keep the run's working files under `dir` (serve's pprof profiles serve-cpu.pprof*, serve-allocs.pprof*, the stores, the logs) instead of a temporary folder removed at the end")
	flag.Parse()
	if *role != "" {
		if err := runRole(*role, flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", *role+":", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	res, err := run(ctx, options{Bin: *bin, Out: *out, Quick: *quick, Only: *only, Seed: *seed, Peers: *peers, PeerCache: *peerCache, Tmp: *work, Log: logf})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	logf("wrote %s and %s in %s", filepath.Join(*out, "benchmarks.md"), filepath.Join(*out, "bench"), res.Wall.Round(time.Second))
}
