package ui

import (
	"slices"
	"testing"
)

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 rows"}, {1, "1 row"}, {2, "2 rows"}, {1204, "1,204 rows"}, {-1, "-1 rows"}, {-1234567, "-1,234,567 rows"}} {
		if got := Plural(c.n, "row", "rows"); got != c.want {
			t.Errorf("Plural(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestIDParts(t *testing.T) {
	for sid, want := range map[string][]string{
		"5f0c9a8e-1b2c-4d3e-8f40-7731aa00beef": {"5f0c9a8e-", "1b2c-", "4d3e-", "8f40-", "7731aa00beef"},
		"ses-long":                             {"ses-", "long"},
		"plain":                                {"plain"},
		"trailing-":                            {"trailing-"},
	} {
		if got := idParts(sid); !slices.Equal(got, want) {
			t.Errorf("idParts(%q) = %q, want %q", sid, got, want)
		}
	}
}
