package app

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy/config"
)

// Intervals of the state's background loop (state.run).
const (
	// configPoll is how often config.toml is read for a hand edit: a change shows
	// everywhere within about this long (plus configSettle).
	configPoll = time.Second
	// configSettle is how long a changed config.toml must stay unchanged before the watcher
	// applies it, so that a file caught half-written (an editor that writes in place, a
	// script's `>`) is not applied as the defaults it would resolve to.
	configSettle = 200 * time.Millisecond
	// wiringEvery is how often, in polls, the agents' config files are read again for
	// AgentSwitch.Wiring (State is asked every second by each open dashboard).
	wiringEvery = 10
)

// contentSum is config.toml's content as the watcher compares it: whether the file exists
// and the SHA-256 of its bytes.
type contentSum struct {
	exists bool
	sum    [sha256.Size]byte
}

// sumOf is the contentSum of text as config.ReadText returns it (nil: no file).
func sumOf(text []byte) contentSum {
	if text == nil {
		return contentSum{}
	}
	return contentSum{true, sha256.Sum256(text)}
}

// run is the state's background loop until ctx ends: it polls config.toml every
// configPoll for a hand edit, and the agents' wiring every wiringEvery polls.
func (s *state) run(ctx context.Context) {
	t := time.NewTicker(configPoll)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.poll()
		if n%wiringEvery == 0 {
			s.refreshWiring()
		}
	}
}

// poll reloads config.toml when its content differs from what the state last loaded or
// saved, once it has stayed the same for s.settle (a file caught half-written is looked at
// again on the next poll). A file that does not load keeps the state; its error is logged
// once and shown in State until the file is fixed. A file that was removed keeps the state
// too, and says so, until it is back.
func (s *state) poll() {
	text, err := config.ReadText(s.path)
	if err != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.configError(fmt.Sprintf("read config %s: %v", s.path, err))
		return
	}
	cur := sumOf(text)
	s.mu.Lock()
	same, saves := cur == s.seen, s.saves
	s.mu.Unlock()
	if same {
		return
	}
	if s.settle > 0 {
		time.Sleep(s.settle)
		again, err := config.ReadText(s.path)
		if err != nil || sumOf(again) != cur {
			return // still changing: the next poll looks again
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.saves != saves {
		return // a save since the read, which read the file itself: the next poll compares again
	}
	s.seen = cur
	if !cur.exists {
		s.configError(fmt.Sprintf("config.toml was removed (%s): the running settings stay until it is back or the service restarts", s.path))
		return
	}
	rc, err := config.ResolveText(s.path, text, s.getenv)
	if err != nil {
		s.configError(err.Error())
		return
	}
	changed := s.apply(rc)
	if s.configErr != "" {
		s.configErr = ""
		changed = true
	}
	if changed {
		s.log.Info("config.toml reloaded", "config", s.path, "agents", s.agentsString())
		s.bump()
	}
}

// configError shows msg as the config error, and logs it, when it is new. The state in
// effect stays. Callers hold s.mu.
func (s *state) configError(msg string) {
	if msg == s.configErr {
		return
	}
	s.configErr = msg
	s.log.Warn("config.toml changed but does not load: the service keeps its settings until the file is fixed", "config", s.path, "err", msg)
	s.bump()
}
