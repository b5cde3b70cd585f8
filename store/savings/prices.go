package savings

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Price is one model family's list price in US dollars per million tokens: uncached input,
// cache read (a prompt-cache hit), cache write (Anthropic's 5-minute write; OpenAI bills no
// write, so it is the input price there) and output.
type Price struct {
	Input      float64 `json:"input"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
	Output     float64 `json:"output"`
}

// Prices maps a model-name prefix (a family: "claude-opus-5-5", "gpt-5.4-mini") to its
// Price. A model takes the price of the longest prefix it starts with (Lookup). The zero
// value prices nothing.
type Prices map[string]Price

// defaultPrices are the list prices of the Anthropic Claude and OpenAI GPT families the
// agents use, as published on 2026-12-02:
//   - Anthropic: the model overview pages and the pricing page of platform.claude.com
//     ("Models & pricing": input, 5m cache write, cache read, output). Haiku 5.5 is priced
//     by prompt length; the table has its rates for prompts up to 100,000 tokens (over
//     that, every rate is five times higher: override it in config.toml if your prompts
//     are longer).
//   - OpenAI: developers.openai.com/api/docs/pricing (input, cached input, output; OpenAI
//     bills no cache write, so CacheWrite is the input price).
//
// Prices change; config.toml's [prices."<prefix>"] tables override or extend these
// (docs/savings.md).
var defaultPrices = Prices{
	// Anthropic
	"claude-fable-5-1":  {Input: 10, CacheRead: 0.25, CacheWrite: 12.5, Output: 50},
	"claude-fable-5":    {Input: 10, CacheRead: 1, CacheWrite: 12.5, Output: 50},
	"claude-mythos-5-1": {Input: 10, CacheRead: 0.25, CacheWrite: 12.5, Output: 50},
	"claude-mythos-5":   {Input: 10, CacheRead: 1, CacheWrite: 12.5, Output: 50},
	"claude-opus-5-5":   {Input: 4, CacheRead: 0.2, CacheWrite: 5, Output: 20},
	"claude-opus-5":     {Input: 5, CacheRead: 0.5, CacheWrite: 6.25, Output: 25},
	"claude-opus-4-5":   {Input: 5, CacheRead: 0.5, CacheWrite: 6.25, Output: 25},
	"claude-opus-4-6":   {Input: 5, CacheRead: 0.5, CacheWrite: 6.25, Output: 25},
	"claude-opus-4-7":   {Input: 5, CacheRead: 0.5, CacheWrite: 6.25, Output: 25},
	"claude-opus-4-8":   {Input: 5, CacheRead: 0.5, CacheWrite: 6.25, Output: 25},
	"claude-opus-4":     {Input: 15, CacheRead: 1.5, CacheWrite: 18.75, Output: 75}, // Opus 4 and 4.1
	"claude-sonnet-5-5": {Input: 2, CacheRead: 0.2, CacheWrite: 2.5, Output: 10},
	"claude-sonnet-5":   {Input: 2, CacheRead: 0.2, CacheWrite: 2.5, Output: 10},
	"claude-sonnet-4":   {Input: 3, CacheRead: 0.3, CacheWrite: 3.75, Output: 15}, // Sonnet 4, 4.5, 4.6
	"claude-3-7-sonnet": {Input: 3, CacheRead: 0.3, CacheWrite: 3.75, Output: 15},
	"claude-haiku-5-5":  {Input: 0.1, CacheRead: 0.01, CacheWrite: 0.125, Output: 0.5},
	"claude-haiku-4-5":  {Input: 1, CacheRead: 0.1, CacheWrite: 1.25, Output: 5},
	"claude-3-5-haiku":  {Input: 0.8, CacheRead: 0.08, CacheWrite: 1, Output: 4},
	"claude-3-haiku":    {Input: 0.25, CacheRead: 0.03, CacheWrite: 0.3, Output: 1.25},
	// OpenAI
	"gpt-6.1-sol":  {Input: 2, CacheRead: 0.1, CacheWrite: 2, Output: 10},
	"gpt-5.4":      {Input: 2.5, CacheRead: 0.25, CacheWrite: 2.5, Output: 15},
	"gpt-5.4-mini": {Input: 0.75, CacheRead: 0.075, CacheWrite: 0.75, Output: 4.5},
	"gpt-5.4-nano": {Input: 0.2, CacheRead: 0.02, CacheWrite: 0.2, Output: 1.25},
	"gpt-5":        {Input: 1.25, CacheRead: 0.125, CacheWrite: 1.25, Output: 10}, // GPT-5, 5.1, gpt-5-codex
	"gpt-5-mini":   {Input: 0.25, CacheRead: 0.025, CacheWrite: 0.25, Output: 2},
	"gpt-5-nano":   {Input: 0.05, CacheRead: 0.005, CacheWrite: 0.05, Output: 0.4},
	"gpt-4.1":      {Input: 2, CacheRead: 0.5, CacheWrite: 2, Output: 8},
}

// DefaultPrices returns a copy of the built-in list prices (defaultPrices).
func DefaultPrices() Prices { return maps.Clone(defaultPrices) }

// With returns a copy of p with overrides set (a family's whole Price each).
func (p Prices) With(overrides Prices) Prices {
	out := maps.Clone(p)
	if out == nil {
		out = Prices{}
	}
	maps.Copy(out, overrides)
	return out
}

// Lookup returns the price of model: the entry of the longest prefix model starts with,
// compared without case. A provider prefix ("anthropic/claude-sonnet-4-5", OpenCode's
// names) is tried without it too. family is the prefix matched; ok is false when no prefix
// matches (the caller says "no price for model X" instead of guessing).
func (p Prices) Lookup(model string) (price Price, family string, ok bool) {
	m := strings.ToLower(strings.TrimSpace(model))
	cands := []string{m}
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		cands = append(cands, m[i+1:])
	}
	for _, c := range cands {
		for k, v := range p {
			lk := strings.ToLower(k)
			if strings.HasPrefix(c, lk) && len(lk) > len(family) {
				price, family, ok = v, k, true
			}
		}
		if ok {
			return price, family, true
		}
	}
	return Price{}, "", false
}

// Families lists p's prefixes, sorted.
func (p Prices) Families() []string { return slices.Sorted(maps.Keys(p)) }

// Tokens are the counts of one or more model calls, by how they are billed.
type Tokens struct {
	Input      int64 `json:"inputTokens"` // uncached input
	CacheRead  int64 `json:"cacheReadTokens"`
	CacheWrite int64 `json:"cacheCreationTokens"`
	Output     int64 `json:"outputTokens"`
}

// Add returns t + u.
func (t Tokens) Add(u Tokens) Tokens {
	return Tokens{t.Input + u.Input, t.CacheRead + u.CacheRead, t.CacheWrite + u.CacheWrite, t.Output + u.Output}
}

// Cost is what t costs at price, in US dollars.
func (pr Price) Cost(t Tokens) float64 {
	return (float64(t.Input)*pr.Input + float64(t.CacheRead)*pr.CacheRead +
		float64(t.CacheWrite)*pr.CacheWrite + float64(t.Output)*pr.Output) / 1e6
}

// NoPriceError says that a model has no price, and what to do.
func NoPriceError(model string) string {
	return fmt.Sprintf("no price for model %s: add [prices.%q] with input, cache_read, cache_write and output (USD per million tokens) to config.toml", model, model)
}
