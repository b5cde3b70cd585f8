package web

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/web/ui"
)

// sessionSorts are the sort keys of GET /ui/sessions, each with its default direction.
var sessionSorts = map[string]string{
	"activity": "desc", "rows": "desc", "trimmed": "desc", "trims": "desc", "size": "desc", "agent": "asc", "project": "asc",
}

// sessionsQuery is the parsed query of GET /ui/sessions.
type sessionsQuery struct {
	agent, q, sort, dir string
}

func parseSessionsQuery(r *http.Request) (sessionsQuery, error) {
	v := r.URL.Query()
	sq := sessionsQuery{agent: v.Get("agent"), q: strings.TrimSpace(v.Get("q")), sort: v.Get("sort"), dir: v.Get("dir")}
	if sq.sort == "" {
		sq.sort = "activity"
	}
	def, ok := sessionSorts[sq.sort]
	if !ok {
		return sq, userError(http.StatusBadRequest, "sort must be activity, rows, trimmed, trims, size or agent, not %q", truncate(sq.sort, 20))
	}
	switch sq.dir {
	case "":
		sq.dir = def
	case "asc", "desc":
	default:
		return sq, userError(http.StatusBadRequest, "dir must be asc or desc, not %q", truncate(sq.dir, 20))
	}
	return sq, nil
}

// href is the list URL with this filter and another sort.
func (sq sessionsQuery) href(sort, dir string) string {
	v := url.Values{}
	if sq.agent != "" {
		v.Set("agent", sq.agent)
	}
	if sq.q != "" {
		v.Set("q", sq.q)
	}
	v.Set("sort", sort)
	v.Set("dir", dir)
	return "/ui/sessions?" + v.Encode()
}

// agentOf is a session's agent as the list shows it.
func agentOf(si store.SessionInfo) string {
	if si.Agent == "" {
		return agentUnknown
	}
	return si.Agent
}

// sessions answers GET /ui/sessions: the full page, or the table for htmx.
func (s *Server) sessions(w http.ResponseWriter, r *http.Request) error {
	sq, err := parseSessionsQuery(r)
	if err != nil {
		return err
	}
	list, err := s.root.Sessions(r.Context())
	if errors.Is(err, fs.ErrNotExist) {
		list, err = nil, nil // no sessions/ folder yet: nothing stored so far
	}
	if err != nil {
		return fmt.Errorf("list sessions: %w", err)
	}
	table := s.sessionsTable(list, sq)
	filter := ui.SessionsFilter{Agent: sq.agent, Q: sq.q, Sort: sq.sort, Dir: sq.dir}
	if isHTMX(r) {
		return s.render(w, r, http.StatusOK, ui.SessionsTableFragment(table, filter))
	}
	agents := agentNames(s.control.State())
	for _, si := range list {
		if a := agentOf(si); !slices.Contains(agents, a) {
			agents = append(agents, a)
		}
	}
	if !slices.Contains(agents, agentUnknown) {
		agents = append(agents, agentUnknown)
	}
	filter.Agents = agents
	return s.render(w, r, http.StatusOK, ui.SessionsList(ui.SessionsPage{
		Page: s.page("Sessions", "sessions"), Filter: filter, Table: table,
	}))
}

// sessionsTable filters and sorts the list.
func (s *Server) sessionsTable(list []store.SessionInfo, sq sessionsQuery) ui.SessionsTable {
	now := s.now()
	q := strings.ToLower(sq.q)
	var shown []store.SessionInfo
	for _, si := range list {
		if sq.agent != "" && agentOf(si) != sq.agent {
			continue
		}
		if q != "" && !strings.Contains(strings.ToLower(si.SessionID), q) && !strings.Contains(strings.ToLower(si.Cwd), q) &&
			!strings.Contains(strings.ToLower(si.FirstPrompt), q) {
			continue
		}
		shown = append(shown, si)
	}
	key := func(a, b store.SessionInfo) int {
		switch sq.sort {
		case "rows":
			return cmp.Compare(a.Rows, b.Rows)
		case "trimmed":
			return cmp.Compare(a.Trimmed, b.Trimmed)
		case "trims":
			return cmp.Compare(a.Trims, b.Trims)
		case "size":
			return cmp.Compare(a.Bytes, b.Bytes)
		case "agent":
			return strings.Compare(agentOf(a), agentOf(b))
		case "project":
			return strings.Compare(projectOf(a.Cwd), projectOf(b.Cwd))
		}
		return a.LastActivity.Compare(b.LastActivity)
	}
	slices.SortStableFunc(shown, func(a, b store.SessionInfo) int {
		c := key(a, b)
		if sq.dir == "desc" {
			c = -c
		}
		// Ties: newest activity first, then by id, so the order is stable across polls.
		return cmp.Or(c, b.LastActivity.Compare(a.LastActivity), strings.Compare(a.SessionID, b.SessionID))
	})
	t := ui.SessionsTable{Total: len(list), Shown: len(shown)}
	for _, h := range []struct {
		label, sort string
		num         bool
	}{
		{"Project", "project", false}, {"First prompt", "", false}, {"Agent", "agent", false},
		{"Last activity", "activity", false}, {"Rows", "rows", true}, {"In context", "", true},
		{"Trimmed", "trimmed", true}, {"Trims", "trims", true}, {"Requests", "", true},
		{"Last prompt", "", true}, {"Size", "size", true},
	} {
		sh := ui.SortHeader{Label: h.label, Num: h.num}
		if h.sort != "" {
			dir := sessionSorts[h.sort]
			if sq.sort == h.sort {
				sh.Sort = map[string]string{"asc": "ascending", "desc": "descending"}[sq.dir]
				dir = map[string]string{"asc": "desc", "desc": "asc"}[sq.dir]
			}
			sh.Href = sq.href(h.sort, dir)
		}
		t.Headers = append(t.Headers, sh)
	}
	for _, si := range shown {
		row := ui.SessionRow{
			SID: si.SessionID, Href: sessionHref(si.SessionID), Agent: agentOf(si), Cwd: si.Cwd,
			Project: projectOf(si.Cwd), FirstPrompt: si.FirstPrompt,
			LastActivity: ago(si.LastActivity, now), LastActivityISO: isoUTC(si.LastActivity),
			Rows: ui.Commas(si.Rows), InContext: ui.Commas(si.InContext), Trimmed: ui.Commas(si.Trimmed),
			Trims: ui.Commas(si.Trims), Requests: ui.Commas(si.Requests), Size: byteSize(si.Bytes),
			LastPrompt: "–", Problem: si.Problem,
		}
		if si.LastPromptTokens > 0 {
			row.LastPrompt = ui.Commas(si.LastPromptTokens)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// projectOf is a session's project as the user knows it: the base name of its working
// directory (either separator, so a Windows path reads the same on any OS); "" for none.
func projectOf(cwd string) string {
	cwd = strings.TrimRight(cwd, `/\`)
	if i := strings.LastIndexAny(cwd, `/\`); i >= 0 {
		return cwd[i+1:]
	}
	return cwd
}

// Session page limits.
const (
	rowChars    = 2000 // row text shown per row; the rest is in the blob or the store
	eventsLimit = 5000 // newest events read for the chart and the table
	usageShown  = 500  // newest events listed in the usage table
	// maxSIDLen bounds the {sid} of a session page: no agent makes ids this long, and a
	// longer one could only be a file name the system refuses (and a huge log line).
	maxSIDLen = 256
	// blobPageSize is the bytes of a blob shown per page (cut back to a UTF-8 boundary).
	blobPageSize = 64 << 10
	// blobReaders bounds the blob pages read at once.
	blobReaders = 4
)

// sessionID reads and checks the {sid} URL parameter: percent-decoded once, whether chi matched
// the decoded path or (when the client escaped something needlessly, "%2E%2E") the raw one,
// and a first "%2E" read as a dot (sessionHref). Any id SanitizeSID would change is a 404,
// so the files looked up stay in sessions/.
func sessionID(r *http.Request) (string, error) {
	raw := chi.URLParam(r, "sid")
	if r.URL.RawPath != "" { // chi routes on RawPath when it is set, and gives its params undecoded
		if dec, err := url.PathUnescape(raw); err == nil {
			raw = dec
		}
	}
	if len(raw) >= len(dotEscape) && strings.EqualFold(raw[:len(dotEscape)], dotEscape) {
		raw = "." + raw[len(dotEscape):]
	}
	if len(raw) > maxSIDLen {
		return "", userError(http.StatusNotFound, "%q is not a session id (over %d bytes): pick a session from the list at /ui/sessions", truncate(raw, 80), maxSIDLen)
	}
	sid, ok := store.SanitizeSID(raw)
	if !ok || sid != raw {
		return "", userError(http.StatusNotFound, "%q is not a session id: pick a session from the list at /ui/sessions", truncate(raw, 80))
	}
	return sid, nil
}

// session answers GET /ui/sessions/{sid}?after=<seq>.
func (s *Server) session(w http.ResponseWriter, r *http.Request) error {
	sid, err := sessionID(r)
	if err != nil {
		return err
	}
	var after int64
	if a := r.URL.Query().Get("after"); a != "" {
		if after, err = strconv.ParseInt(a, 10, 64); err != nil || after < 0 {
			return userError(http.StatusBadRequest, "after must be a row seq (a whole number of at least 0), not %q", truncate(a, 20))
		}
	}
	ctx := r.Context()
	rows, total, err := s.root.Rows(ctx, sid, after, rowsPerPage+1, rowChars)
	if errors.Is(err, fs.ErrNotExist) {
		return userError(http.StatusNotFound, "no session %s in the store: retention may have removed it; pick one from /ui/sessions", sid)
	}
	p := ui.SessionPage{Page: s.page("Session "+sid, "sessions"), SID: sid, Total: total}
	if err != nil {
		// A database that cannot be read (not a database, a newer schema, locked): the
		// page says so, as the list does, with whatever else can be read.
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Warn("dashboard: session rows", "session", sid, "err", err)
		p.Problem = "The rows of this session could not be read: " + err.Error()
		rows = nil
	}
	if len(rows) > rowsPerPage {
		rows = rows[:rowsPerPage]
		p.NextHref = sessionHref(sid) + "?after=" + strconv.FormatInt(rows[len(rows)-1].Seq, 10)
	}
	if after > 0 {
		if prev := after - rowsPerPage; prev > 0 {
			p.PrevHref = sessionHref(sid) + "?after=" + strconv.FormatInt(prev, 10)
			p.FirstHref = sessionHref(sid)
		} else {
			p.PrevHref = sessionHref(sid)
		}
	}
	if len(rows) > 0 {
		p.From, p.To = rows[0].Seq, rows[len(rows)-1].Seq
	}
	p.Rows = rowViews(sid, rows, p.From, p.To)

	events, err := s.root.Events(ctx, sid, eventsLimit)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Warn("dashboard: session events", "session", sid, "err", err)
		p.EventsError = "The events of this session could not be read: " + err.Error()
	}
	recs, err := s.root.SessionSavings(sid)
	if err != nil {
		s.log.Warn("dashboard: session savings", "session", sid, "err", err)
	}
	p.Chart = promptChart(events, recs)
	p.Usage, p.UsageNote = usageRows(events)
	if len(events) == eventsLimit {
		p.UsageNote = strings.TrimSpace(fmt.Sprintf("The chart covers the newest %d events. %s", eventsLimit, p.UsageNote))
	}

	if s.trimBlocks != nil {
		p.Recall = s.trimBlocks(sid)
	}
	p.Facts = []ui.Fact{{Label: "Rows", Value: ui.Commas(total)}}
	if list, err := s.root.Sessions(ctx); err == nil {
		for _, si := range list {
			if si.SessionID != sid {
				continue
			}
			p.Facts = []ui.Fact{
				{Label: "Project", Value: cmp.Or(projectOf(si.Cwd), "not registered")},
				{Label: "First prompt", Value: cmp.Or(si.FirstPrompt, "none stored")},
				{Label: "Agent", Value: agentOf(si)},
				{Label: "Working directory", Value: orNone(si.Cwd)},
				{Label: "Last activity", Value: shortUTC(si.LastActivity) + " UTC (" + ago(si.LastActivity, s.now()) + ")"},
				{Label: "Rows", Value: fmt.Sprintf("%s: %s in context, %s trimmed", ui.Commas(si.Rows), ui.Commas(si.InContext), ui.Commas(si.Trimmed))},
				{Label: "Trims", Value: ui.Commas(si.Trims)},
				{Label: "Requests", Value: ui.Commas(si.Requests)},
				{Label: "Size on disk", Value: byteSize(si.Bytes)},
			}
			if si.Problem != "" {
				p.Facts = append(p.Facts, ui.Fact{Label: "Problem", Value: si.Problem})
			}
			if len(recs) > 0 {
				p.Facts = append(p.Facts, s.savingsFact(recs))
			}
			break
		}
	}
	return s.render(w, r, http.StatusOK, ui.SessionView(p))
}

// rowViews formats one page of rows (seq from..to) and places the trim points: a marker
// where the run of rows one cut dropped ends (trimmed_at_seq changes), and a flag on the
// row a cut was made at.
func rowViews(sid string, rows []store.RowInfo, from, to int64) []ui.RowView {
	cuts := map[int64]bool{}
	for _, r := range rows {
		if !r.InContext && r.TrimmedAtSeq > 0 {
			cuts[r.TrimmedAtSeq] = true
		}
	}
	out := make([]ui.RowView, 0, len(rows))
	for i, r := range rows {
		v := ui.RowView{
			Seq: r.Seq, ID: "seq-" + strconv.FormatInt(r.Seq, 10), Role: r.Role, Kind: r.Kind, Name: r.Name,
			Text: r.Text, Cut: utf8.RuneCountInString(r.Text) < r.Chars, Chars: ui.Plural(int64(r.Chars), "character", "characters"),
			BlobHref: blobRowHref(r.BlobID, sid, r.Seq), InContext: r.InContext, TrimmedAtSeq: r.TrimmedAtSeq,
			TrimmedAt: r.TrimmedAt, CreatedAt: r.CreatedAt, CutAt: cuts[r.Seq],
		}
		if v.Cut {
			v.Text += "…"
		}
		if !r.InContext && r.TrimmedAtSeq > 0 {
			if r.TrimmedAtSeq >= from && r.TrimmedAtSeq <= to {
				v.CutHref = "#seq-" + strconv.FormatInt(r.TrimmedAtSeq, 10)
			} else {
				v.CutHref = rowHref(sid, r.TrimmedAtSeq)
			}
		}
		if i > 0 {
			prev := rows[i-1]
			if !prev.InContext && (r.InContext || r.TrimmedAtSeq != prev.TrimmedAtSeq) {
				text := "▲ End of the rows trimmed"
				if prev.TrimmedAtSeq > 0 {
					text += " by the cut at seq " + strconv.FormatInt(prev.TrimmedAtSeq, 10)
				}
				if prev.TrimmedAt != "" {
					text += " (" + prev.TrimmedAt + ")"
				}
				v.PointBefore = &ui.TrimPoint{Text: text + ": the agent's context resumes below."}
				if !r.InContext {
					v.PointBefore.Text = text + "."
				}
			}
		}
		out = append(out, v)
	}
	return out
}

// usageRows lists the newest events for the usage table, oldest first, numbering usage
// events as requests over all events read.
func usageRows(events []store.EventInfo) ([]ui.UsageRow, string) {
	var out []ui.UsageRow
	n := 0
	for _, e := range events {
		u := ui.UsageRow{At: shortUTC(e.At), Kind: e.Kind, Model: e.Model, Trimmed: "–",
			Input: "", CacheRead: "", CacheWrite: "", Output: "", Prompt: ""}
		switch e.Kind {
		case "usage":
			n++
			u.N = n
			u.Trimmed = map[int64]string{0: "whole", 1: "earlier cut", 2: "new cut"}[e.Trimmed]
			if u.Trimmed == "" {
				u.Trimmed = "–"
			}
			u.NewCut = e.Trimmed == 2
			u.Input, u.CacheRead, u.CacheWrite, u.Output = orDash(e.Input), orDash(e.CacheRead), orDash(e.CacheCreation), orDash(e.Output)
			u.Prompt = orDash(e.PromptTokens())
			if e.Breakpoints >= 0 {
				u.Detail = ui.Plural(e.Breakpoints, "cache breakpoint", "cache breakpoints")
			}
		case "trim":
			u.Detail = trimDetail(e)
		case "fail_open":
			u.Detail = strings.TrimSpace(e.Error + " at " + e.Location)
		}
		out = append(out, u)
	}
	note := ""
	if len(out) > usageShown {
		note = fmt.Sprintf("Showing the newest %d of %d events.", usageShown, len(out))
		out = out[len(out)-usageShown:]
	}
	return out, note
}

// trimDetail says what a trim event cut: "4,261 → 1,593 estimated tokens, 6 messages dropped".
func trimDetail(e store.EventInfo) string {
	dropped := "– messages dropped"
	if e.Dropped >= 0 {
		dropped = ui.Plural(e.Dropped, "message", "messages") + " dropped"
	}
	return orDash(e.TokensBefore) + " → " + orDash(e.TokensAfter) + " estimated tokens, " + dropped
}

// blob answers GET /ui/blobs/{id}?offset=<byte>: blobPageSize bytes of a stored tool
// result, read from the file at that offset (never the whole file), cut to UTF-8 boundaries.
func (s *Server) blob(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "id")
	if !store.ValidBlobID(id) {
		return userError(http.StatusNotFound, "%q is not a blob id (16 lowercase hex digits): follow a link from a session page", truncate(id, 40))
	}
	var offset int64
	if o := r.URL.Query().Get("offset"); o != "" {
		var err error
		if offset, err = strconv.ParseInt(o, 10, 64); err != nil || offset < 0 {
			return userError(http.StatusBadRequest, "offset must be a byte offset (a whole number of at least 0), not %q", truncate(o, 20))
		}
	}
	select {
	case s.blobReads <- struct{}{}:
		defer func() { <-s.blobReads }()
	case <-r.Context().Done():
		return r.Context().Err()
	}
	// The store's layout (contract: Location): blobs/<id>.txt under the store's folder.
	pg, err := readBlobPage(filepath.Join(s.root.Dir(), "blobs", id+".txt"), offset, blobPageSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return userError(http.StatusNotFound, "no blob %s in the store: retention may have removed it", id)
	case errors.Is(err, errPastEnd):
		return userError(http.StatusBadRequest, "offset %d is past the end of blob %s (%d bytes)", offset, id, pg.size)
	case err != nil:
		return fmt.Errorf("read blob %s: %w", id, err)
	}
	p := ui.BlobPage{Page: s.page("Blob "+id, "sessions"), ID: id, Text: pg.text,
		From: ui.Commas(pg.from + 1), To: ui.Commas(pg.to), Total: ui.Commas(pg.size)}
	// The row the blob belongs to, when the link came from a session page (?sid=&seq=): a
	// link back to it, kept on the blob's other pages. Anything else in them is ignored.
	keep := url.Values{}
	if sid, ok := store.SanitizeSID(r.URL.Query().Get("sid")); ok && sid == r.URL.Query().Get("sid") && len(sid) <= maxSIDLen {
		p.SessionID, p.SessionHref = sid, sessionHref(sid)
		keep.Set("sid", sid)
		if seq, err := strconv.ParseInt(r.URL.Query().Get("seq"), 10, 64); err == nil && seq > 0 {
			p.Seq, p.SessionHref = seq, rowHref(sid, seq)
			keep.Set("seq", strconv.FormatInt(seq, 10))
		}
	}
	page := func(offset int64) string {
		v := url.Values{}
		if offset > 0 {
			v.Set("offset", strconv.FormatInt(offset, 10))
		}
		for k, vs := range keep {
			v[k] = vs
		}
		if len(v) == 0 {
			return blobHref(id)
		}
		return blobHref(id) + "?" + v.Encode()
	}
	if pg.to < pg.size {
		p.NextHref = page(pg.to)
	}
	if pg.from > 0 {
		p.PrevHref = page(max(pg.from-blobPageSize, 0)) // aligned when that page is read
	}
	return s.render(w, r, http.StatusOK, ui.BlobView(p))
}

// errPastEnd is a blob offset beyond the file's end.
var errPastEnd = errors.New("offset past the end")

// blobPage is one page of a blob: the text of bytes [from, to) of a file of size bytes.
type blobPage struct {
	text           string
	from, to, size int64
}

// readBlobPage reads about n bytes of the file at path from offset: the start moves back to
// the first byte of the UTF-8 character offset falls in, the end back so that no character
// is cut (each by at most 3 bytes; text that is not UTF-8 is cut where it falls). Only those
// bytes are read. A path that is not a regular file (a folder) wraps fs.ErrNotExist; an
// offset past the end is errPastEnd (size is set then).
func readBlobPage(path string, offset int64, n int) (blobPage, error) {
	f, err := os.Open(path)
	if err != nil {
		return blobPage{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return blobPage{}, err
	}
	if !fi.Mode().IsRegular() {
		return blobPage{}, fmt.Errorf("%s is not a file: %w", path, fs.ErrNotExist)
	}
	size := fi.Size()
	if offset > size {
		return blobPage{size: size}, errPastEnd
	}
	start := max(offset-(utf8.UTFMax-1), 0)
	lead := int(offset - start)
	buf := make([]byte, lead+n+1) // one byte past the page: is the page's end a character boundary?
	m, err := f.ReadAt(buf, start)
	if err != nil && !errors.Is(err, io.EOF) {
		return blobPage{}, err
	}
	buf = buf[:m]
	i := min(lead, len(buf))
	for back := 0; back < utf8.UTFMax-1 && i > 0 && i < len(buf) && !utf8.RuneStart(buf[i]); back++ {
		i--
	}
	e := min(i+n, len(buf))
	for back := 0; back < utf8.UTFMax-1 && e > i && e < len(buf) && !utf8.RuneStart(buf[e]); back++ {
		e--
	}
	if e < len(buf) && e > i && !utf8.RuneStart(buf[e]) {
		e = min(i+n, len(buf)) // not UTF-8 there: cut where it falls
	}
	return blobPage{text: string(buf[i:e]), from: start + int64(i), to: start + int64(e), size: size}, nil
}
