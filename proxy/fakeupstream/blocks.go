package fakeupstream

import (
	"fmt"
	"sort"
	"strings"
)

// checkBlock checks one content block against the allowed types and their fields. Field
// paths carry the type tag, as the API's do ("messages.13.content.0.thinking.cache_control").
func checkBlock(path string, v any, types map[string]map[string]bool) (map[string]any, *Error) {
	b := obj(v)
	if b == nil {
		return nil, invalid("%s: Input should be a valid dictionary", path)
	}
	if _, ok := b["type"]; !ok {
		return nil, required(path + ".type")
	}
	typ := str(b, "type")
	fields, ok := types[typ]
	if !ok {
		return nil, invalid("%s: Input tag '%s' found using 'type' does not match any of the expected tags: %s", path, typ, tagList(types))
	}
	tp := path + "." + typ
	if err := checkKeys(tp, b, fields); err != nil {
		return nil, err
	}
	err := checkBlockFields(tp, typ, b)
	if err == nil {
		err = checkCacheControl(tp, b)
	}
	return b, err
}

// checkBlockFields checks the fields of a block of type typ (tp: its path with the tag).
func checkBlockFields(tp, typ string, b map[string]any) *Error {
	var err *Error
	switch typ {
	case "text":
		err = wantString(tp, b, "text", true)
	case "thinking":
		if err = wantString(tp, b, "thinking", true); err == nil {
			err = wantString(tp, b, "signature", true)
		}
	case "redacted_thinking":
		err = wantString(tp, b, "data", true)
	case "image", "document":
		if _, ok := b["source"]; !ok {
			err = required(tp + ".source")
		}
	case "tool_reference":
		err = wantString(tp, b, "tool_name", true)
	case "tool_use", "server_tool_use", "mcp_tool_use":
		err = checkToolUse(tp, typ, b)
	case "tool_result":
		err = checkToolResult(tp, b)
	default:
		if strings.HasSuffix(typ, "_tool_result") {
			err = wantString(tp, b, "tool_use_id", true)
		}
	}
	return err
}

// checkToolUse checks a tool_use, server_tool_use or mcp_tool_use block.
func checkToolUse(tp, typ string, b map[string]any) *Error {
	var err *Error
	if err = wantString(tp, b, "id", true); err == nil {
		err = wantString(tp, b, "name", true)
	}
	if err == nil {
		if _, ok := b["input"]; !ok {
			err = required(tp + ".input")
		} else if obj(b["input"]) == nil {
			err = invalid("%s.input: Input should be a valid dictionary", tp)
		}
	}
	if err == nil && typ == "tool_use" && !toolIDPattern.MatchString(str(b, "id")) {
		err = invalid("%s.id: String should match pattern '^[a-zA-Z0-9_-]+$'", tp)
	}
	if err == nil && typ == "server_tool_use" && !serverToolIDPattern.MatchString(str(b, "id")) {
		err = invalid("%s.id: String should match pattern '^srvtoolu_[a-zA-Z0-9_]+$'", tp)
	}
	return err
}

// checkToolResult checks a tool_result block and the blocks of its content.
func checkToolResult(tp string, b map[string]any) *Error {
	var err *Error
	if err = wantString(tp, b, "tool_use_id", true); err == nil && !toolIDPattern.MatchString(str(b, "tool_use_id")) {
		err = invalid("%s.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'", tp)
	}
	if v, ok := b["is_error"]; err == nil && ok {
		if _, isBool := v.(bool); !isBool {
			err = invalid("%s.is_error: Input should be a valid boolean", tp)
		}
	}
	if err == nil {
		switch c := b["content"].(type) {
		case nil, string:
			if _, present := b["content"]; present && c == nil {
				err = invalid("%s.content: Input should be a valid string or list", tp)
			}
		case []any:
			for k, e := range c {
				if _, err = checkBlock(fmt.Sprintf("%s.content.%d", tp, k), e, resultBlocks); err != nil {
					break
				}
			}
		default:
			err = invalid("%s.content: Input should be a valid string or list", tp)
		}
	}
	return err
}

func tagList(types map[string]map[string]bool) string {
	var tags []string
	for t := range types {
		tags = append(tags, "'"+t+"'")
	}
	sort.Strings(tags)
	return strings.Join(tags, ", ")
}

// checkCacheControl checks the shape of b["cache_control"] if present (api-rules §1.6):
// {"type":"ephemeral"} with an optional ttl of "5m" or "1h".
func checkCacheControl(path string, b map[string]any) *Error {
	v, ok := b["cache_control"]
	if !ok {
		return nil
	}
	cp := join(path, "cache_control")
	if v == nil {
		return nil // null is "no breakpoint" in the SDKs
	}
	cc := obj(v)
	if cc == nil {
		return invalid("%s: Input should be a valid dictionary", cp)
	}
	if err := checkKeys(cp, cc, set("type", "ttl")); err != nil {
		return err
	}
	if str(cc, "type") != "ephemeral" {
		return invalid("%s.type: Input should be 'ephemeral'", cp)
	}
	if t, ok := cc["ttl"]; ok {
		if s, _ := t.(string); s != "5m" && s != "1h" {
			return invalid("%s.ttl: Input should be '5m' or '1h'", cp)
		}
	}
	return nil
}

// cacheTTL returns the ttl of a block's cache_control ("5m" or "1h"), or "" without one.
func cacheTTL(b map[string]any) string {
	cc := obj(b["cache_control"])
	if cc == nil {
		return ""
	}
	if t := str(cc, "ttl"); t != "" {
		return t
	}
	return "5m"
}
