package proxy

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// The fields of an Anthropic stream event that the reply assembler reads (issue 16, item 4),
// and their decoder. A response carries about one event per 30–100 bytes of answer, and
// json.Unmarshal into this struct was about a tenth of serve's CPU on a warm request
// (docs/benchmarks.md, issue 18): the decoder reads the plain form of an event in one pass
// over its bytes with no reflection, and hands anything else to json.Unmarshal, so every event
// decodes exactly as json.Unmarshal decodes it.

// anthropicEventFields is what anthropicEvent reads of one event (Messages API streaming:
// message_start … message_stop). ContentBlock is content_block_start's block, as sent.
type anthropicEventFields struct {
	Type         string          `json:"type"`
	Index        int             `json:"index"`
	ContentBlock json.RawMessage `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
	} `json:"delta"`
}

// decodeAnthropicEvent fills ev from data (one SSE data payload, spaces trimmed) and reports
// whether json.Unmarshal(data, ev) would succeed; on true ev holds what json.Unmarshal
// would have put in a zero ev.
func decodeAnthropicEvent(data []byte, ev *anthropicEventFields) bool {
	if plainAnthropicEvent(data, ev) {
		return true
	}
	*ev = anthropicEventFields{}
	return json.Unmarshal(data, ev) == nil
}

// Top-level and delta members the decoder knows, as their raw JSON keys.
var (
	keyType         = []byte(`"type"`)
	keyIndex        = []byte(`"index"`)
	keyContentBlock = []byte(`"content_block"`)
	keyDelta        = []byte(`"delta"`)
	keyText         = []byte(`"text"`)
	keyThinking     = []byte(`"thinking"`)
	keySignature    = []byte(`"signature"`)
	keyPartialJSON  = []byte(`"partial_json"`)
)

// plainAnthropicEvent decodes an event in the plain form: one valid JSON object whose keys
// are ASCII without escapes; each known member at most once, with a value of its field's
// type (a string, an integer that fits int, an object for delta; content_block anything but
// null); the others ignored, as json.Unmarshal ignores them. false says nothing of data's
// validity: json.Unmarshal decides then. Keys json.Unmarshal would match by case folding
// ("Type") are not plain.
func plainAnthropicEvent(data []byte, ev *anthropicEventFields) bool {
	*ev = anthropicEventFields{}
	var seen uint8
	end, ok := scanPlainObject(data, 0, func(key, val []byte) bool {
		switch {
		case bytes.Equal(key, keyType):
			return once(&seen, 1) && plainString(val, &ev.Type)
		case bytes.Equal(key, keyIndex):
			return once(&seen, 2) && plainInt(val, &ev.Index)
		case bytes.Equal(key, keyContentBlock):
			if !once(&seen, 4) || val[0] == 'n' {
				return false
			}
			ev.ContentBlock = bytes.Clone(val)
			return true
		case bytes.Equal(key, keyDelta):
			if !once(&seen, 8) || val[0] != '{' {
				return false
			}
			d := &ev.Delta
			var dseen uint8
			_, ok := scanPlainObject(val, 0, func(key, val []byte) bool {
				switch {
				case bytes.Equal(key, keyType):
					return once(&dseen, 1) && plainString(val, &d.Type)
				case bytes.Equal(key, keyText):
					return once(&dseen, 2) && plainString(val, &d.Text)
				case bytes.Equal(key, keyThinking):
					return once(&dseen, 4) && plainString(val, &d.Thinking)
				case bytes.Equal(key, keySignature):
					return once(&dseen, 8) && plainString(val, &d.Signature)
				case bytes.Equal(key, keyPartialJSON):
					return once(&dseen, 16) && plainString(val, &d.PartialJSON)
				}
				return !foldsTo(key, keyType, keyText, keyThinking, keySignature, keyPartialJSON)
			})
			return ok
		}
		return !foldsTo(key, keyType, keyIndex, keyContentBlock, keyDelta)
	})
	return ok && end == len(data)
}

// scanPlainObject walks the object at b[i] (after spaces), calling member with each member's
// raw key (quotes included) and raw value; it returns the index past the object. false: not
// an object, invalid JSON, a key that is not plain ASCII without escapes, or member said no.
func scanPlainObject(b []byte, i int, member func(key, val []byte) bool) (int, bool) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		ke, err := skipString(b, i)
		if err != nil {
			return 0, false
		}
		key := b[i:ke]
		for _, c := range key[1 : len(key)-1] {
			if c == '\\' || c >= 0x80 {
				return 0, false
			}
		}
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		vs := skipSpace(b, i+1)
		ve, err := skipValueDepth(b, vs, 1)
		if err != nil || !member(key, b[vs:ve]) {
			return 0, false
		}
		i = skipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		return 0, false
	}
}

// once marks bit in seen and reports whether it was clear.
func once(seen *uint8, bit uint8) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// foldsTo reports whether key matches one of names by ASCII case folding (json.Unmarshal's
// match for a key that is not exact).
func foldsTo(key []byte, names ...[]byte) bool {
	for _, n := range names {
		if bytes.EqualFold(key, n) {
			return true
		}
	}
	return false
}

// plainString decodes a JSON string value into *dst (as json.Unmarshal does: escapes, and
// U+FFFD for invalid UTF-8); false for any other value.
func plainString(val []byte, dst *string) bool {
	if val[0] != '"' {
		return false
	}
	s, err := decodeEventString(val)
	if err != nil {
		return false
	}
	*dst = s
	return true
}

// decodeEventString is decodeString with the event and delta types every event repeats
// returned as constants rather than a copy each.
func decodeEventString(raw []byte) (string, error) {
	switch string(raw) {
	case `"content_block_delta"`:
		return "content_block_delta", nil
	case `"text_delta"`:
		return "text_delta", nil
	case `"input_json_delta"`:
		return "input_json_delta", nil
	case `"thinking_delta"`:
		return "thinking_delta", nil
	case `"signature_delta"`:
		return "signature_delta", nil
	case `"content_block_start"`:
		return "content_block_start", nil
	case `"content_block_stop"`:
		return "content_block_stop", nil
	case `"message_delta"`:
		return "message_delta", nil
	case `"message_start"`:
		return "message_start", nil
	case `"message_stop"`:
		return "message_stop", nil
	case `"ping"`:
		return "ping", nil
	}
	return decodeString(raw)
}

// plainInt decodes an integer JSON number that fits int; false for any other value
// (fractions and exponents, which json.Unmarshal refuses for an int, included).
func plainInt(val []byte, dst *int) bool {
	for j, c := range val {
		if !(c >= '0' && c <= '9' || c == '-' && j == 0) {
			return false
		}
	}
	n, err := strconv.Atoi(string(val))
	if err != nil {
		return false
	}
	*dst = n
	return true
}
