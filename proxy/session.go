package proxy

import (
	"encoding/json"

	"github.com/smarter-compact/smarter-compact/store"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// session is the proxy's in-memory side of one session: its trim state and, per thread,
// the messages of the last request, so that a request that repeats the previous one and
// appends a turn costs work in proportion to what is new (DESIGN.md §4, fast path).
type session struct {
	mu  sync.Mutex
	sid string
	// db is the writer the session's rows last went to (checkSessionDB); a different one
	// means the file was deleted, replaced or recovered since.
	db      *store.DB
	state   trimState
	threads map[string][]*message
	last    *known // the previous request of any thread, for the parse fast path
	// lastThread is the key of the thread cache holding the messages last was made from
	// ("" when none holds them): buildMessages reuses the ones a request repeats unchecked.
	lastThread string
	used       time.Time
	// dirty: state has usage samples not yet in .trim.json; saved: when it was last written.
	dirty bool
	saved time.Time
	// stores are this session's row writes on the store's queue not yet looked at
	// (settleStores).
	stores []*storeJob
	// cacheBytes is what threads and last cost, as cacheCost counts it; written with mu
	// held, read by other sessions' recount without it.
	cacheBytes atomic.Int64
	// regChecked: the registration was looked for; registered: it exists or the proxy wrote
	// it (registerFirstSeen).
	regChecked, registered bool
}

// cacheBudget bounds the fast path's caches of all sessions together, in cacheCost bytes
// (about the Go heap they hold). Over it the caches of the least recently used sessions are
// dropped; those sessions keep their trim state and their next request is parsed whole.
// Before this bound serve's memory grew by about 1 MB per 120k-token session it had seen,
// up to 64 sessions. A cache holds parse results and rows, no message bytes (message), so
// 32 MiB holds about 50 such sessions.
const cacheBudget = 32 << 20

// cacheCost estimates the heap a session's caches hold: the parse results and rows, about
// 1.5 times the bytes of the messages they came from (BenchmarkSessionMemory: 0.42–0.5 MB
// for a session of 300 KB in 400 messages; the bytes themselves are not kept), and the
// compressed renderings. A message in several threads counts each time, an overestimate.
func (s *session) cacheCost() int64 { return s.cacheCostWith("", 0) }

// cacheCostWith is cacheCost with the cost of the thread cache under key given (a request's
// messages: msgFacts.cacheCost) rather than counted.
func (s *session) cacheCostWith(key string, cost int64) int64 {
	var n int64
	for k, msgs := range s.threads {
		if k == key {
			n += cost
			continue
		}
		for _, m := range msgs {
			n += int64(m.sum.n)*3/2 + int64(len(m.rendered))
		}
	}
	return n
}

// recount updates the session's cache size (s.mu held) and, while the sessions' caches
// together are over cacheBudget, drops those of the least recently used other sessions.
// cost is what the thread cache under key costs (cacheCostWith).
func (p *Proxy) recount(s *session, key string, cost int64) {
	s.cacheBytes.Store(s.cacheCostWith(key, cost))
	type aged struct {
		s    *session
		used time.Time
	}
	var total int64
	var idle []aged
	p.mu.Lock()
	for _, o := range p.sessions {
		total += o.cacheBytes.Load()
		if o != s && o.cacheBytes.Load() > 0 && o.mu.TryLock() { // a session in use keeps its cache
			idle = append(idle, aged{o, o.used})
			o.mu.Unlock()
		}
	}
	p.mu.Unlock()
	budget := p.cacheBudget
	if total <= budget {
		return
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].used.Before(idle[j].used) })
	for _, a := range idle {
		if total <= budget {
			return
		}
		if a.s.mu.TryLock() {
			total -= a.s.cacheBytes.Load()
			a.s.dropCache()
			a.s.mu.Unlock()
		}
	}
}

// dropCache empties the session's fast-path caches (s.mu held). Its store jobs go too:
// they name the messages of the last request, which would otherwise stay in memory until
// the session's next request, and with the cache gone their outcome no longer matters.
func (s *session) dropCache() {
	clear(s.threads)
	s.last, s.lastThread = nil, ""
	clear(s.stores)
	s.stores = nil
	s.cacheBytes.Store(0)
}

// maxThreads bounds the threads whose last request a session keeps (a main conversation
// plus subagents); a thread not kept only loses the fast path.
const maxThreads = 8

// threadCacheKey names a thread's cached messages per wire format: the same JSON can be a
// message of two formats (a string-content user message is valid Chat and Anthropic), and a
// message parsed as one format must not be reused as the other.
func threadCacheKey(f apiFormat, thread string) string { return f.String() + "/" + thread }

// keepThread keeps msgs as the thread's cached messages for format f. The thread's rows in
// the store are one set whatever the format, so the thread's cache of another format goes:
// its messages record what that format stored last (message.handed), which the request
// just stored may have changed (a row it moved out of context), and a later request of that
// format must hand its rows to the store again rather than trust them.
func (s *session) keepThread(f apiFormat, thread string, msgs []*message) {
	name := f.String()
	for k := range s.threads {
		at := len(k) - len(thread) - 1 // where the "/" of another format's key of thread is
		if at > 0 && k[at] == '/' && k[at+1:] == thread && k[:at] != name {
			delete(s.threads, k)
		}
	}
	thread = threadCacheKey(f, thread)
	if _, ok := s.threads[thread]; !ok && len(s.threads) >= maxThreads {
		for k := range s.threads {
			delete(s.threads, k)
			break
		}
	}
	s.threads[thread] = msgs
}

// lockedSession returns the session for sid with its lock held, making sure it is still
// the one in the map (an eviction between lookup and lock would leave two).
func (p *Proxy) lockedSession(sid string) (*session, error) {
	for {
		s, err := p.session(sid)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		p.mu.Lock()
		current := p.sessions[sid] == s
		p.mu.Unlock()
		if current {
			return s, nil
		}
		s.mu.Unlock()
	}
}

// session returns the in-memory session for sid, loading its trim state on first use.
func (p *Proxy) session(sid string) (*session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.sessions[sid]; s != nil {
		return s, nil
	}
	b, err := p.root.LoadTrimState(sid)
	if err != nil {
		return nil, err
	}
	s := &session{sid: sid, state: decodeTrimState(b), threads: map[string][]*message{}}
	p.evictLocked()
	p.sessions[sid] = s
	return s, nil
}

// maxSessions bounds the sessions kept in memory; the least recently used one goes first.
// Its trim state is on disk, so only the fast path's cache is lost.
const maxSessions = 64

func (p *Proxy) evictLocked() {
	if len(p.sessions) < maxSessions {
		return
	}
	var oldest string
	var at time.Time
	for sid, s := range p.sessions {
		if s.mu.TryLock() {
			used := s.used
			s.mu.Unlock()
			if oldest == "" || used.Before(at) {
				oldest, at = sid, used
			}
		}
	}
	if s := p.sessions[oldest]; s != nil {
		go p.saveState(s)
	}
	delete(p.sessions, oldest)
}

// peekKnown returns the previous request of a session already in memory, nil when there
// is none. The known shape is never changed once made, so it may be read after the lock.
func (p *Proxy) peekKnown(sid string) *known {
	p.mu.Lock()
	s := p.sessions[sid]
	p.mu.Unlock()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// noteSource records where a session's id came from (issue: session ids, which source) in
// the trim state and logs it once per session and source. It records the route's agent
// too; "unknown" and "" leave a known agent in place.
func (p *Proxy) noteSource(s *session, source, agent string) {
	if agent != "" && agent != "unknown" && s.state.Agent != agent {
		s.state.Agent = agent
		s.dirty = true
	}
	if source == "" || s.state.Source == source {
		return
	}
	s.state.Source = source
	s.dirty = true
	p.log.Info("session", "session", s.sid, "source", source)
}

func (s *session) stateJSON() []byte {
	b, _ := json.Marshal(s.state)
	return b
}
