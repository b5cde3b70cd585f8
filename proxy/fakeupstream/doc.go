// Package fakeupstream is a strict stand-in for api.anthropic.com and the OpenAI APIs in tests.
// A Server accepts what the Anthropic Messages API accepts and rejects what it rejects, with
// the same status codes, error envelope and error texts (research/api-rules.md §1, §2, and the
// strict fake checklist §6 items 1–14). It signs the thinking blocks it emits and checks them
// when they come back (§1.7.3, §1.7.4), simulates the prompt cache (§1.8), answers with
// scripted replies as an Anthropic event stream or JSON (§2.1), counts tokens (§2.2), and
// records every request.
//
// The same Server serves OpenAI Chat Completions (POST …/chat/completions, §3; checklist items
// 15–16: the tool_calls pairing) and Responses (POST …/responses, including the Codex backend
// path /backend-api/codex/responses, §4; items 17–20: call/output pairing, reasoning linkage,
// store:false item lookups, previous_response_id, message roles), with the OpenAI error
// envelope (§4.6), an automatic exact-prefix prompt cache (§3.4) and the usage fields of §7.
// The scripted Reply is the same for every format and rendered per format (see Reply). Its
// stubs for Codex: POST …/responses/compact, GET …/models, and a 426 for the websocket
// upgrade, which makes Codex fall back to HTTP (clients.md).
//
// Convo builds the requests of a Claude Code, Codex or OpenCode conversation without a model
// (convo.go), for the proxy's benchmarks, the bench and the soak.
//
// It is not part of the product: nothing in the binary's request path imports it. Tests of
// proxy, and the end-to-end test that drives the real Claude Code CLI through the proxy, point
// the Anthropic upstream at a Server; the bench (a command) uses Server and Convo. It imports
// nothing of ours, so any test or command may import it.
//
// Error texts that api-rules.md quotes are reproduced exactly. The others are ours: the
// pydantic-style schema errors ("…: Field required", "…: Input should be …") follow the
// API's wording, and the rest are marked "our text" or "not in api-rules" where they are
// made; tests elsewhere should match those by substring.
package fakeupstream
