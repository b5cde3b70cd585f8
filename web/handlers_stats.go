package web

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/web/ui"
)

// recallStats answers GET /ui/stats: store.Stats as `smarter-compact stats` prints it
// (issue 17). An unreadable store is a problem on the page, not an error page.
func (s *Server) recallStats(w http.ResponseWriter, r *http.Request) error {
	p := ui.RecallStats{Page: s.page("Recall tools", "stats")}
	st, err := s.root.Stats(r.Context())
	if err != nil {
		if r.Context().Err() != nil {
			return r.Context().Err()
		}
		s.log.Warn("dashboard: recall stats", "err", err)
		p.Problem = "The recall statistics could not be read: " + err.Error()
		return s.render(w, r, http.StatusOK, ui.RecallStatsView(p))
	}
	p.Calls, p.AfterTrim, p.Errors = ui.Commas(int64(st.Calls)), ui.Commas(int64(st.AfterTrim)), ui.Commas(int64(st.Errors))
	p.Share = "no trimmed sessions yet"
	if st.SearchedShare != nil {
		p.Share = fmt.Sprintf("%d of %d (%.0f %%)", st.Searched, st.TrimmedSessions, *st.SearchedShare*100)
	}
	p.Messages = fmt.Sprintf("%s stored, %s in context, %s trimmed", ui.Commas(st.Messages.Total), ui.Commas(st.Messages.InContext), ui.Commas(st.Messages.Trimmed))
	p.Blobs = fmt.Sprintf("%s, %s bytes", countOf(st.Blobs.Count, "file", "files"), ui.Commas(st.Blobs.Bytes))
	for _, t := range store.ToolNames(st.Tools) {
		p.Tools = append(p.Tools, ui.RecallTool{Name: t, Calls: ui.Commas(int64(st.Tools[t])), Hits: ui.Commas(int64(st.Hits[t])) + " " + store.ToolHitUnit(t)})
	}
	for _, ss := range st.Sessions {
		row := ui.RecallSession{SID: ss.SessionID, Href: sessionHref(ss.SessionID), Agent: orNone(ss.Agent), Problem: ss.Problem,
			Trims: ui.Commas(ss.Trims), AfterTrim: ui.Commas(int64(ss.AfterTrim)), Searched: "–",
			Messages: fmt.Sprintf("%s / %s / %s", ui.Commas(ss.Messages.Total), ui.Commas(ss.Messages.InContext), ui.Commas(ss.Messages.Trimmed)),
			Blobs:    ui.Commas(int64(ss.Blobs.Count))}
		if ss.FirstTrim != "" {
			row.Trims += " (first " + ss.FirstTrim + ")"
		}
		var tools []string
		for _, t := range store.ToolNames(ss.Tools) {
			tools = append(tools, fmt.Sprintf("%s %d (%d %s)", t, ss.Tools[t], ss.Hits[t], store.ToolHitUnit(t)))
		}
		row.Tools = strings.Join(tools, ", ")
		if row.Tools == "" {
			row.Tools = "none"
		}
		if ss.Trims > 0 {
			row.Searched = "no"
			if ss.Searched {
				row.Searched = "yes"
			}
		}
		p.Sessions = append(p.Sessions, row)
	}
	return s.render(w, r, http.StatusOK, ui.RecallStatsView(p))
}

func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return ui.Commas(int64(n)) + " " + many
}
