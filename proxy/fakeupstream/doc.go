// Package fakeupstream is a strict stand-in for api.anthropic.com in tests. A Server accepts
// what the Anthropic Messages API accepts and rejects what it rejects, with the same status
// codes, error envelope and error texts (research/api-rules.md §1, §2, and the strict fake
// checklist §6 items 1–14). It signs the thinking blocks it emits and checks them when they come
// back (§1.7.3, §1.7.4), simulates the prompt cache (§1.8), answers with scripted replies as an
// Anthropic event stream or JSON (§2.1), counts tokens (§2.2), and records every request.
//
// It is not part of the product: nothing in the binary's request path imports it. Tests of
// proxy, and the end-to-end test that drives the real Claude Code CLI through the proxy, point
// the Anthropic upstream at a Server. It imports nothing of ours, so any test may import it.
//
// Error texts that api-rules.md quotes are reproduced exactly. The others are ours: the
// pydantic-style schema errors ("…: Field required", "…: Input should be …") follow the
// API's wording, and the rest are marked "our text" or "not in api-rules" where they are
// made; tests elsewhere should match those by substring.
package fakeupstream
