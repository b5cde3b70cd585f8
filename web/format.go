package web

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"time"

	"github.com/smarter-compact/smarter-compact/web/ui"
)

// page is what every full page shares.
func (s *Server) page(title, nav string) ui.Page {
	return ui.Page{Title: title, Nav: nav, CSRF: s.csrf, AssetV: s.assetV, Version: s.control.State().Version}
}

// orDash is ui.Commas(n), or "–" for a count the provider did not report (negative).
func orDash(n int64) string {
	if n < 0 {
		return "–"
	}
	return ui.Commas(n)
}

// compact writes n short for chart labels: 950, 12.3k, 4.5M.
func compact(n float64) string {
	a := math.Abs(n)
	switch {
	case a >= 1e6:
		return trimZero(strconv.FormatFloat(n/1e6, 'f', 1, 64)) + "M"
	case a >= 1e3:
		return trimZero(strconv.FormatFloat(n/1e3, 'f', 1, 64)) + "k"
	}
	return strconv.FormatFloat(n, 'f', 0, 64)
}

func trimZero(s string) string {
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		return s[:len(s)-2]
	}
	return s
}

// byteSize writes a file size: 512 B, 1.2 KB, 3.4 MB (powers of 1024).
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "KMGTPE"[exp])
}

// duration writes an uptime or an age coarsely: 45s, 12m, 3h 12m, 2d 4h.
func duration(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// ago writes how long before now t was: "3m ago"; "" for a zero t.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	return duration(now.Sub(t)) + " ago"
}

// isoUTC writes t as 2026-11-29T10:02:03Z; "" for a zero t.
func isoUTC(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// shortUTC writes t for tables: 2026-11-29 10:02:03.
func shortUTC(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// rowsPerPage is the session page's page size.
const rowsPerPage = 200

// sessionHref is the session page. The ids "." and ".." are valid (contract: Session id) but a
// browser resolves such a path segment away (WHATWG URL: "/ui/sessions/.." is "/ui/", and so
// are "%2E%2E" and "%2e."), so their first dot is written "%2E" as in their file names, and
// that "%" escaped: "/ui/sessions/%252E." reaches sessionID as "%2E.", which it reads back.
func sessionHref(sid string) string {
	if sid == "." || sid == ".." {
		sid = dotEscape + sid[1:]
	}
	return "/ui/sessions/" + url.PathEscape(sid)
}

// dotEscape is how a session URL may write an id's first dot (sessionHref); "%" is in no
// sanitized id, so the form names one id.
const dotEscape = "%2E"

// rowHref links one row of a session on the page that holds it. Pages from links start at
// multiples of rowsPerPage (?after=k·200), and at most 200 seqs lie in (k·200, (k+1)·200],
// so the row is on that page whether or not seqs have gaps.
func rowHref(sid string, seq int64) string {
	h := sessionHref(sid)
	if after := pageStart(seq); after > 0 {
		h += "?after=" + strconv.FormatInt(after, 10)
	}
	return h + "#seq-" + strconv.FormatInt(seq, 10)
}

// pageStart is the after value of the aligned page holding seq.
func pageStart(seq int64) int64 {
	if seq < 1 {
		return 0
	}
	return (seq - 1) / rowsPerPage * rowsPerPage
}

func blobHref(id string) string {
	if id == "" {
		return ""
	}
	return "/ui/blobs/" + url.PathEscape(id)
}

// blobRowHref is blobHref with the row that holds the blob, so the blob page links back to
// it: /ui/blobs/<id>?sid=<session>&seq=<row>.
func blobRowHref(id, sid string, seq int64) string {
	h := blobHref(id)
	if h == "" || sid == "" || seq < 1 {
		return h
	}
	return h + "?" + url.Values{"sid": {sid}, "seq": {strconv.FormatInt(seq, 10)}}.Encode()
}
