package ui

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/a-h/templ"
)

// staticURL is the URL of one of the embedded static files, with the version query that
// lets browsers cache it until the binary changes.
func staticURL(name, v string) templ.SafeURL {
	return templ.SafeURL("/ui/static/" + name + "?v=" + v)
}

// csrfHeaders is the hx-headers value every htmx request carries: the CSRF token.
func csrfHeaders(token string) string {
	b, _ := json.Marshal(map[string]string{"X-CSRF-Token": token})
	return string(b)
}

// num writes an SVG coordinate with one decimal.
func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

func itoa(n int) string { return strconv.Itoa(n) }

func i64(n int64) string { return strconv.FormatInt(n, 10) }

func u64(n uint64) string { return strconv.FormatUint(n, 10) }

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// modeLabel is the button text of a mode.
func modeLabel(m string) string {
	if m == "follow" {
		return "follow master"
	}
	return m
}

func joinKeys(keys []string) string { return strings.Join(keys, ", ") }

func placeholder(f SettingField) string {
	if f.Default == "" {
		return ""
	}
	return "default: " + f.Default
}

func wiringClass(w string) string {
	switch w {
	case "wired":
		return "on"
	case "not wired":
		return "warn"
	case "unknown":
		return "off"
	}
	return "plain"
}

// Commas writes n with thousands separators: 1234567 → "1,234,567". Package web formats
// every count with it too.
func Commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// Plural writes a count with its noun in the right number: Plural(1, "row", "rows") is
// "1 row", Plural(1204, "row", "rows") "1,204 rows". Every count shown with a noun goes
// through it, in the templates and in the sentences package web builds.
func Plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return Commas(n) + " " + many
}

// plural is Plural for the templates' int counts.
func plural(n int, one, many string) string { return Plural(int64(n), one, many) }

// idParts splits a session id after each hyphen ("5f0c9a8e-", "1b2c-", …): the templates
// put a <wbr> after each part, so a UUID wraps at its hyphens (Unicode line breaking does
// not break between a hyphen and a digit) and never inside a group.
func idParts(sid string) []string {
	var parts []string
	for sid != "" {
		i := strings.IndexByte(sid, '-')
		if i < 0 {
			return append(parts, sid)
		}
		parts = append(parts, sid[:i+1])
		sid = sid[i+1:]
	}
	return parts
}

// pct writes an x coordinate of a chart frame w units wide as a percentage of the SVG's
// width: the charts have no viewBox, so their text keeps its CSS size at any width.
func pct(x float64, w int) string {
	if w <= 0 {
		return "0%"
	}
	return strconv.FormatFloat(x/float64(w)*100, 'f', 2, 64) + "%"
}

// blobFrom adds the row a search hit's blob belongs to to its link (?sid=&seq=), so the
// blob page links back to that row.
func blobFrom(href, sid string, seq int64) string {
	if href == "" || sid == "" || seq < 1 || strings.Contains(href, "?") {
		return href
	}
	return href + "?" + url.Values{"sid": {sid}, "seq": {strconv.FormatInt(seq, 10)}}.Encode()
}
