package main

import "fmt"

// aim18 is one row of issue 18's table: the measure, the "today", this run's result
// and whether it meets the aim.
type aim18 struct {
	Measure, Today, Aim, Result string
	Met, Measured               bool
}

func verdict18(a aim18) string {
	switch {
	case !a.Measured:
		return "not measured in this run"
	case a.Met:
		return "met"
	}
	return "**missed**"
}

// aims18 computes issue 18's aims from the run; a measure whose part did not run is
// "not measured".
func aims18(r *results) []aim18 {
	var out []aim18
	add := func(measure, today, aim, result string, met, measured bool) {
		out = append(out, aim18{measure, today, aim, result, met, measured})
	}
	o := r.Overhead
	addedP50 := func(tokens int, kind, measure, today, aim string, limit float64) {
		c := findCase(o, tokens, kind)
		if c == nil {
			add(measure, today, aim, "—", false, false)
			return
		}
		d := pct(c.TTLB[armServe], 50) - pct(c.TTLB[armBare], 50)
		add(measure, today, aim, fmt.Sprintf("+%s ms", f2(d)), d <= limit, true)
	}
	addedP50(120_000, "warm", "120k warm, added over bare, p50", "+1.0–1.2 ms", "≤ +0.3 ms", 0.3)
	if c := findCase(o, 120_000, "warm"); c != nil {
		x := pct(c.TTLB[armServe], 99) / pct(c.TTLB[armBare], 99)
		add("120k warm, serve÷bare p99", "1.4–2.8×", "≤ 1.5×", f2(x)+"×", x <= 1.5, true)
	} else {
		add("120k warm, serve÷bare p99", "1.4–2.8×", "≤ 1.5×", "—", false, false)
	}
	addedP50(1_000_000, "warm", "1M warm, added over bare, p50", "+2.8–3.6 ms", "≤ +1 ms", 1)
	addedP50(400_000, "new cut", "400k new cut, added over bare, p50", "+17 ms", "≤ +5 ms", 5)
	for _, n := range []int{8, 32} {
		m := fmt.Sprintf("throughput at %d sessions, serve÷bare", n)
		found := false
		if o != nil {
			for _, rc := range o.RPS {
				if rc.Sessions == n {
					x := rc.RPS[armServe] / rc.RPS[armBare]
					add(m, map[int]string{8: "0.38–0.51", 32: "0.26–0.44"}[n], "≥ 0.8", f2(x), x >= 0.8, true)
					found = true
				}
				if rc.Sessions == 32 && n == 32 {
					add("peak RSS at 32 concurrent 120k sessions (fresh serve)", "162–186 MB", "≤ 64 MB", f1(rc.PeakMB)+" MB", rc.PeakMB <= 64, true)
				}
			}
		}
		if !found {
			add(m, "", "≥ 0.8", "—", false, false)
		}
	}
	if o != nil && o.WarmCPU != nil {
		if v, ok := o.WarmCPU[120_000]; ok {
			result := f2(v) + " ms"
			if b, ok := o.BareWarmCPU[120_000]; ok && b == b {
				result += " (the bare proxy: " + f2(b) + " ms)"
			}
			add("CPU per warm 120k request, store write included", "~4.5 ms", "≤ 1.5 ms", result, v <= 1.5, v == v)
		}
	}
	if s := r.Search; s != nil {
		for _, k := range []struct {
			m, today string
			k        searchKind
		}{
			{fmt.Sprintf("hybrid search p50 at %s rows × %d-dim", commas(int64(s.Rows)), s.Dim), "316 ms", s.Hybrid},
			{fmt.Sprintf("pattern search p50 at %s rows, literal", commas(int64(s.Rows))), "360 ms", s.Literal},
			{fmt.Sprintf("pattern search p50 at %s rows, class", commas(int64(s.Rows))), "360 ms", s.Class},
		} {
			add(k.m, k.today, "≤ 20 ms", f2(k.k.P50)+" ms", k.k.P50 <= 20, true)
		}
		x := s.MCP.P50 / s.SQL.P50
		add(fmt.Sprintf("lexical, %d matching rows at %s, mcp ÷ the same SQLite statements", s.MCP.Matches, commas(int64(s.Rows))), "7×",
			"≤ 1.5×", fmt.Sprintf("%s× (%s vs %s ms)", f2(x), f2(s.MCP.P50), f2(s.SQL.P50)), x <= 1.5, true)
	}
	for _, sc := range r.Scale {
		if sc.Sessions == 1 && sc.Rows == 1_000_000 {
			add("lexical search p50 at 1M rows", "148 ms", "≤ 20 ms", f2(sc.SearchP50)+" ms", sc.SearchP50 <= 20, true)
		}
	}
	return out
}
