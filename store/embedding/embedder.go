package embedding

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

// Embedding defaults and limits (contract: Vectors).
const (
	DefaultTimeout  = 30 * time.Second // per row
	DefaultMaxChars = 4000
	DefaultWorkers  = 4

	firstBatch = 4
	maxBatch   = 32
	skipAfter  = 3                // single-row failures before a row gets dim = 0
	downAfter  = 3                // single-row failures in a row, before any success, that mean "down"
	downWait   = 60 * time.Second // a database whose endpoint looked down waits this long
)

// Config configures an Embedder (contract: Vectors; app fills it from [context_store]).
type Config struct {
	Model    string        // embedding_model; must not be empty
	URL      string        // embedding_url, the base before /embeddings
	APIKey   string        // CONTEXT_EMBEDDING_API_KEY
	Timeout  time.Duration // per row: a call of n rows times out after n × Timeout; 0 = 30 s
	MaxChars int           // code points of each row's head that are embedded; 0 = 4000
	Workers  int           // databases embedded at once; 0 = 4
	// Client overrides the HTTP client (tests); nil builds one.
	Client *Client
}

// Embedder fills the vectors table of session databases in the background. Notify queues a
// database after a request stored rows; Run's workers each embed one database at a time, so a
// few slow sessions do not starve the others, and one database is never embedded by two
// workers at once. Its state (batch size per endpoint and model, failure counts, 60 s waits)
// lives in memory.
type Embedder struct {
	root   *store.Root
	cfg    Config
	client *Client
	log    *slog.Logger
	now    func() time.Time

	wake chan struct{}

	mu       sync.Mutex
	pending  []string             // queued databases, oldest notification first
	queued   map[string]bool      // in pending
	running  map[string]bool      // being embedded by a worker
	waitTill map[string]time.Time // endpoint looked down: no run before this
	batch    map[string]int       // next batch size per endpoint + model
	failures map[string]map[int64]int
}

// NewEmbedder returns an embedder over root; call Run to start it. log receives one line per
// embeddings call (contract: Vectors, Batches).
func NewEmbedder(root *store.Root, cfg Config, log *slog.Logger) *Embedder {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxChars <= 0 {
		cfg.MaxChars = DefaultMaxChars
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client := cfg.Client
	if client == nil {
		client = NewClient(cfg.URL, cfg.APIKey, nil)
	}
	return &Embedder{
		root: root, cfg: cfg, client: client, log: log, now: time.Now,
		wake:     make(chan struct{}, cfg.Workers),
		queued:   map[string]bool{},
		running:  map[string]bool{},
		waitTill: map[string]time.Time{},
		batch:    map[string]int{},
		failures: map[string]map[int64]int{},
	}
}

// Notify queues sessions/<sid>.db for embedding. It never blocks: a database already queued
// stays queued once, and one being embedded runs again after its current run.
func (e *Embedder) Notify(sid string) {
	if e == nil || sid == "" {
		return
	}
	e.mu.Lock()
	if !e.queued[sid] {
		e.queued[sid] = true
		e.pending = append(e.pending, sid)
	}
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run embeds queued databases with cfg.Workers workers until ctx is cancelled, then waits for
// the workers' current calls to end.
func (e *Embedder) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range e.cfg.Workers {
		wg.Go(func() {
			for {
				sid, ok := e.next(ctx)
				if !ok {
					return
				}
				e.runSession(ctx, sid)
				e.mu.Lock()
				delete(e.running, sid)
				again := e.queued[sid]
				e.mu.Unlock()
				if again { // notified during the run: let any worker pick it up
					select {
					case e.wake <- struct{}{}:
					default:
					}
				}
			}
		})
	}
	wg.Wait()
}

// next takes the oldest queued database that is not running and not waiting, blocking until
// there is one or ctx ends.
func (e *Embedder) next(ctx context.Context) (string, bool) {
	for {
		e.mu.Lock()
		now := e.now()
		wait := time.Duration(-1)
		for i, sid := range e.pending {
			if e.running[sid] {
				continue
			}
			if t, ok := e.waitTill[sid]; ok {
				if d := t.Sub(now); d > 0 {
					if wait < 0 || d < wait {
						wait = d
					}
					continue
				}
				delete(e.waitTill, sid)
			}
			e.pending = append(e.pending[:i:i], e.pending[i+1:]...)
			delete(e.queued, sid)
			e.running[sid] = true
			e.mu.Unlock()
			return sid, true
		}
		e.mu.Unlock()
		var timer *time.Timer
		var fire <-chan time.Time
		if wait >= 0 {
			timer = time.NewTimer(wait)
			fire = timer.C
		}
		select {
		case <-ctx.Done():
		case <-e.wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return "", false
		}
	}
}

func (e *Embedder) batchKey() string { return e.client.URL() + "\x00" + e.cfg.Model }

func (e *Embedder) batchSize() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := e.batch[e.batchKey()]; n > 0 {
		return n
	}
	return firstBatch
}

func (e *Embedder) setBatchSize(n int) {
	e.mu.Lock()
	e.batch[e.batchKey()] = n
	e.mu.Unlock()
}

// runSession is one run over one database (contract: Vectors): pending rows in order, rows
// that failed in earlier runs last, in adaptive batches, until none is left, the endpoint
// looks down, or ctx ends.
func (e *Embedder) runSession(ctx context.Context, sid string) {
	if !e.root.HasSession(sid) {
		return // deleted (retention) since it was queued: opening it would create it again
	}
	db, err := e.root.Session(sid)
	if err != nil {
		typ, loc := errorType(err)
		e.log.Warn("smarter-compact: embedding failed "+typ+" at "+loc, "err", errorText(err))
		return
	}
	seqs, err := db.PendingVectors(e.cfg.Model)
	if err != nil {
		typ, loc := errorType(err)
		e.log.Warn("smarter-compact: embedding failed "+typ+" at "+loc, "err", errorText(err))
		return
	}
	e.mu.Lock()
	failed := e.failures[sid]
	e.mu.Unlock()
	if len(failed) > 0 {
		seqs = failedLast(seqs, failed)
	}

	size := e.batchSize()
	runCap, grew := maxBatch, false
	succeeded, singleFails := false, 0
	var setAside []int64 // failed alone in this run
	defer func() {
		if succeeded && len(setAside) > 0 {
			e.countFailures(db, sid, setAside)
		}
	}()
	for len(seqs) > 0 && ctx.Err() == nil {
		n := min(size, len(seqs))
		batch := seqs[:n]
		texts, err := db.VectorInputs(batch, e.cfg.MaxChars)
		if err != nil {
			typ, loc := errorType(err)
			e.log.Warn("smarter-compact: embedding failed "+typ+" at "+loc, "err", errorText(err))
			return
		}
		inputs, inSeqs, blank := splitInputs(batch, texts)
		if len(blank) > 0 {
			if err := db.PutVectors(e.cfg.Model, blank); err != nil {
				e.storeFailed(err)
				return
			}
		}
		if len(inputs) == 0 {
			seqs = seqs[n:]
			continue
		}
		timeout := time.Duration(len(inputs)) * e.cfg.Timeout
		cctx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		vecs, err := e.client.Embed(cctx, e.cfg.Model, inputs)
		elapsed := time.Since(start)
		cancel()
		if ctx.Err() != nil {
			return // shutting down: neither a success nor a failure
		}
		if err != nil {
			typ, _ := errorType(err)
			if len(inputs) > 1 {
				size = max(1, len(inputs)/2)
				runCap = size
			} else {
				setAside = append(setAside, inSeqs[0])
				seqs = seqs[n:]
				if !succeeded {
					singleFails++
				}
			}
			e.setBatchSize(size)
			e.log.Warn(fmt.Sprintf("smarter-compact: embedding batch failed %s rows=%d seconds=%.2f batch=%d", typ, len(inputs), elapsed.Seconds(), size))
			if !succeeded && singleFails >= downAfter {
				typ, loc := errorType(err)
				e.log.Warn("smarter-compact: embedding failed "+typ+" at "+loc, "session", sid, "err", errorText(err))
				e.mu.Lock()
				e.waitTill[sid] = e.now().Add(downWait)
				if !e.queued[sid] { // try again after the wait even without a new request
					e.queued[sid] = true
					e.pending = append(e.pending, sid)
				}
				e.mu.Unlock()
				return
			}
			continue
		}
		put := make(map[int64][]float32, len(vecs))
		for i, v := range vecs {
			put[inSeqs[i]] = v
		}
		if err := db.PutVectors(e.cfg.Model, put); err != nil {
			e.storeFailed(err)
			return
		}
		succeeded, singleFails = true, 0
		seqs = seqs[n:]
		if n == size && elapsed < timeout/4 && !grew && size*2 <= runCap {
			size *= 2 // one probe of a larger batch per run
			grew = true
		}
		e.setBatchSize(size)
		e.log.Info(fmt.Sprintf("smarter-compact: embedded rows=%d seconds=%.2f batch=%d", len(inputs), elapsed.Seconds(), size))
	}
}

// failedLast puts the rows that never failed first, each group in the contract's order.
func failedLast(seqs []int64, failed map[int64]int) []int64 {
	fresh, retry := seqs[:0:0], []int64(nil)
	for _, s := range seqs {
		if failed[s] > 0 {
			retry = append(retry, s)
		} else {
			fresh = append(fresh, s)
		}
	}
	return append(fresh, retry...)
}

// splitInputs sorts a batch's rows into the texts to embed (with their seqs) and the rows
// whose head is blank (the text was cut to max_chars): nothing to embed, a dim = 0 vector.
// Rows gone since they were listed are in neither.
func splitInputs(batch []int64, texts map[int64]string) (inputs []string, inSeqs []int64, blank map[int64][]float32) {
	blank = map[int64][]float32{}
	for _, s := range batch {
		t, ok := texts[s]
		switch {
		case !ok:
		case store.BlankText(t):
			blank[s] = nil
		default:
			inputs = append(inputs, t)
			inSeqs = append(inSeqs, s)
		}
	}
	return inputs, inSeqs, blank
}

// countFailures adds one failure to each row that failed alone in a run where the endpoint
// worked for other rows; a row at skipAfter gets a dim = 0 vector and is never retried.
func (e *Embedder) countFailures(db *store.DB, sid string, seqs []int64) {
	skip := map[int64][]float32{}
	e.mu.Lock()
	f := e.failures[sid]
	if f == nil {
		f = map[int64]int{}
		e.failures[sid] = f
	}
	for _, s := range seqs {
		f[s]++
		if f[s] >= skipAfter {
			skip[s] = nil
			delete(f, s)
		}
	}
	e.mu.Unlock()
	if len(skip) == 0 {
		return
	}
	if err := db.PutVectors(e.cfg.Model, skip); err != nil {
		e.storeFailed(err)
		return
	}
	for s := range skip {
		e.log.Warn(fmt.Sprintf("smarter-compact: embedding skipped seq=%d after %d failures", s, skipAfter))
	}
}

func (e *Embedder) storeFailed(err error) {
	_, file, line, _ := runtime.Caller(1)
	e.log.Warn(fmt.Sprintf("smarter-compact: embedding failed %s at %s", "store", location(file, line)),
		"err", errorText(err))
}

// errorText is an error's message cut to 200 bytes for a log attribute.
func errorText(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
