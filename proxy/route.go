package proxy

import (
	"net/http"
	"strings"
)

// The path prefixes of the model-API routes (DESIGN.md §5), each ending in "/". The agent
// prefixes are what the installer points each agent at; the unprefixed ones are compatible
// with configs written for the seed, and the agent is inferred from the request's headers.
// A prefix without its trailing slash is a route too (ServeHTTP); a router mounts
// prefix+"*".
const (
	ClaudeCodePrefix = "/claude-code/"
	CodexPrefix      = "/codex/"
	// OpenCodePrefix is followed by the provider: /opencode/anthropic/… or /opencode/openai/….
	OpenCodePrefix = "/opencode/"
	// V1Prefix carries the unprefixed Anthropic (/v1/messages…) and OpenAI (/v1/…) APIs.
	V1Prefix = "/v1/"
	// CodexBackendPrefix is the unprefixed ChatGPT Codex backend.
	CodexBackendPrefix = "/backend-api/codex/"
)

// RoutePrefixes returns the prefixes of every model-API route ServeHTTP answers, for the
// listener's route table.
func RoutePrefixes() []string {
	return []string{ClaudeCodePrefix, CodexPrefix, OpenCodePrefix, V1Prefix, CodexBackendPrefix}
}

// route is where a request goes: the agent it belongs to, the API family that picks the
// upstream, and the path to append to the upstream base URL.
type route struct {
	agent, family, rest string
	// agentKnown is true when the agent comes from the path prefix or was inferred from the
	// request's headers; false when it is a route's default ("unknown", or "codex" on an
	// unprefixed Codex route without Codex's headers). Only then do per-agent upstreams apply.
	agentKnown bool
}

// routeFor maps a request path to its route (DESIGN.md §5).
func routeFor(r *http.Request) (route, bool) {
	path := r.URL.Path
	// cut matches the prefix with or without its trailing slash; rest keeps the slash
	cut := func(prefix string) (string, bool) {
		if path == prefix[:len(prefix)-1] || strings.HasPrefix(path, prefix) {
			return path[len(prefix)-1:], true
		}
		return "", false
	}
	if rest, ok := cut(ClaudeCodePrefix); ok {
		return route{"claude-code", "anthropic", rest, true}, true
	}
	if rest, ok := cut(CodexPrefix); ok {
		return route{"codex", "codex", rest, true}, true
	}
	if rest, ok := cut(OpenCodePrefix); ok {
		provider, tail, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
		switch provider {
		case "anthropic":
			return route{"opencode", "anthropic", "/" + tail, true}, true
		case "openai":
			return route{"opencode", "openai", "/" + tail, true}, true
		}
		return route{}, false
	}
	if rest, ok := cut(CodexBackendPrefix); ok {
		return inferred(r, "codex", "codex", rest), true
	}
	if strings.HasPrefix(path, V1Prefix+"messages") {
		return inferred(r, "unknown", "anthropic", path), true
	}
	if strings.HasPrefix(path, V1Prefix) {
		return inferred(r, "unknown", "openai", path), true
	}
	return route{}, false
}

// inferred is the route of an unprefixed path: the agent inferAgent finds, else def.
func inferred(r *http.Request, def, family, rest string) route {
	if a := inferAgent(r, ""); a != "" {
		return route{a, family, rest, true}
	}
	return route{def, family, rest, false}
}

// upstream returns the base URL for a route: the agent's [upstream.agents.<agent>] override
// when the route names or infers its agent, else the family's [upstream] key.
func (p *Proxy) upstream(rt route) string {
	if rt.agentKnown {
		if u := p.cfg().AgentUpstreams[rt.agent][rt.family]; u != "" {
			return u
		}
	}
	return p.cfg().Upstreams[rt.family]
}

// inferAgent names the agent of a request on a route without an agent prefix, from what
// the clients send (research/clients.md): Claude Code's session header or user agent,
// Codex's originator, OpenCode's user agent. A client that sends none of these gets def.
func inferAgent(r *http.Request, def string) string {
	ua := r.Header.Get("User-Agent")
	switch {
	case r.Header.Get("X-Claude-Code-Session-Id") != "" || strings.HasPrefix(ua, "claude-cli/"):
		return "claude-code"
	case strings.HasPrefix(r.Header.Get("Originator"), "codex") || strings.HasPrefix(ua, "codex"):
		return "codex"
	case strings.HasPrefix(ua, "opencode/"):
		return "opencode"
	}
	return def
}

// formatOf returns the wire format the route's path tail names and whether the proxy
// rewrites it (DESIGN.md §4.1, §4.2): the Anthropic Messages call and its count_tokens
// (rendered dry), Chat Completions, and Responses. /responses/compact, models and
// anything else pass through.
func formatOf(rt route) (f apiFormat, dry, ok bool) {
	switch rt.family {
	case "anthropic":
		switch rt.rest {
		case "/v1/messages", "/messages":
			return anthropicFormat, false, true
		case "/v1/messages/count_tokens", "/messages/count_tokens":
			// the same view as the model call, so the count matches and the thinking
			// prefix check (api-rules §2.2) sees what the model saw; nothing is stored
			return anthropicFormat, true, true
		}
	case "openai", "codex":
		switch {
		case strings.HasSuffix(rt.rest, "/chat/completions"):
			return chatFormat, false, true
		case strings.HasSuffix(rt.rest, "/responses"):
			return responsesFormat, false, true
		}
	}
	return 0, false, false
}

type routeKey struct{}

// isUpgrade reports a WebSocket upgrade request.
func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") ||
		strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade") && r.Header.Get("Upgrade") != ""
}
