package proxy

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/smarter-compact/smarter-compact/store"
)

// apiFormat is the wire format of a model-API request, chosen by the path tail (DESIGN.md
// §4.1): …/v1/messages Anthropic, …/chat/completions Chat, …/responses Responses.
type apiFormat uint8

const (
	anthropicFormat apiFormat = iota
	chatFormat
	responsesFormat
)

func (f apiFormat) String() string {
	switch f {
	case chatFormat:
		return "chat"
	case responsesFormat:
		return "responses"
	}
	return "anthropic"
}

// listKey is the top-level member that holds the conversation.
func (f apiFormat) listKey() string {
	if f == responsesFormat {
		return "input"
	}
	return "messages"
}

// parseItem parses one element of the conversation list in format f.
func parseItem(f apiFormat, raw []byte) (*message, error) {
	switch f {
	case chatFormat:
		return parseChatMessage(raw)
	case responsesFormat:
		return parseResponsesItem(raw)
	}
	return parseMessage(raw)
}

// itemType returns the "type" of a JSON object without parsing more than its members, ""
// when it has none (or raw is not an object).
func itemType(raw []byte) string {
	t, _ := memberString(raw, "type")
	return t
}

// removeMembers returns obj without the members whose indices are in drop. The kept
// members' bytes are copied as they came; the separators between them become one comma.
func removeMembers(obj []byte, mem []member, drop map[int]bool) []byte {
	out := make([]byte, 0, len(obj))
	if len(mem) == 0 {
		return append(out, obj...)
	}
	out = append(out, obj[:mem[0].start]...)
	n := 0
	for i, m := range mem {
		if drop[i] {
			continue
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, obj[m.start:m.end]...)
		n++
	}
	return append(out, obj[mem[len(mem)-1].end:]...)
}

// partsText is the plain text of a content value in the OpenAI formats: a string as it is,
// or a list of parts joined by newlines, text parts by their text, images and files by a
// placeholder ("[image]", "[document]", as the Anthropic adapter does), anything else as
// compact JSON. It is how tool outputs and message content become row text.
func partsText(content []byte) (string, error) { return contentText(content, partKind) }

// contentText is the plain text of a content value: a string as it is, or a list of parts
// joined by newlines, each part as kind names it ("text": its text; a placeholder such as
// "[image]"; "": compact JSON); anything else as compact JSON.
func contentText(content []byte, kind func(typ string) string) (string, error) {
	switch kindOf(content) {
	case 0, 'n':
		return "", nil
	case '"':
		return decodeText(content)
	case '[':
		elems, err := arrayElems(content)
		if err != nil {
			return "", err
		}
		parts := make([]string, 0, len(elems))
		for _, e := range elems {
			t, typ, err := textBlock(e)
			if err != nil {
				return "", err
			}
			if ph := kind(typ); ph != "" {
				if ph == "text" {
					parts = append(parts, t)
				} else {
					parts = append(parts, ph)
				}
				continue
			}
			c, err := compactJSON(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, c)
		}
		return strings.Join(parts, "\n"), nil
	}
	return compactJSON(content)
}

// partKind maps a content part type of any of the three formats to "text", a placeholder
// for binary content, or "" for anything else.
func partKind(typ string) string {
	switch typ {
	case "text", "input_text", "output_text":
		return "text"
	case "image", "image_url", "input_image":
		return "[image]"
	case "document", "file", "input_file":
		return "[document]"
	case "input_audio":
		return "[audio]"
	}
	return ""
}

// partRows turns a message content value into text rows, one per part (contract: Rows, one
// row per content block): a string is one row, text parts their text, binary parts a
// placeholder, other parts compact JSON. Empty text yields no row.
func partRows(role string, content []byte) ([]preRow, error) {
	switch kindOf(content) {
	case 0, 'n':
		return nil, nil
	case '"':
		s, err := decodeText(content)
		if err != nil || s == "" {
			return nil, err
		}
		return []preRow{{role: role, kind: "text", text: s}}, nil
	case '[':
		elems, err := arrayElems(content)
		if err != nil {
			return nil, err
		}
		out := make([]preRow, 0, len(elems))
		for _, e := range elems {
			t, typ, err := textBlock(e)
			if err != nil {
				return nil, err
			}
			switch k := partKind(typ); k {
			case "text":
				if t == "" {
					continue
				}
				out = append(out, preRow{role: role, kind: "text", text: t})
			case "":
				if typ == "refusal" {
					r, _ := memberString(e, "refusal")
					out = append(out, preRow{role: role, kind: "text", text: r})
					continue
				}
				c, err := compactJSON(e)
				if err != nil {
					return nil, err
				}
				out = append(out, preRow{role: role, kind: "text", text: c})
			default:
				out = append(out, preRow{role: role, kind: "text", text: k})
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("message content: want a string or a list")
}

// memberString returns the string member key of object raw.
func memberString(raw []byte, key string) (string, bool) {
	mem, err := objectMembers(raw)
	if err != nil {
		return "", false
	}
	for _, f := range mem {
		if f.key == key && kindOf(f.val) == '"' {
			s, err := decodeString(f.val)
			return s, err == nil
		}
	}
	return "", false
}

// argumentsText is the row text of a call's JSON-encoded arguments: the arguments as
// compact JSON (what the Anthropic adapter stores for a tool_use input), or the string as
// it came when it does not hold JSON.
func argumentsText(v []byte) (string, error) {
	switch kindOf(v) {
	case 0, 'n':
		return "{}", nil
	case '"':
		s, err := decodeString(v)
		if err != nil {
			return "", err
		}
		if c, err := compactJSON([]byte(s)); err == nil {
			return c, nil
		}
		return s, nil
	}
	return compactJSON(v)
}

// textPartJSON is one content part holding text: {"type":<typ>,"text":<text>}.
func textPartJSON(typ, text string) []byte {
	b := make([]byte, 0, len(text)+len(typ)+24)
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","text":`...)
	b = store.AppendJSONString(b, text)
	return append(b, '}')
}

// prependPart returns a content value with the part first: a string content becomes a
// list of two parts of type typ, a list gets the part in front.
func prependPart(content []byte, typ string, part []byte) []byte {
	out := make([]byte, 0, len(content)+len(part)+32)
	switch kindOf(content) {
	case '"':
		out = append(out, '[')
		out = append(out, part...)
		out = append(out, `,{"type":"`...)
		out = append(out, typ...)
		out = append(out, `","text":`...)
		out = append(out, bytes.TrimSpace(content)...)
		return append(out, "}]"...)
	case '[':
		t := bytes.TrimSpace(content)
		inner := bytes.TrimSpace(t[1 : len(t)-1])
		out = append(out, '[')
		out = append(out, part...)
		if len(inner) > 0 {
			out = append(out, ',')
			out = append(out, t[1:]...)
			return out
		}
		return append(out, ']')
	}
	return append(append(append(out, '['), part...), ']')
}
