package web

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

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
	for _, t := range toolNames(st.Tools) {
		p.Tools = append(p.Tools, ui.RecallTool{Name: t, Calls: ui.Commas(int64(st.Tools[t])), Hits: ui.Commas(int64(st.Hits[t])) + " " + hitWord(t)})
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
		for _, t := range toolNames(ss.Tools) {
			tools = append(tools, fmt.Sprintf("%s %d (%d %s)", t, ss.Tools[t], ss.Hits[t], hitWord(t)))
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

// recallToolOrder is the display order of the recall tools; other names follow, sorted.
var recallToolOrder = []string{"smart_compact_search", "smart_compact_sql", "smart_compact_get", "context_status"}

func toolNames(m map[string]int) []string {
	var out, rest []string
	for _, t := range recallToolOrder {
		if _, ok := m[t]; ok {
			out = append(out, t)
		}
	}
	for t := range m {
		if !slices.Contains(recallToolOrder, t) {
			rest = append(rest, t)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// hitWord names what a tool's hits are (store.ToolCall.Hits).
func hitWord(tool string) string {
	switch tool {
	case "smart_compact_sql":
		return "rows"
	case "smart_compact_get":
		return "pages"
	}
	return "hits"
}

func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return ui.Commas(int64(n)) + " " + many
}
