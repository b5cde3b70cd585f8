package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/smarter-compact/smarter-compact/store/savings"
)

// The [prices."<model prefix>"] tables of config.toml (issue 15, Deliver 1; docs/savings.md):
// list prices in US dollars per million tokens that override or extend the built-in table
// (savings.DefaultPrices). A model takes the price of the longest prefix it starts with.
//
//	[prices."claude-sonnet-4"]
//	input = 3.0
//	cache_read = 0.3
//	cache_write = 3.75
//	output = 15.0

// filePrice is one [prices."<prefix>"] table. Pointers tell an absent key from 0.
type filePrice struct {
	Input      *float64 `toml:"input"`
	CacheRead  *float64 `toml:"cache_read"`
	CacheWrite *float64 `toml:"cache_write"`
	Output     *float64 `toml:"output"`
}

// priceKeys are a price table's keys in the order errors name them.
var priceKeys = []string{"input", "cache_read", "cache_write", "output"}

// prices resolves the [prices] tables over the built-in table. A table for a built-in
// prefix may give only the keys it changes; a new prefix must give all four. A value must be
// a finite number of at least 0. Every error is collected.
func (r *resolver) prices(tables map[string]filePrice) savings.Prices {
	out := savings.DefaultPrices()
	for _, prefix := range slices.Sorted(maps.Keys(tables)) {
		t := tables[prefix]
		k := Key{Section: fmt.Sprintf("prices.%q", prefix), Accepts: "a number of at least 0 (USD per million tokens)"}
		if prefix == "" {
			r.errs = append(r.errs, fmt.Errorf("config %s: [prices.\"\"]: the model prefix must not be empty: name a model family, e.g. [prices.\"claude-sonnet-4\"]", r.path))
			continue
		}
		p, known := out[prefix]
		vals := []*float64{t.Input, t.CacheRead, t.CacheWrite, t.Output}
		dst := []*float64{&p.Input, &p.CacheRead, &p.CacheWrite, &p.Output}
		var missing []string
		ok := true
		for i, v := range vals {
			if v == nil {
				if !known {
					missing = append(missing, priceKeys[i])
				}
				continue
			}
			if !finite(*v) || *v < 0 {
				k.Name = priceKeys[i]
				r.fileErr(k, *v)
				ok = false
				continue
			}
			*dst[i] = *v
		}
		if len(missing) > 0 {
			r.errs = append(r.errs, fmt.Errorf("config %s: [prices.%q] has no %s: a model family that is not built in needs input, cache_read, cache_write and output (USD per million tokens)",
				r.path, prefix, strings.Join(missing, ", ")))
			continue
		}
		if ok {
			out[prefix] = p
		}
	}
	return out
}
