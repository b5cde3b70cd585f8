package mcp

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/client"

	"github.com/smarter-compact/smarter-compact/mcp/mcptest"
)

// checkToolList asserts the four tools with all four hints set to a read-only, closed-world
// tool (mcp-go's defaults would say destructive and open-world).
func checkToolList(t *testing.T, c *client.Client) {
	t.Helper()
	mcptest.CheckToolList(t, c, []string{ToolStatus, ToolGet, ToolSearch, ToolSQL}, ToolSearch, ToolSQL)
}

func TestToolListHTTP(t *testing.T) {
	t.Parallel()
	checkToolList(t, httpClient(t, newRig(t).srv))
}

func TestGetPages(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	c := httpClient(t, r.srv)
	// 25,000 code points of 1-, 2- and 4-byte characters: pages count characters, not bytes.
	unit := "aé😀b"
	text := strings.Repeat(unit, 25000/utf8.RuneCountInString(unit))
	id, err := r.writer.WriteBlob(text)
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	offset := 0
	wantOffsets := []int{0, 12000, 24000}
	for i, want := range wantOffsets {
		var page struct {
			ID         string `json:"id"`
			Text       string `json:"text"`
			Offset     int    `json:"offset"`
			NextOffset *int   `json:"next_offset"`
			TotalChars int    `json:"total_chars"`
		}
		args := map[string]any{"id": id}
		if i > 0 {
			args["offset"] = offset
		}
		callJSON(t, c, ToolGet, args, &page)
		if page.Offset != want || page.TotalChars != 25000 || page.ID != id {
			t.Fatalf("page %d: offset %d total %d id %s; want offset %d total 25000", i, page.Offset, page.TotalChars, page.ID, want)
		}
		n := utf8.RuneCountInString(page.Text)
		got.WriteString(page.Text)
		if i < len(wantOffsets)-1 {
			if n != getPage || page.NextOffset == nil || *page.NextOffset != want+getPage {
				t.Fatalf("page %d: %d chars, next_offset %v; want %d chars and next_offset %d", i, n, page.NextOffset, getPage, want+getPage)
			}
			offset = *page.NextOffset
		} else if n != 1000 || page.NextOffset != nil {
			t.Fatalf("last page: %d chars, next_offset %v; want 1000 chars and null", n, page.NextOffset)
		}
	}
	if got.String() != text {
		t.Error("the pages joined are not the blob")
	}

	lines := telemetry(t, r.dir)
	if len(lines) != 3 {
		t.Fatalf("tool-calls.jsonl has %d lines, want 3", len(lines))
	}
	want := map[string]any{"at": "2026-10-29T17:00:00Z", "tool": ToolGet, "chars": float64(getPage), "total_chars": float64(25000)}
	for k, v := range want {
		if lines[0][k] != v {
			t.Errorf("first line %v: %s = %v, want %v", lines[0], k, lines[0][k], v)
		}
	}
	if strings.Contains(mustRead(t, filepath.Join(r.dir, telemetryFile)), id) {
		t.Error("tool-calls.jsonl records the blob id; it must hold counts only")
	}
	if fi, err := os.Stat(filepath.Join(r.dir, telemetryFile)); err != nil {
		t.Fatal(err)
	} else if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("tool-calls.jsonl mode %o, want 600", fi.Mode().Perm())
	}
}

func TestGetShortAndEmptyBlobs(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	c := httpClient(t, r.srv)
	for _, text := range []string{"", "short"} {
		id, err := r.writer.WriteBlob(text)
		if err != nil {
			t.Fatal(err)
		}
		var page map[string]any
		callJSON(t, c, ToolGet, map[string]any{"id": id}, &page)
		if page["text"] != text || page["next_offset"] != nil || page["total_chars"] != float64(len(text)) {
			t.Errorf("blob %q: got %v", text, page)
		}
		if _, ok := page["next_offset"]; !ok {
			t.Errorf("blob %q: next_offset missing; want null", text)
		}
	}
}

func TestGetErrors(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	c := httpClient(t, r.srv)
	id, err := r.writer.WriteBlob("0123456789")
	if err != nil {
		t.Fatal(err)
	}
	tests := []argError{
		{"missing id", map[string]any{}, "id is required"},
		{"uppercase id", map[string]any{"id": strings.ToUpper(id)}, "16 lowercase hex"},
		{"short id", map[string]any{"id": "abc"}, "16 lowercase hex"},
		{"path id", map[string]any{"id": "../../etc/passwd"}, "is not a blob id"},
		{"number id", map[string]any{"id": 12}, "id must be a string"},
		{"unknown id", map[string]any{"id": "0123456789abcdef"}, "no blob with id 0123456789abcdef"},
		{"negative offset", map[string]any{"id": id, "offset": -1}, "offset must be an integer from 0"},
		{"fractional offset", map[string]any{"id": id, "offset": 1.5}, "offset must be an integer"},
		{"string offset", map[string]any{"id": id, "offset": "5"}, "offset must be an integer"},
		{"offset past end", map[string]any{"id": id, "offset": 11}, "past the end of blob " + id + " (total_chars 10)"},
		{"unknown argument", map[string]any{"id": id, "page": 2}, `smart_compact_get does not take "page": its arguments are id, offset`},
	}
	checkArgErrors(t, c, ToolGet, tests)
	lines := telemetry(t, r.dir)
	if len(lines) != len(tests) {
		t.Fatalf("tool-calls.jsonl has %d lines, want one per call (%d)", len(lines), len(tests))
	}
	for _, l := range lines {
		if l["tool"] != ToolGet || l["error"] != true {
			t.Errorf("line %v: want tool %s with error true", l, ToolGet)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
