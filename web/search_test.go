package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/smarter-compact/smarter-compact/web/ui"
)

func hits(d *goquery.Document) *goquery.Selection {
	return d.Find(testID("search-results") + " " + testID("search-hit"))
}

func TestSearch(t *testing.T) {
	h := newHarness(t)
	seedLong(t, h, "ses-long")
	seedSession(t, h.root, "ses-other", "codex", "/home/dev/other", []rowSpec{
		{role: "user", kind: "text", text: "where is KEY-7 defined?", in: true, cutAt: -1},
		{role: "assistant", kind: "text", text: "KEY-7 = 0x99 in config.h", in: true, cutAt: -1},
	})

	// The empty form: the inputs the contract names, no results yet.
	d := doc(t, h.get("/ui/search"), http.StatusOK)
	if n := one(t, d, "search-input").AttrOr("name", ""); n != "q" {
		t.Errorf("search-input name %q", n)
	}
	if n := one(t, d, "search-pattern").AttrOr("name", ""); n != "pattern" {
		t.Errorf("search-pattern name %q", n)
	}
	if trig := one(t, d, "search-input").AttrOr("hx-trigger", ""); !strings.Contains(trig, "input changed delay:250ms") {
		t.Errorf("search-input hx-trigger %q: not live", trig)
	}
	if n := hits(d).Length(); n != 0 {
		t.Errorf("%d hits before asking", n)
	}

	// A pattern: both sessions, the link lands on the page holding the row.
	d = doc(t, h.get("/ui/search?pattern="+url.QueryEscape(`KEY-7 = 0x[0-9a-f]+`)), http.StatusOK)
	var longHref string
	hits(d).Each(func(_ int, s *goquery.Selection) {
		if s.AttrOr("data-session", "") == "ses-long" {
			longHref = s.Find("a").First().AttrOr("href", "")
			if mark := text(s.Find("mark")); mark != "KEY-7 = 0x2a" {
				t.Errorf("highlight %q", mark)
			}
		}
	})
	if hits(d).Length() != 2 {
		t.Errorf("%d pattern hits, want 2", hits(d).Length())
	}
	if longHref != "/ui/sessions/ses-long?after=200#seq-300" {
		t.Fatalf("hit link %q, want the page holding row 300", longHref)
	}
	path, frag, _ := strings.Cut(longHref, "#")
	sd := doc(t, h.get(path), http.StatusOK)
	if row := sd.Find("#" + frag); row.Length() != 1 || !strings.Contains(text(row), "KEY-7 = 0x2a") {
		t.Errorf("the linked page has no row #%s with the value", frag)
	}

	// Words; a hit on page 1 links without ?after, in the contract's form.
	d = doc(t, h.get("/ui/search?q=defined"), http.StatusOK)
	if hits(d).Length() != 1 {
		t.Fatalf("%d hits for 'defined'", hits(d).Length())
	}
	if href := hits(d).Find("a").First().AttrOr("href", ""); href != "/ui/sessions/ses-other#seq-1" {
		t.Errorf("hit link %q", href)
	}
	if got := text(one(t, d, "search-summary")); !strings.HasPrefix(got, "1 matching row (1 matching line) in ") {
		t.Errorf("summary %q", got)
	}

	// Filters: trimmed rows only (rows 1-120 of ses-long); role.
	d = doc(t, h.get("/ui/search?q=long&in_context=false"), http.StatusOK)
	if hits(d).Length() == 0 {
		t.Fatal("no trimmed hits")
	}
	hits(d).Each(func(_ int, s *goquery.Selection) {
		if !strings.Contains(text(s), "trimmed") {
			t.Errorf("in_context=false returned %q", text(s))
		}
	})
	d = doc(t, h.get("/ui/search?pattern=KEY-7&role=user"), http.StatusOK)
	if hits(d).Length() != 1 || hits(d).AttrOr("data-seq", "") != "1" {
		t.Errorf("role=user: %d hits, want ses-other's row 1", hits(d).Length())
	}

	// While typing, a search that runs out of its budget says how many sessions it left out.
	res := h.srv.runSearch(t.Context(), ui.SearchForm{Q: "KEY", Role: "all", InContext: "any"}, time.Nanosecond)
	if res.NotSearched != 2 || res.Sessions != 0 || !res.Asked {
		t.Errorf("budget ran out at once: %d not searched, %d searched", res.NotSearched, res.Sessions)
	}
	var buf strings.Builder
	if err := ui.SearchResultsFragment(res).Render(t.Context(), &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `data-testid="search-partial"`) || !strings.Contains(buf.String(), "2 oldest sessions were not searched") {
		t.Errorf("partial results do not say so: %s", buf.String())
	}
	if h := one(t, d, "search-submit"); h.AttrOr("name", "") != "all" || h.AttrOr("value", "") != "1" {
		t.Errorf("the Search button does not ask for every session: %s", outer(h))
	}

	// htmx: the results alone.
	fd := doc(t, h.htmx("/ui/search?q=defined"), http.StatusOK)
	if fd.Find(testID("search-input")).Length() != 0 || hits(fd).Length() != 1 {
		t.Error("htmx answer is not the results fragment")
	}

	// Bad input says what to fix, in the page and in the fragment.
	for _, c := range []struct {
		query, msg, invalid string
	}{
		{"pattern=" + url.QueryEscape("KEY-(7"), "not a valid Go regular expression", "search-pattern"},
		{"pattern=" + url.QueryEscape(`(?<=x)y`), "no lookarounds", "search-pattern"},
		{"q=a&pattern=b", "not both", "search-pattern"},
		{"q=a&role=robot", "role must be", ""},
		{"q=a&in_context=maybe", "in_context must be", ""},
	} {
		t.Run(c.query, func(t *testing.T) {
			d := doc(t, h.get("/ui/search?"+c.query), http.StatusBadRequest)
			if msg := text(one(t, d, "search-error")); !strings.Contains(msg, c.msg) {
				t.Errorf("error %q, want %q", msg, c.msg)
			}
			if c.invalid != "" && one(t, d, c.invalid).AttrOr("aria-invalid", "") != "true" {
				t.Errorf("%s not marked invalid", c.invalid)
			}
			fd := doc(t, h.htmx("/ui/search?"+c.query), http.StatusBadRequest)
			one(t, fd, "search-error")
		})
	}
}
