package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// pct returns the p-th percentile (0–100) of xs by the nearest-rank method; NaN when empty.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	k := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// ms turns a duration into float milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// f1, f2, f3 format a number with 1, 2 or 3 decimals; NaN prints as "—".
func f1(x float64) string { return fnum(x, 1) }
func f2(x float64) string { return fnum(x, 2) }
func f3(x float64) string { return fnum(x, 3) }

func fnum(x float64, dec int) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "—"
	}
	return fmt.Sprintf("%.*f", dec, x)
}

// ktok formats a token count as "123.4k".
func ktok(n int) string { return fmt.Sprintf("%.1fk", float64(n)/1000) }
