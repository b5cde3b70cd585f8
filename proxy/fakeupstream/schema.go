package fakeupstream

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
)

// The schema pass: field allow-lists, required fields and field types (api-rules §1.1, §1.2;
// checklist §6 items 2 and 4). Unknown fields get pydantic's "…: Extra inputs are not
// permitted", as the API answers (e.g. "messages.13.content.0.thinking.cache_control: Extra
// inputs are not permitted"). The lists cover what the Go SDK can send and what Claude Code
// 2.1.332 and OpenCode 1.18.33 were seen sending (clients.md); nested free-form objects
// (output_config, context_management, safeguards, container, mcp_servers, diagnostics,
// input_schema, tool input) are not checked inside.

// Beta flags the fake knows a field needs; without the value in anthropic-beta the field is
// an unknown field.
const (
	BetaBlockBinding      = "thinking-binding-controls-2026-08-01" // thinking.block_binding (§1.7.4)
	betaContextManagement = "context-management-2025-06-27"
	betaPerTurnControl    = "per-turn-control-2026-07-01"   // output_config on a message
	betaSafeguards        = "dangerous-tool-use-2026-09-03" // safeguards (interactive Claude Code)
	betaCacheDiagnosis    = "cache-diagnosis-2026-04-07"
	betaDisplayUpdates    = "thinking-display-updates-2026-08-18" // thinking.display "updates"
	betaInterleaved       = "interleaved-thinking-2025-05-14"
)

var (
	messagesFields = set("model", "messages", "max_tokens", "system", "tools", "tool_choice",
		"thinking", "metadata", "cache_control", "output_config", "stop_sequences", "temperature",
		"top_k", "top_p", "service_tier", "container", "inference_geo", "stream", "mcp_servers",
		"context_management", "safeguards", "diagnostics")
	countTokensFields = set("model", "messages", "system", "tools", "tool_choice", "thinking",
		"cache_control", "output_config", "mcp_servers", "context_management")
	topBetas = map[string]string{
		"context_management": betaContextManagement,
		"safeguards":         betaSafeguards,
		"diagnostics":        betaCacheDiagnosis,
	}

	messageBlocks = map[string]map[string]bool{
		"text":                                   set("type", "text", "cache_control", "citations"),
		"image":                                  set("type", "source", "cache_control"),
		"document":                               set("type", "source", "cache_control", "title", "context", "citations"),
		"search_result":                          set("type", "source", "title", "content", "cache_control", "citations"),
		"thinking":                               set("type", "thinking", "signature"),
		"redacted_thinking":                      set("type", "data"),
		"tool_use":                               set("type", "id", "name", "input", "cache_control", "caller"),
		"tool_result":                            set("type", "tool_use_id", "content", "is_error", "cache_control"),
		"server_tool_use":                        set("type", "id", "name", "input", "cache_control", "caller"),
		"web_search_tool_result":                 serverResult,
		"web_fetch_tool_result":                  serverResult,
		"code_execution_tool_result":             serverResult,
		"bash_code_execution_tool_result":        serverResult,
		"text_editor_code_execution_tool_result": serverResult,
		"tool_search_tool_result":                serverResult,
		"advisor_tool_result":                    serverResult,
		"mcp_tool_use":                           set("type", "id", "name", "server_name", "input", "cache_control"),
		"mcp_tool_result":                        set("type", "tool_use_id", "is_error", "content", "cache_control"),
		"container_upload":                       set("type", "file_id", "cache_control"),
	}
	serverResult = set("type", "tool_use_id", "content", "cache_control", "caller")
	resultBlocks = map[string]map[string]bool{ // inside tool_result.content
		"text":           messageBlocks["text"],
		"image":          messageBlocks["image"],
		"document":       messageBlocks["document"],
		"search_result":  messageBlocks["search_result"],
		"tool_reference": set("type", "tool_name", "cache_control"),
	}
	customToolFields = set("type", "name", "description", "input_schema", "cache_control",
		"defer_loading", "eager_input_streaming", "strict", "input_examples", "allowed_callers")

	toolIDPattern       = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	serverToolIDPattern = regexp.MustCompile(`^srvtoolu_[a-zA-Z0-9_]+$`)
	toolNamePattern     = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// parsed is a request body that passed the schema pass.
type parsed struct {
	doc         map[string]any
	countTokens bool
	betas       []string
	model       string
	maxTokens   int64
	stream      bool
	system      []map[string]any
	tools       []map[string]any
	toolChoice  map[string]any
	thinking    thinking
	topCache    map[string]any
	msgs        []msg
}

type thinking struct {
	typ, display string
	budget       int64
	binding      string // thinking.block_binding.prefix_mismatch_behavior
}

func (t thinking) on() bool { return t.typ == "enabled" || t.typ == "adaptive" }

func (p *parsed) hasBeta(b string) bool { return slices.Contains(p.betas, b) }

func extra(path string) *Error { return invalid("%s: Extra inputs are not permitted", path) }

func required(path string) *Error { return invalid("%s: Field required", path) }

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// checkKeys rejects the first key (in sorted order) not in allowed.
func checkKeys(path string, m map[string]any, allowed map[string]bool) *Error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !allowed[k] {
			return extra(join(path, k))
		}
	}
	return nil
}

// wantString checks that m[key] is a string; absent is an error only when need is set.
func wantString(path string, m map[string]any, key string, need bool) *Error {
	v, ok := m[key]
	if !ok {
		if need {
			return required(join(path, key))
		}
		return nil
	}
	if _, ok := v.(string); !ok {
		return invalid("%s: Input should be a valid string", join(path, key))
	}
	return nil
}

// parseBody runs the schema pass over a decoded body.
func parseBody(doc map[string]any, betas []string, countTokens bool) (*parsed, *Error) {
	p := &parsed{doc: doc, countTokens: countTokens, betas: betas}
	allowed := messagesFields
	if countTokens {
		allowed = countTokensFields
	}
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		if !allowed[k] {
			return nil, extra(k)
		}
		if beta, ok := topBetas[k]; ok && !p.hasBeta(beta) {
			return nil, extra(k)
		}
	}

	if err := p.parseScalars(); err != nil {
		return nil, err
	}
	if _, ok := doc["messages"]; !ok {
		return nil, required("messages")
	}
	list, ok := doc["messages"].([]any)
	if !ok {
		return nil, invalid("messages: Input should be a valid list")
	}
	if len(list) == 0 {
		return nil, invalid("messages: List should have at least 1 item after validation, not 0")
	}
	if len(list) > 100000 {
		return nil, invalid("messages: There is a limit of 100,000 messages in a single request.") // our text after the SDK doc
	}

	if err := p.parseSystem(); err != nil {
		return nil, err
	}
	if err := p.parseTools(); err != nil {
		return nil, err
	}
	if err := p.parseThinking(); err != nil {
		return nil, err
	}
	if err := p.parseTop(); err != nil {
		return nil, err
	}
	for i, v := range list {
		m, err := p.parseMessage(i, v)
		if err != nil {
			return nil, err
		}
		p.msgs = append(p.msgs, m)
	}
	return p, nil
}

// parseScalars reads model, max_tokens (not for count_tokens) and stream.
func (p *parsed) parseScalars() *Error {
	doc := p.doc
	if _, ok := doc["model"]; !ok {
		return required("model")
	}
	if err := wantString("", doc, "model", true); err != nil {
		return err
	}
	p.model = str(doc, "model")
	if p.model == "" {
		return invalid("model: String should have at least 1 character")
	}
	if !p.countTokens {
		if _, ok := doc["max_tokens"]; !ok {
			return required("max_tokens")
		}
		n, ok := num(doc, "max_tokens")
		if !ok {
			return invalid("max_tokens: Input should be a valid integer")
		}
		if n < 0 {
			return invalid("max_tokens: Input should be greater than or equal to 0")
		}
		p.maxTokens = n
	}
	if v, ok := doc["stream"]; ok {
		b, ok := v.(bool)
		if !ok {
			return invalid("stream: Input should be a valid boolean")
		}
		p.stream = b
	}
	return nil
}

func (p *parsed) parseSystem() *Error {
	v, ok := p.doc["system"]
	if !ok {
		return nil
	}
	switch s := v.(type) {
	case string:
		if s != "" {
			p.system = []map[string]any{{"type": "text", "text": s}}
		}
		return nil
	case []any:
		for i, e := range s {
			path := fmt.Sprintf("system.%d", i)
			b := obj(e)
			if b == nil {
				return invalid("%s: Input should be a valid dictionary", path)
			}
			if str(b, "type") != "text" {
				return invalid("%s.type: Input should be 'text'", path)
			}
			if err := checkKeys(path, b, messageBlocks["text"]); err != nil {
				return err
			}
			if err := wantString(path, b, "text", true); err != nil {
				return err
			}
			if err := checkCacheControl(path, b); err != nil {
				return err
			}
			p.system = append(p.system, b)
		}
		return nil
	}
	return invalid("system: Input should be a valid string or list")
}

func (p *parsed) parseTools() *Error {
	v, ok := p.doc["tools"]
	if !ok {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		return invalid("tools: Input should be a valid list")
	}
	names := map[string]bool{}
	for i, e := range list {
		t := obj(e)
		if t == nil {
			return invalid("tools.%d: Input should be a valid dictionary", i)
		}
		typ := str(t, "type")
		custom := typ == "" || typ == "custom"
		if custom {
			path := fmt.Sprintf("tools.%d.custom", i)
			if err := checkKeys(path, t, customToolFields); err != nil {
				return err
			}
			if err := wantString(path, t, "name", true); err != nil {
				return err
			}
			if !toolNamePattern.MatchString(str(t, "name")) {
				return invalid("%s.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", path)
			}
			if _, ok := t["input_schema"]; !ok {
				return required(path + ".input_schema")
			}
			if obj(t["input_schema"]) == nil {
				return invalid("%s.input_schema: Input should be a valid dictionary", path)
			}
		}
		if err := checkCacheControl(fmt.Sprintf("tools.%d", i), t); err != nil {
			return err
		}
		if name := str(t, "name"); name != "" {
			if names[name] {
				return invalid("tools: Tool names must be unique.") // not in api-rules
			}
			names[name] = true
		}
		p.tools = append(p.tools, t)
	}
	return nil
}

func (p *parsed) parseThinking() *Error {
	v, ok := p.doc["thinking"]
	if !ok {
		return nil
	}
	t := obj(v)
	if t == nil {
		return invalid("thinking: Input should be a valid dictionary")
	}
	typ := str(t, "type")
	var allowed map[string]bool
	switch typ {
	case "enabled":
		allowed = set("type", "budget_tokens", "display", "block_binding")
	case "adaptive":
		allowed = set("type", "display", "block_binding")
	case "disabled":
		allowed = set("type")
	case "":
		return required("thinking.type")
	default:
		return invalid("thinking: Input tag '%s' found using 'type' does not match any of the expected tags: 'adaptive', 'disabled', 'enabled'", typ)
	}
	for _, k := range slices.Sorted(maps.Keys(t)) {
		if k == "block_binding" && !p.hasBeta(BetaBlockBinding) {
			return extra("block_binding") // the documented text (api-rules §1.1, §1.7.4)
		}
		if !allowed[k] {
			return extra("thinking." + typ + "." + k)
		}
	}
	p.thinking.typ = typ
	if typ == "enabled" {
		if _, ok := t["budget_tokens"]; !ok {
			return required("thinking.enabled.budget_tokens")
		}
		n, ok := num(t, "budget_tokens")
		if !ok {
			return invalid("thinking.enabled.budget_tokens: Input should be a valid integer")
		}
		p.thinking.budget = n
	}
	return p.parseThinkingOptions(t, typ)
}

// parseThinkingOptions reads thinking.display and thinking.block_binding (§1.1, §1.7.4).
func (p *parsed) parseThinkingOptions(t map[string]any, typ string) *Error {
	if d, ok := t["display"]; ok {
		s, _ := d.(string)
		switch {
		case s == "summarized" || s == "omitted":
		case s == "updates" && p.hasBeta(betaDisplayUpdates):
		default:
			return invalid("thinking.%s.display: Input should be 'summarized' or 'omitted'", typ)
		}
		p.thinking.display = s
	}
	if bb, ok := t["block_binding"]; ok {
		b := obj(bb)
		if b == nil {
			return invalid("thinking.%s.block_binding: Input should be a valid dictionary", typ)
		}
		if err := checkKeys("thinking."+typ+".block_binding", b, set("prefix_mismatch_behavior")); err != nil {
			return err
		}
		switch s := str(b, "prefix_mismatch_behavior"); s {
		case "error", "drop_block":
			p.thinking.binding = s
		default:
			return invalid("thinking.%s.block_binding.prefix_mismatch_behavior: Input should be 'error' or 'drop_block'", typ)
		}
	}
	return nil
}

// parseTop checks tool_choice, metadata and the top-level cache_control.
func (p *parsed) parseTop() *Error {
	if v, ok := p.doc["tool_choice"]; ok {
		tc := obj(v)
		if tc == nil {
			return invalid("tool_choice: Input should be a valid dictionary")
		}
		typ := str(tc, "type")
		var allowed map[string]bool
		switch typ {
		case "auto", "any":
			allowed = set("type", "disable_parallel_tool_use")
		case "tool":
			allowed = set("type", "name", "disable_parallel_tool_use")
		case "none":
			allowed = set("type")
		default:
			return invalid("tool_choice: Input tag '%s' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'", typ)
		}
		if err := checkKeys("tool_choice."+typ, tc, allowed); err != nil {
			return err
		}
		if typ == "tool" {
			if err := wantString("tool_choice.tool", tc, "name", true); err != nil {
				return err
			}
		}
		p.toolChoice = tc
	}
	if v, ok := p.doc["metadata"]; ok {
		md := obj(v)
		if md == nil {
			return invalid("metadata: Input should be a valid dictionary")
		}
		if err := checkKeys("metadata", md, set("user_id")); err != nil {
			return err
		}
		if err := wantString("metadata", md, "user_id", false); err != nil {
			return err
		}
		if len([]rune(str(md, "user_id"))) > 256 {
			return invalid("metadata.user_id: String should have at most 256 characters")
		}
	}
	if _, ok := p.doc["cache_control"]; ok {
		if err := checkCacheControl("", p.doc); err != nil {
			return err
		}
		p.topCache = obj(p.doc["cache_control"])
	}
	return nil
}

func (p *parsed) parseMessage(i int, v any) (msg, *Error) {
	path := fmt.Sprintf("messages.%d", i)
	m := obj(v)
	if m == nil {
		return msg{}, invalid("%s: Input should be a valid dictionary", path)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch {
		case k == "role" || k == "content":
		case k == "output_config" && p.hasBeta(betaPerTurnControl):
		default:
			return msg{}, extra(join(path, k))
		}
	}
	if _, ok := m["role"]; !ok {
		return msg{}, required(path + ".role")
	}
	role := str(m, "role")
	if role != "user" && role != "assistant" && role != "system" {
		return msg{}, invalid("%s.role: Input should be 'user', 'assistant' or 'system'", path)
	}
	out := msg{role: role}
	content, ok := m["content"]
	if !ok {
		return msg{}, required(path + ".content")
	}
	switch c := content.(type) {
	case string:
		out.str = true
		if c != "" { // "" is empty content, caught by the sequence rules
			out.blocks = []map[string]any{{"type": "text", "text": c}}
		}
	case []any:
		out.blocks = []map[string]any{}
		for j, e := range c {
			b, err := checkBlock(fmt.Sprintf("%s.content.%d", path, j), e, messageBlocks)
			if err != nil {
				return msg{}, err
			}
			out.blocks = append(out.blocks, b)
		}
	default:
		return msg{}, invalid("%s.content: Input should be a valid string or list", path)
	}
	return out, nil
}
