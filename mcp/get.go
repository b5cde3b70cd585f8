package mcp

import (
	"context"
	"errors"
	"io/fs"
	"unicode/utf8"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/smarter-compact/smarter-compact/store"
)

// getPage is the page size of smart_compact_get in characters (code points; DESIGN.md §6,
// contract: Location, blobs/<id>.txt).
const getPage = 12000

func getTool() mcpgo.Tool {
	opts := []mcpgo.ToolOption{
		mcpgo.WithDescription(`Read the full text of a tool result that your context shows compressed, in pages of 12,000 characters.
id: the 16-character lowercase hex blob id from the [smarter-compact: …] marker or from blob_ids in smart_compact_search results.
offset: character offset to start at (default 0); pass the previous page's next_offset to continue. next_offset is null on the last page.
Returns text, offset, next_offset and total_chars.`),
		mcpgo.WithString("id", mcpgo.Required(), mcpgo.Description("Blob id: 16 lowercase hex characters, e.g. 3f2a9c0d11e4b7a8."), mcpgo.Pattern("^[0-9a-f]{16}$")),
		mcpgo.WithInteger("offset", mcpgo.Min(0), mcpgo.DefaultNumber(0), mcpgo.Description("Character (code point) offset to start at; the previous page's next_offset.")),
	}
	return mcpgo.NewTool(ToolGet, append(opts, readOnlyHints("Read a compressed tool result")...)...)
}

// getPageResult is the smart_compact_get response.
type getPageResult struct {
	ID         string `json:"id"`
	Text       string `json:"text"`
	Offset     int    `json:"offset"`
	NextOffset *int   `json:"next_offset"` // null on the last page
	TotalChars int    `json:"total_chars"`
}

func (s *Server) get(_ context.Context, req mcpgo.CallToolRequest, rec *callRecord) (*mcpgo.CallToolResult, error) {
	a, err := newArgs(ToolGet, req.GetArguments(), "id", "offset")
	if err != nil {
		return nil, err
	}
	id, ok, err := a.str("id")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, toolErrorf("id is required: the 16-character hex blob id from the [smarter-compact: …] marker or from blob_ids in smart_compact_search results")
	}
	if !store.ValidBlobID(id) {
		return nil, toolErrorf("id %q is not a blob id: want 16 lowercase hex characters (0-9, a-f), e.g. 3f2a9c0d11e4b7a8", truncate(id, 40))
	}
	offset, err := a.integer("offset", 0, 0, 1<<31-1)
	if err != nil {
		return nil, err
	}
	text, err := s.root.ReadBlob(id)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, toolErrorf("no blob with id %s: check the id against the marker or blob_ids; a blob of a session older than the retention period is deleted with it", id)
	}
	if err != nil {
		return nil, err
	}
	total := utf8.RuneCountInString(text)
	if offset > total {
		return nil, toolErrorf("offset %d is past the end of blob %s (total_chars %d)", offset, id, total)
	}
	start := byteIndex(text, offset)
	page := text[start:]
	var next *int
	if total-offset > getPage {
		page = page[:byteIndex(page, getPage)]
		n := offset + getPage
		next = &n
	}
	rec.Chars, rec.TotalChars = utf8.RuneCountInString(page), total
	return jsonResult(getPageResult{ID: id, Text: page, Offset: offset, NextOffset: next, TotalChars: total})
}

// byteIndex is the byte offset of code point n in s (len(s) when s is shorter).
func byteIndex(s string, n int) int {
	if n == 0 {
		return 0
	}
	i := 0
	for j := range s {
		if i == n {
			return j
		}
		i++
	}
	return len(s)
}
