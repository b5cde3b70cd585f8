package mcp

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// toolError is a problem the model can act on (a bad argument, an unknown session); handlers
// return its text as an isError result. mcp-go's schema validation is off because its
// messages print Go structs (research/go-spikes.md §2), so every argument is checked here.
type toolError struct{ msg string }

func (e toolError) Error() string { return e.msg }

func toolErrorf(format string, a ...any) error { return toolError{fmt.Sprintf(format, a...)} }

// args reads one call's arguments. A JSON null counts as absent.
type args struct {
	tool string
	m    map[string]any
}

// newArgs refuses argument names the tool does not take, naming the ones it does, so a
// misspelt sessionId is not silently ignored.
func newArgs(tool string, m map[string]any, allowed ...string) (args, error) {
	var unknown []string
	for k := range m {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return args{}, toolErrorf("%s does not take %s: its arguments are %s",
			tool, quoteList(unknown), strings.Join(allowed, ", "))
	}
	return args{tool: tool, m: m}, nil
}

// str returns a string argument; ok is false when it is absent.
func (a args) str(name string) (s string, ok bool, err error) {
	v := a.m[name]
	if v == nil {
		return "", false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", false, toolErrorf("%s must be a string, not %s", name, jsonType(v))
	}
	return s, true, nil
}

// integer returns an integer argument within [lo, hi], def when absent.
func (a args) integer(name string, def, lo, hi int) (int, error) {
	v := a.m[name]
	if v == nil {
		return def, nil
	}
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, toolErrorf("%s must be an integer from %d to %d", name, lo, hi)
		}
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	default:
		return 0, toolErrorf("%s must be an integer from %d to %d, not %s", name, lo, hi, jsonType(v))
	}
	if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, toolErrorf("%s must be an integer from %d to %d, not %v", name, lo, hi, v)
	}
	return int(f), nil
}

// boolean returns an optional boolean argument (nil when absent).
func (a args) boolean(name string) (*bool, error) {
	v := a.m[name]
	if v == nil {
		return nil, nil
	}
	b, ok := v.(bool)
	if !ok {
		return nil, toolErrorf("%s must be true or false (or omitted), not %s", name, jsonType(v))
	}
	return &b, nil
}

func jsonType(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", truncate(x, 40))
	case bool:
		return "a boolean"
	case float64, json.Number, int, int64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// truncate cuts s to at most n code points, marking the cut.
func truncate(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}
