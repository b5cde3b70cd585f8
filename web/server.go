package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smarter-compact/smarter-compact/assets"
	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/store/savings"
)

// Options is what the dashboard needs from app.
type Options struct {
	Root    *store.Root
	Control Control
	// APIToken is the bearer token /api/* requires (compared in constant time). Empty
	// refuses every /api request: there is no unauthenticated mode.
	APIToken string
	// Wirer runs the installer for the "Wire my agents" page; nil: the page says to use
	// the CLI.
	Wirer Wirer
	Log   *slog.Logger
	Now   func() time.Time // nil: time.Now
	// Prices returns the current price table of the savings figures; nil (or a nil table):
	// the built-in list prices.
	Prices func() savings.Prices
	// TrimBlocks returns what a session's cuts carry after the pointer (the recall block and
	// the pending-ingest line; the proxy owns the trim state's shape), for the session page;
	// nil shows none.
	TrimBlocks func(sid string) []string
}

// Server serves the dashboard (/ and /ui/…) and the JSON control API (/api/…) on the one
// loopback listener. app mounts it inside its Host-checked router (Mount).
type Server struct {
	root    *store.Root
	control Control
	wirer   Wirer
	token   string
	log     *slog.Logger
	now     func() time.Time
	prices  func() savings.Prices

	trimBlocks func(sid string) []string // Options.TrimBlocks

	csrf   string // per-process random token the forms and htmx carry
	cop    *http.CrossOriginProtection
	static fs.FS
	assetV string // hash of the static files, appended to their URLs

	// lastRefusal is when isolateResources last logged a refusal at warn level (Unix
	// seconds).
	lastRefusal atomic.Int64
	// blobReads bounds the blob pages read at once (blobReaders).
	blobReads chan struct{}

	mu     sync.Mutex
	status statusCache
	// wired are the newest reports of the wire buttons (wireReports at most); wireSeq
	// numbers them.
	wired   []wireReport
	wireSeq uint64
}

// statusCache keeps the last 24 h numbers while no session file changed (and for at most
// statusMaxAge), so the overview and its 1 s poll do not reread every database.
type statusCache struct {
	stamp string
	at    time.Time
	st    store.Status
}

const statusMaxAge = time.Minute

// New builds the dashboard server. The CSRF token is drawn here, so it changes with every
// start of the service; a page left open across a restart gets a "reload the page" answer.
func New(o Options) *Server {
	s := &Server{
		root:    o.Root,
		control: o.Control,
		wirer:   o.Wirer,
		token:   o.APIToken,
		log:     o.Log,
		now:     o.Now,
		prices:  o.Prices,
		cop:     http.NewCrossOriginProtection(),
		static:  assets.Web(),

		blobReads: make(chan struct{}, blobReaders),
	}
	s.trimBlocks = o.TrimBlocks
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	s.csrf = hex.EncodeToString(b[:])
	s.assetV = assetVersion(s.static)
	return s
}

// assetVersion hashes every static file, so their URLs change exactly when they do.
func assetVersion(fsys fs.FS) string {
	h := sha256.New()
	_ = fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		h.Write([]byte(path))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Warm reads what the overview needs once (the session list, the last 24 hours, the daily
// totals), so the store's caches are filled before the first page load; a service calls it
// in the background after start. Errors are left for the pages to report.
func (s *Server) Warm(ctx context.Context) {
	stamp := s.dataStamp(ctx)
	_, _ = s.status24(ctx, stamp)
	_, _ = s.root.Daily(ctx, s.now(), dailyDays)
}
