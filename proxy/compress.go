package proxy

import (
	"bytes"
	"fmt"

	"github.com/smarter-compact/smarter-compact/store"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Compressed tool results (contract: Proxy-inserted text, compressed tool result; seed
// 001: tool-result compression). The compressed form is a pure function of the original
// text and the settings, so every request renders the same bytes.
const (
	compressHeadLines = 40
	compressTailLines = 20
	compressHeadChars = 4000
	compressTailChars = 2000
)

// compressToolResult returns the blob id and the rendered tool_result block when text is
// over the compression threshold, or a nil block when it stays as it is. It compresses a
// result whose content is a string or a list of text blocks without cache_control; any
// other shape (images, markers inside) is left alone.
func (p *Proxy) compressToolResult(blockRaw []byte, text string) (string, []byte, error) {
	return p.compressMember(blockRaw, "content", text)
}

// compressMember is compressToolResult for the object whose member key holds the result:
// an Anthropic tool_result's "content", a Chat tool message's "content", a Responses
// output item's "output".
func (p *Proxy) compressMember(blockRaw []byte, key, text string) (string, []byte, error) {
	limit := p.cfg().CompressOverTokens
	if limit <= 0 {
		return "", nil, nil
	}
	tokens := int(math.Ceil(float64(utf8.RuneCountInString(text)) / p.cfg().CharsPerToken))
	if tokens <= limit {
		return "", nil, nil
	}
	fields, err := objectMembers(blockRaw)
	if err != nil {
		return "", nil, err
	}
	at := -1
	for i, f := range fields {
		if f.key == key {
			at = i
		}
	}
	if at < 0 || !plainTextContent(fields[at].val) {
		return "", nil, nil
	}
	id := store.BlobID(text)
	c := compressText(text, tokens, id)
	if len(c) >= len(text) {
		return "", nil, nil // a low threshold on a short result: nothing to gain
	}
	if _, err := p.root.WriteBlob(text); err != nil {
		return "", nil, fmt.Errorf("write blob: %w", err)
	}
	v := store.AppendJSONString(make([]byte, 0, len(c)+64), c)
	return id, spliceObject(make([]byte, 0, len(blockRaw)), blockRaw, fields, map[int][]byte{at: v}), nil
}

// plainTextContent reports whether a tool_result content is a string or a list of text
// blocks with no cache_control marker.
func plainTextContent(content []byte) bool {
	switch kindOf(content) {
	case '"':
		return true
	case '[':
		elems, err := arrayElems(content)
		if err != nil || len(elems) == 0 {
			return false
		}
		for _, e := range elems {
			fields, err := objectMembers(e)
			if err != nil {
				return false
			}
			for _, f := range fields {
				if f.key == "cache_control" || f.key == "type" && partKind(string(bytes.Trim(f.val, `"`))) != "text" {
					return false
				}
			}
		}
		return true
	}
	return false
}

// compressText is the compressed form: the header, the first 40 lines (at most 4000
// characters), a "…" line, and the last 20 lines (their last 2000 characters at most).
// When the text has 40 lines or fewer, the tail is what the head's character cap left out.
func compressText(text string, tokens int, id string) string {
	lines := strings.Split(text, "\n")
	var head, tail string
	if len(lines) > compressHeadLines {
		head = strings.Join(lines[:compressHeadLines], "\n")
		from := len(lines) - compressTailLines
		if from < compressHeadLines {
			from = compressHeadLines
		}
		tail = strings.Join(lines[from:], "\n")
	} else {
		head = text
	}
	head, rest := splitRunes(head, compressHeadChars)
	if tail == "" {
		tail = rest
	}
	tail = lastRunes(tail, compressTailChars)
	var b strings.Builder
	b.Grow(len(head) + len(tail) + 160)
	b.WriteString("[smarter-compact: tool result compressed, ")
	b.WriteString(strconv.Itoa(tokens))
	b.WriteString(" tokens — smart_compact_get(id=\"")
	b.WriteString(id)
	b.WriteString("\") returns the full text]\n")
	b.WriteString(head)
	b.WriteString("\n…\n")
	b.WriteString(tail)
	return b.String()
}

// splitRunes cuts s after n code points.
func splitRunes(s string, n int) (string, string) {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos], s[pos:]
		}
		i++
	}
	return s, ""
}

// lastRunes keeps the last n code points of s.
func lastRunes(s string, n int) string {
	count := utf8.RuneCountInString(s)
	if count <= n {
		return s
	}
	skip := count - n
	for pos := range s {
		if skip == 0 {
			return s[pos:]
		}
		skip--
	}
	return ""
}
