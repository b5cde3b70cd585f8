package config

import (
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/store/savings"
)

func TestConfigPrices(t *testing.T) {
	t.Parallel()
	got, err := load(t, `
[prices."claude-sonnet-4"]
output = 16.5

[prices."my-local-model"]
input = 0.5
cache_read = 0.05
cache_write = 0.6
output = 1.5
`, env{})
	if err != nil {
		t.Fatal(err)
	}
	p, fam, ok := got.Prices.Lookup("claude-sonnet-4-5-20250929")
	want := savings.DefaultPrices()["claude-sonnet-4"]
	want.Output = 16.5
	if !ok || fam != "claude-sonnet-4" || p != want {
		t.Errorf("claude-sonnet-4-5: %+v (%q, %v), want %+v: a partial table overrides only its keys", p, fam, ok, want)
	}
	if p, _, ok := got.Prices.Lookup("my-local-model-7b"); !ok || p != (savings.Price{Input: 0.5, CacheRead: 0.05, CacheWrite: 0.6, Output: 1.5}) {
		t.Errorf("my-local-model-7b: %+v, %v", p, ok)
	}
	if _, ok := got.Prices["claude-opus-5-5"]; !ok {
		t.Error("the built-in prices are gone after an override")
	}
}

func TestConfigPricesErrors(t *testing.T) {
	t.Parallel()
	_, err := load(t, `
[prices."new-model"]
input = 1.0

[prices."claude-opus-5"]
input = -1.0
`, env{})
	if err == nil {
		t.Fatal("no error for a negative price and a new model without its other keys")
	}
	for _, want := range []string{
		`[prices."new-model"] has no cache_read, cache_write, output`,
		`[prices."claude-opus-5"] input = -1: must be a number of at least 0`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := load(t, "[prices.\"x\"]\ninptu = 1.0\n", env{}); err == nil || !strings.Contains(err.Error(), `unknown key "prices.x.inptu"`) {
		t.Errorf("a misspelt key: %v", err)
	}
}
