package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/web"
)

// statusHealth is `status --json`'s "health": the store's health record (issue 15 item 2)
// and where it was read.
type statusHealth struct {
	// Source is "service" (the running service's record, GET /api/health), "file" (the
	// health.json the service saves, read when it does not answer) or "none".
	Source string `json:"source"`
	Error  string `json:"error,omitempty"` // why the record could not be read
	// Missing: no service answered and no health.json exists yet (the service never ran
	// here); the summary then says nothing of health.
	Missing bool `json:"-"`
	store.HealthSnapshot
}

// readHealth asks the running service for its health record (live, and in memory even when
// the disk is full) and reads health.json in the context root dir when the service does
// not answer or does not take the token.
func readHealth(ctx context.Context, sys system, svc serviceStatus, dir string) statusHealth {
	var why []string
	if svc.Answering {
		tok, err := installer.ReadToken(sys.configDir)
		if err == nil {
			var snap store.HealthSnapshot
			if snap, err = web.FetchHealth(ctx, svc.URL, tok); err == nil {
				return statusHealth{Source: "service", HealthSnapshot: snap}
			}
		}
		why = append(why, "the service's record: "+err.Error())
	}
	snap, err := store.LoadHealth(dir, time.Now())
	if err == nil {
		h := statusHealth{Source: "file", HealthSnapshot: snap}
		if len(why) > 0 {
			h.Error = strings.Join(why, "; ")
		}
		return h
	}
	why = append(why, "health.json: "+err.Error())
	return statusHealth{Source: "none", Error: strings.Join(why, "; "), Missing: !svc.Answering && errors.Is(err, fs.ErrNotExist), HealthSnapshot: store.HealthSnapshot{Kinds: []store.HealthKindState{}}}
}

// writeHealth prints the health record: every active problem with its newest text and what
// to do, or that all is clear, and the counts.
func writeHealth(w io.Writer, h *statusHealth) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	if h.Source == "none" {
		p("Health: unknown (%s)", h.Error)
		return
	}
	from := "from the running service"
	if h.Source == "file" {
		from = "from " + h.File + ", saved by the service"
	}
	var counts []string
	for _, k := range h.Kinds {
		counts = append(counts, fmt.Sprintf("%s %d", strings.ReplaceAll(string(k.Kind), "_", " "), k.Count))
	}
	since := h.Since.UTC().Format("2006-01-02 15:04 UTC")
	active := h.ActiveEntries()
	if len(active) == 0 {
		p("Health: nothing failing (%s; since %s: %s)", from, since, strings.Join(counts, ", "))
	} else {
		p("Health: %d %s (%s; since %s: %s)", len(active), plural(len(active), "problem needs attention", "problems need attention"), from, since, strings.Join(counts, ", "))
		for _, a := range active {
			p("  %s: %d %s, last at %s", web.HealthTitle(a.Kind, a.Key), a.Count, plural(int(a.Count), "time", "times"), a.Last.UTC().Format("2006-01-02 15:04:05 UTC"))
			if a.Text != "" {
				p("    %s", a.Text)
			}
			p("    what to do: %s", a.Hint)
		}
	}
	if h.SaveError != "" {
		p("  the service cannot save health.json: %s", h.SaveError)
	}
	if h.Error != "" && h.Source == "file" {
		p("  (%s)", h.Error)
	}
}
