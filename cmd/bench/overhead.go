package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

// Arms of the overhead comparison.
const (
	armDirect = iota // (a) straight to the upstream
	armBare          // (b) through httputil.ReverseProxy
	armServe         // (c) through smarter-compact serve
	armPeer          // (d) through a peer Claude Code gateway (-peers); absent when not installed
	nArms
)

var armNames = [nArms]string{"direct", "bare proxy", "serve", "peer"}

// overheadTrimAt is serve's threshold in the overhead runs: above the largest request
// (1M tokens and its growth), so a warm request is never trimmed; new cuts are forced
// (sessions/<sid>.force).
const overheadTrimAt = 2_000_000

// latencyCase is one stream of the overhead run.
type latencyCase struct {
	Tokens int
	Kind   string // "warm" or "new cut"
	N      int
	// TTFB and TTLB per arm, in ms, one per request (request i is the same body in every arm).
	TTFB, TTLB [nArms][]float64
	Bytes      int // mean request body bytes
}

type rpsCase struct {
	Sessions int
	RPS      [nArms]float64
	P50      [nArms]float64 // last-byte latency, ms
	// serve's VmHWM (a fresh serve per level): after the first round, which holds exactly
	// Sessions sessions, and after all rounds (SessionsSeen sessions).
	PeakMB, PeakAllMB float64
	SessionsSeen      int
	Requests          [nArms]int
}

type overheadResult struct {
	Cases        []*latencyCase
	Peer         peerInfo // the peer arm: what ran, or why it was skipped
	RPS          []*rpsCase
	RPSTokens    int
	RPSSeconds   float64
	PeakMB       float64   // serve's VmHWM over the whole latency run
	PeakSessions int       // sessions serve saw in the latency run
	Profiles     *profiles // serve under pprof; nil without Profile in the plan
	CutChecked   int       // new-cut sessions checked for exactly one trim event
	// serve's CPU time (all threads, /proc/<pid>/task/*/schedstat) per warm request of each
	// size, in ms: the warm stream's CPU less its sessions' first requests, each measured
	// from idle to idle so the store writes the request queued are in it. NaN off Linux.
	WarmCPU map[int]float64
	// BareWarmCPU is the same for the bare reverse proxy over the same requests: the floor
	// a proxy that reads and writes these bytes pays on this machine (syscalls, copies).
	BareWarmCPU map[int]float64
}

// rig is the arms of the overhead run; an arm whose url is "" is not in it.
type rig struct {
	urls    [nArms]string
	clients [nArms]*http.Client
	serve   *proc
	bare    *proc // the bare reverse proxy, for its CPU time; nil where not measured
	mu      sync.Mutex
	seen    map[string]bool // session ids sent to serve
}

func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}

// send posts body as Claude Code does and reads the whole event stream: the time to the
// first byte of the body and to its end. The stream must carry streamEvents events and end
// with message_stop.
func (r *rig) send(arm int, sid string, body []byte) (ttfb, ttlb time.Duration, err error) {
	if arm == armServe {
		r.mu.Lock()
		if r.seen == nil {
			r.seen = map[string]bool{}
		}
		r.seen[sid] = true
		r.mu.Unlock()
	}
	req, _ := http.NewRequest(http.MethodPost, r.urls[arm], bytes.NewReader(body))
	setClaudeHeaders(req.Header, sid)
	start := time.Now()
	resp, err := r.clients[arm].Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
		return 0, 0, fmt.Errorf("%s: status %d: %s", armNames[arm], resp.StatusCode, b)
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	if _, err := br.Peek(1); err != nil {
		return 0, 0, fmt.Errorf("%s: first byte: %w", armNames[arm], err)
	}
	ttfb = time.Since(start)
	events, stopped := 0, false
	for {
		line, err := br.ReadSlice('\n')
		if bytes.HasPrefix(line, []byte("event: ")) {
			events++
			stopped = bytes.HasPrefix(line, []byte("event: message_stop"))
		}
		if err == io.EOF {
			break
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return 0, 0, fmt.Errorf("%s: read stream: %w", armNames[arm], err)
		}
	}
	ttlb = time.Since(start)
	if events != streamEvents || !stopped {
		return 0, 0, fmt.Errorf("%s: %d events (message_stop last: %v), want %d", armNames[arm], events, stopped, streamEvents)
	}
	return ttfb, ttlb, nil
}

func setClaudeHeaders(h http.Header, sid string) {
	h.Set("Content-Type", "application/json")
	h.Set("X-Api-Key", "sk-ant-bench")
	h.Set("Anthropic-Version", "2023-06-01")
	h.Set("Anthropic-Beta", "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27")
	h.Set("X-Claude-Code-Session-Id", sid)
	h.Set("User-Agent", "claude-cli/2.1.332 (external, sdk-cli)")
}

// active lists the arms in the run.
func (r *rig) active() []int {
	var out []int
	for arm, u := range r.urls {
		if u != "" {
			out = append(out, arm)
		}
	}
	return out
}

// all sends body to every arm, unmeasured (session primes).
func (r *rig) all(sid string, body []byte) error {
	for _, arm := range r.active() {
		if _, _, err := r.send(arm, sid, body); err != nil {
			return err
		}
	}
	return nil
}

// measure sends body to the arms in an order that rotates with i, so no arm always goes
// first on a warm connection or a fresh CPU cache.
func (r *rig) measure(lc *latencyCase, i int, sid string, body []byte) error {
	arms := r.active()
	for k := range arms {
		arm := arms[(i+k)%len(arms)]
		fb, lb, err := r.send(arm, sid, body)
		if err != nil {
			return err
		}
		lc.TTFB[arm] = append(lc.TTFB[arm], ms(fb))
		lc.TTLB[arm] = append(lc.TTLB[arm], ms(lb))
	}
	return nil
}

// forceCut makes serve's next request of sid a new cut (contract: sessions/<sid>.force).
func forceCut(stateDir, sid string) error {
	return os.WriteFile(filepath.Join(stateDir, "context", "sessions", sid+".force"), nil, 0o600)
}

// overheadPlan sets the sizes and sample counts.
type overheadPlan struct {
	Tokens     []int
	WarmN      map[int]int
	CutN       map[int]int
	RPSTokens  int
	RPSLevels  []int
	RPSSeconds float64
	Profile    bool
	Peers      bool   // run the peer arm, installing it under PeerCache when needed
	PeerCache  string // where npm installs the peer, kept between runs
}

// runOverhead runs the overhead comparison: the lean upstream, the bare proxy and serve as
// the three arms, the latency streams of pl, the trim check of the new cuts, the throughput
// levels on fresh serves and, when pl.Profile, the profiled serve.
func runOverhead(ctx context.Context, pl overheadPlan, bin, tmp string, logf func(string, ...any)) (*overheadResult, error) {
	res := &overheadResult{RPSTokens: pl.RPSTokens, RPSSeconds: pl.RPSSeconds, WarmCPU: map[int]float64{}, BareWarmCPU: map[int]float64{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	upstream := &http.Server{Handler: leanUpstream(), ReadHeaderTimeout: 10 * time.Second}
	go upstream.Serve(ln)
	defer upstream.Close()
	upURL := "http://" + ln.Addr().String()

	bare, err := startRole("bare-proxy", tmp, "bare-proxy", serveConfig{Upstream: upURL}, upURL)
	if err != nil {
		return nil, err
	}
	defer bare.stop()
	cfg := serveConfig{Upstream: upURL, TrimAt: overheadTrimAt}
	srv, err := startServe("serve-overhead", bin, tmp, cfg)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	r := &rig{serve: srv, bare: bare}
	r.urls = [nArms]string{upURL + "/v1/messages?beta=true", bare.url() + "/claude-code/v1/messages?beta=true", srv.url() + "/claude-code/v1/messages?beta=true", ""}
	if !pl.Peers {
		res.Peer = peerInfo{Name: peerName, Skipped: "not asked for: run `make bench PEERS=1` (or -peers) to install it from npm and add its arm"}
	} else {
		var peer *proc
		peer, res.Peer = startPeer(ctx, pl.PeerCache, tmp, upURL, logf)
		if peer != nil {
			defer peer.stop()
			r.urls[armPeer] = peer.url() + "/v1/messages?beta=true"
		} else {
			logf("peer arm skipped: %s", res.Peer.Skipped)
		}
	}
	for i := range r.clients {
		r.clients[i] = newClient()
	}

	cutSIDs, err := latencyStreams(ctx, r, srv, pl, res, logf)
	if err != nil {
		return nil, err
	}
	r.urls[armPeer] = "" // the throughput levels and the profile compare serve with bare only
	res.PeakMB, res.PeakSessions = srv.peakMB(), len(r.seen)
	if err := srv.stop(); err != nil {
		return nil, err
	}
	if err := checkCutTrims(srv.stateDir, cutSIDs, res); err != nil {
		return nil, err
	}
	if err := throughputLevels(ctx, r, bin, tmp, cfg, pl, res, logf); err != nil {
		return nil, err
	}
	if pl.Profile {
		if res.Profiles, err = profileServe(ctx, r, tmp, cfg, pl); err != nil {
			return nil, fmt.Errorf("profile: %w", err)
		}
	}
	return res, nil
}

// latencyStreams runs, per size of pl.Tokens, the warm stream and then the new-cut stream
// through all arms, appending each case to res.Cases and logging its medians. It returns
// the first and last session id of every new-cut stream, for checkCutTrims. A step of its
// own because it is the latency half of the run, on the one serve started for it.
func latencyStreams(ctx context.Context, r *rig, srv *proc, pl overheadPlan, res *overheadResult, logf func(string, ...any)) ([]string, error) {
	var cutSIDs []string
	for _, tokens := range pl.Tokens {
		for _, kind := range []string{"warm", "new cut"} {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			n := pl.WarmN[tokens]
			if kind == "new cut" {
				n = pl.CutN[tokens]
			}
			lc := &latencyCase{Tokens: tokens, Kind: kind, N: n}
			start := time.Now()
			var sids []string
			var err error
			if kind == "warm" {
				var cpu, bareCPU float64
				cpu, bareCPU, err = warmStream(r, lc, fmt.Sprintf("bench-warm-%d", tokens))
				res.WarmCPU[tokens], res.BareWarmCPU[tokens] = cpu, bareCPU
			} else {
				sids, err = cutStream(r, lc, fmt.Sprintf("bench-cut-%d", tokens), srv.stateDir)
				if len(sids) > 0 {
					cutSIDs = append(cutSIDs, sids[0], sids[len(sids)-1])
				}
			}
			if err != nil {
				return nil, fmt.Errorf("overhead %dk %s: %w", tokens/1000, kind, err)
			}
			res.Cases = append(res.Cases, lc)
			logf("overhead %s %s: n=%d in %s; last-byte p50 direct %.2f / bare %.2f / serve %.2f / peer %.2f ms", ktok(tokens), kind, n,
				time.Since(start).Round(time.Millisecond), pct(lc.TTLB[armDirect], 50), pct(lc.TTLB[armBare], 50), pct(lc.TTLB[armServe], 50), pct(lc.TTLB[armPeer], 50))
		}
	}
	return cutSIDs, nil
}

// checkCutTrims opens the stopped serve's store under stateDir and checks that every forced
// cut of sids made exactly one trim event, counting each checked session in res.CutChecked.
// A step of its own because it reads serve's store after the run, not its answers.
func checkCutTrims(stateDir string, sids []string, res *overheadResult) error {
	root, err := store.Open(filepath.Join(stateDir, "context"))
	if err != nil {
		return err
	}
	defer root.Close()
	for _, sid := range sids {
		n, err := queryInt(root, sid, `SELECT count(*) FROM events WHERE kind = 'trim'`)
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("overhead: new-cut session %s has %d trim events, want 1", sid, n)
		}
		res.CutChecked++
	}
	return nil
}

// throughputLevels measures throughput, and serve's peak RSS, on a fresh serve per
// concurrency level of pl.RPSLevels, pointing r's serve arm at it and appending each level
// to res.RPS. A step of its own because each level starts and stops its own serve.
func throughputLevels(ctx context.Context, r *rig, bin, tmp string, cfg serveConfig, pl overheadPlan, res *overheadResult, logf func(string, ...any)) error {
	for _, c := range pl.RPSLevels {
		srv2, err := startServe(fmt.Sprintf("serve-rps%d", c), bin, tmp, cfg)
		if err != nil {
			return err
		}
		r.serve = srv2
		r.urls[armServe] = srv2.url() + "/claude-code/v1/messages?beta=true"
		rc, err := rpsRun(ctx, r, srv2, c, pl.RPSTokens, pl.RPSSeconds)
		if err != nil {
			srv2.stop()
			return fmt.Errorf("throughput at %d sessions: %w", c, err)
		}
		if err := srv2.stop(); err != nil {
			return err
		}
		res.RPS = append(res.RPS, rc)
		logf("throughput %d sessions: direct %.0f / bare %.0f / serve %.0f req/s; serve peak RSS %.1f MB with %d sessions, %.1f MB after %d", c,
			rc.RPS[armDirect], rc.RPS[armBare], rc.RPS[armServe], rc.PeakMB, c, rc.PeakAllMB, rc.SessionsSeen)
	}
	return nil
}

// warmStream: a session whose previous request serve has seen; each measured request adds
// one tool step. A session is replaced (its first request unmeasured) once it grew by a
// tenth, to keep the size near lc.Tokens. It returns serve's and the bare proxy's CPU time
// per measured request in ms: each one's CPU over the stream less the sessions' first
// requests, every reading taken with the process idle (serve's queued store writes done),
// NaN when it cannot be read (bare: when r.bare is nil).
func warmStream(r *rig, lc *latencyCase, prefix string) (serveCPU, bareCPU float64, err error) {
	sessions := 0
	var c *convo
	var primeCPU [2]time.Duration // serve's and bare's CPU in the sessions' first requests
	cpus := func() [2]time.Duration {
		var b time.Duration = -1
		if r.bare != nil {
			b = r.bare.idleCPU()
		}
		return [2]time.Duration{r.serve.idleCPU(), b}
	}
	fresh := func() error {
		sessions++
		c = convoOf(fmt.Sprintf("%s-%04d", prefix, sessions), lc.Tokens)
		before := cpus()
		err := r.all(c.SID, c.body())
		after := cpus()
		primeCPU[0] += after[0] - before[0]
		primeCPU[1] += after[1] - before[1]
		return err
	}
	start := cpus()
	if err := fresh(); err != nil {
		return nan, nan, err
	}
	limit := lc.Tokens + max(lc.Tokens/10, 1000)
	total := 0
	for i := 0; i < lc.N; i++ {
		c.add()
		if c.size() > limit {
			if err := fresh(); err != nil {
				return nan, nan, err
			}
			c.add()
		}
		body := c.body()
		total += len(body)
		if err := r.measure(lc, i, c.SID, body); err != nil {
			return nan, nan, err
		}
	}
	lc.Bytes = total / max(lc.N, 1)
	end := cpus()
	if lc.N == 0 {
		return nan, nan, nil
	}
	per := func(k int) float64 {
		if start[k] < 0 || end[k] < 0 {
			return nan
		}
		return ms(end[k]-start[k]-primeCPU[k]) / float64(lc.N)
	}
	return per(0), per(1), nil
}

// cutStream: each measured request makes a new cut on a session warmed (unmeasured, in every
// arm) with the same history minus one step. It returns the session ids.
func cutStream(r *rig, lc *latencyCase, prefix, stateDir string) ([]string, error) {
	base := convoOf(prefix+"-0000", lc.Tokens)
	var sids []string
	total := 0
	for i := 0; i < lc.N; i++ {
		c := base.withSession(fmt.Sprintf("%s-%04d", prefix, i+1))
		if err := r.all(c.SID, c.body()); err != nil {
			return sids, err
		}
		if stateDir != "" {
			if err := forceCut(stateDir, c.SID); err != nil {
				return sids, err
			}
		}
		c.add()
		body := c.body()
		total += len(body)
		if err := r.measure(lc, i, c.SID, body); err != nil {
			return sids, err
		}
		sids = append(sids, c.SID)
	}
	lc.Bytes = total / max(lc.N, 1)
	return sids, nil
}

// rpsSteps is how many warm requests each session sends in one round of a throughput run:
// about 13k tokens of growth on a 120k session.
const rpsSteps = 30

// rpsRun measures requests per second with sessions concurrent sessions against each arm:
// rounds of fresh sessions, primed (unmeasured, their first request is a cold store of the
// whole history), then each sending rpsSteps warm requests back to back; rounds repeat until
// the measured time reaches seconds. srv must be fresh: its VmHWM after the first round is
// the peak with exactly sessions sessions.
func rpsRun(ctx context.Context, r *rig, srv *proc, sessions, tokens int, seconds float64) (*rpsCase, error) {
	rc := &rpsCase{Sessions: sessions}
	gen := 0
	for _, arm := range []int{armBare, armServe, armDirect} {
		var measured time.Duration
		count := 0
		var lat []float64
		for round := 0; measured.Seconds() < seconds && ctx.Err() == nil; round++ {
			convos := make([]*convo, sessions)
			errs := make([]error, sessions)
			var wg sync.WaitGroup
			for s := range convos {
				gen++
				convos[s] = convoOf(fmt.Sprintf("bench-rps%d-%d-%d", sessions, arm, gen), tokens)
				wg.Go(func() { _, _, errs[s] = r.send(arm, convos[s].SID, convos[s].body()) })
			}
			wg.Wait()
			var mu sync.Mutex
			start := time.Now()
			for s := range convos {
				wg.Go(func() {
					c := convos[s]
					for i := 0; i < rpsSteps && errs[s] == nil; i++ {
						c.add()
						var lb time.Duration
						_, lb, errs[s] = r.send(arm, c.SID, c.body())
						mu.Lock()
						lat = append(lat, ms(lb))
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			measured += time.Since(start)
			if arm == armServe {
				if round == 0 { // exactly `sessions` sessions so far
					rc.PeakMB = srv.peakMB()
				}
				rc.SessionsSeen += sessions
			}
			for _, err := range errs {
				if err != nil {
					return nil, err
				}
			}
			count += sessions * rpsSteps
		}
		rc.RPS[arm] = float64(count) / measured.Seconds()
		rc.Requests[arm] = count
		rc.P50[arm] = pct(lat, 50)
		if arm == armServe {
			rc.PeakAllMB = srv.peakMB()
		}
	}
	return rc, nil
}

// queryInt runs a one-number SELECT on a session database of root through the read-only
// reader.
func queryInt(root *store.Root, sid, q string) (int, error) {
	rd, err := root.OpenReader(sid)
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	res, err := rd.Query(context.Background(), q, 0)
	if err != nil {
		return 0, fmt.Errorf("%s on %s: %w", q, sid, err)
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return 0, fmt.Errorf("%s on %s: %d rows", q, sid, len(res.Rows))
	}
	switch v := res.Rows[0][0].(type) {
	case int64:
		return int(v), nil
	case float64:
		return int(v), nil
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("%s on %s: %T", q, sid, res.Rows[0][0])
}
