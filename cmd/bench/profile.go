package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// profiles are `go tool pprof -top` outputs of serve: where its time and memory go.
type profiles struct {
	WarmCum, WarmFlat string // CPU over the 120k warm requests, the sessions' first requests left out
	CutCum, CutFlat   string // CPU over the 120k new-cut requests, their sessions' first requests left out
	Alloc             string // allocations over the whole profiled run
	Inuse             string // live heap in the middle of the largest concurrency level
}

// profiledServe is serve run as app.Main in a child of this program, whose CPU profile the
// bench turns on and off (SIGUSR2), each stretch in a file of its own.
type profiledServe struct {
	*proc
	cpu   string
	files int  // CPU profile files started so far
	on    bool // the profile is running
}

func (p *profiledServe) toggle() error {
	if err := signalProfileToggle(p.cmd.Process); err != nil {
		return err
	}
	if !p.on {
		p.files++
	}
	p.on = !p.on
	time.Sleep(50 * time.Millisecond) // the child acts on the signal before the next request
	return nil
}

func (p *profiledServe) set(on bool) error {
	if p.on == on {
		return nil
	}
	return p.toggle()
}

// minProfiledWarm and minProfiledCuts are the fewest requests a profile covers: the CPU
// profiler samples every 10 ms, and a -quick run's 6 warm requests (about 25 ms of CPU) came
// back with no sample at all now and then, failing TestQuickRun.
const (
	minProfiledWarm = 60
	minProfiledCuts = 15
)

// profileServe drives the profiled serve, serve arm only: the 120k warm stream and the 120k
// new-cut stream (CPU profiled, the sessions' first requests left out), then one round of
// the largest concurrency level, during which it takes the live heap.
func profileServe(ctx context.Context, r *rig, tmp string, cfg serveConfig, pl overheadPlan) (*profiles, error) {
	cpu := filepath.Join(tmp, "serve-cpu.pprof")
	allocs := filepath.Join(tmp, "serve-allocs.pprof")
	pr, err := startRole("serve-profiled", tmp, "serve-profiled", cfg, cpu, allocs)
	if err != nil {
		return nil, err
	}
	defer pr.stop()
	p := &profiledServe{proc: pr, cpu: cpu}
	saved := r.urls[armServe]
	defer func() { r.urls[armServe] = saved }()
	r.urls[armServe] = p.url() + "/claude-code/v1/messages?beta=true"
	send := func(c *convo) error {
		_, _, err := r.send(armServe, c.SID, c.body())
		return err
	}
	tokens := 120_000

	if err := profileWarm(ctx, p, send, max(pl.WarmN[tokens], minProfiledWarm), tokens); err != nil {
		return nil, err
	}
	warmFiles := p.files
	if err := profileCuts(ctx, p, send, max(pl.CutN[tokens], minProfiledCuts), tokens); err != nil {
		return nil, err
	}
	if err := profileLiveHeap(p, send, pl); err != nil {
		return nil, err
	}
	if err := p.stop(); err != nil {
		return nil, err
	}
	return readProfiles(cpu, allocs, warmFiles, p.files)
}

// profileWarm is the warm stream: n follow-up requests on sessions of about tokens, CPU
// profiled, each session's first request left out (the profile is off while it is sent).
// It is a step of its own because it keeps its own session state (the current
// conversation and how many were started); the profile is off when it returns.
func profileWarm(ctx context.Context, p *profiledServe, send func(*convo) error, n, tokens int) error {
	sessions := 0
	var c *convo
	fresh := func() error {
		if err := p.set(false); err != nil {
			return err
		}
		sessions++
		c = convoOf(fmt.Sprintf("bench-prof-warm-%04d", sessions), tokens)
		if err := send(c); err != nil {
			return err
		}
		return p.set(true)
	}
	if err := fresh(); err != nil {
		return err
	}
	limit := tokens + tokens/10
	for i := 0; i < n && ctx.Err() == nil; i++ {
		c.add()
		if c.size() > limit {
			if err := fresh(); err != nil {
				return err
			}
			c.add()
		}
		if err := send(c); err != nil {
			return err
		}
	}
	return p.set(false)
}

// profileCuts is the new-cut stream: n sessions of about tokens, in batches of 30 (the
// proxy keeps 64 in memory), the first requests and the forced cut unprofiled, then the
// requests that meet the new cut profiled. A step of its own because its batching is
// independent of the warm stream; the profile is off when it returns.
func profileCuts(ctx context.Context, p *profiledServe, send func(*convo) error, n, tokens int) error {
	base := convoOf("bench-prof-cut-0000", tokens)
	for done := 0; done < n && ctx.Err() == nil; {
		var batch []*convo
		for ; len(batch) < 30 && done < n; done++ {
			c := base.withSession(fmt.Sprintf("bench-prof-cut-%04d", done+1))
			if err := send(c); err != nil {
				return err
			}
			if err := forceCut(p.stateDir, c.SID); err != nil {
				return err
			}
			c.add()
			batch = append(batch, c)
		}
		if err := p.set(true); err != nil {
			return err
		}
		for _, c := range batch {
			if err := send(c); err != nil {
				return err
			}
		}
		if err := p.set(false); err != nil {
			return err
		}
	}
	return nil
}

// profileLiveHeap takes the live heap in the middle of warm requests from the largest
// concurrency level of pl (nothing when that level is 1). A step of its own because it
// is the one concurrent phase: it starts every session, signals the heap dump after
// 300 ms and sends rpsSteps follow-ups per session, joining the sessions' errors.
func profileLiveHeap(p *profiledServe, send func(*convo) error, pl overheadPlan) error {
	n := slices.Max(pl.RPSLevels)
	if n <= 1 {
		return nil
	}
	convos := make([]*convo, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for s := range convos {
		convos[s] = convoOf(fmt.Sprintf("bench-prof-rps-%d", s), pl.RPSTokens)
		wg.Go(func() { errs[s] = send(convos[s]) })
	}
	wg.Wait()
	go func() {
		time.Sleep(300 * time.Millisecond)
		signalHeapDump(p.cmd.Process)
	}()
	for s := range convos {
		wg.Go(func() {
			for i := 0; i < rpsSteps && errs[s] == nil; i++ {
				convos[s].add()
				errs[s] = send(convos[s])
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// readProfiles turns the files the profiled serve wrote into profiles: CPU files
// [0, warmFiles) are the warm stream, [warmFiles, cpuFiles) the new cuts, cpu.N naming the
// N-th; allocs is the allocation profile and allocs.inuse the live heap, when it was taken.
// A step of its own because it only reads what the run left behind, after serve stopped.
func readProfiles(cpu, allocs string, warmFiles, cpuFiles int) (*profiles, error) {
	files := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("%s.%d", cpu, i))
		}
		return out
	}
	var out profiles
	var err error
	for _, x := range []struct {
		dst   *string
		files []string
		extra []string
	}{
		{&out.WarmCum, files(0, warmFiles), []string{"-cum", "-show=smarter-compact"}},
		{&out.WarmFlat, files(0, warmFiles), nil},
		{&out.CutCum, files(warmFiles, cpuFiles), []string{"-cum", "-show=smarter-compact"}},
		{&out.CutFlat, files(warmFiles, cpuFiles), nil},
		{&out.Alloc, []string{allocs}, []string{"-sample_index=alloc_space"}},
	} {
		if *x.dst, err = pprofTop(x.files, x.extra...); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(allocs + ".inuse"); err == nil {
		if out.Inuse, err = pprofTop([]string{allocs + ".inuse"}, "-sample_index=inuse_space"); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

// pprofTop runs `go tool pprof -top -nodecount=18` on profiles (merged when several).
func pprofTop(paths []string, extra ...string) (string, error) {
	if len(paths) == 0 {
		return "", errors.New("no profile was written")
	}
	args := append([]string{"tool", "pprof", "-top", "-nodecount=18"}, extra...)
	out, err := exec.Command("go", append(args, paths...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go tool pprof %s: %v\n%s", strings.Join(paths, " "), err, out)
	}
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Time:") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n"), nil
}
