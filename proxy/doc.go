// Package proxy is the model-API side of Smarter Compact: routes, the session id rule,
// the adapters of the three API formats (Anthropic Messages, OpenAI Chat Completions and
// Responses, the last also for the ChatGPT Codex backend), tool-result compression, the sticky trim, the
// signed-thinking strip, the standing instruction, the calibrated token estimate and the
// usage tap on the response stream (DESIGN.md §4; contract seed 002: Trim, Rows,
// Proxy-inserted text; seed 001: context proxy, token estimate).
//
// It forwards what it keeps as the exact bytes it received (it splices, it never
// re-marshals a kept message) and fails open: any fault in a rewrite sends the original
// request upstream unchanged and logs one line.
//
// It imports store and nothing else of ours; app is its only importer.
package proxy
