package app

import (
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/config"
)

func TestSuggest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typo string
		want string
	}{
		{"stauts", "status"},
		{"instal", "install"},
		{"unistall", "uninstall"},
		{"docter", "doctor"},
		{"ofF", "off"},
		{"--verison", "version"},
		{"srv", ""},        // 3 letters: 1 edit allowed, "serve" is 2 away
		{"frobnicate", ""}, // nothing near
		{"", ""},
	}
	for _, tt := range tests {
		if got := config.Suggest(tt.typo, commands); got != tt.want {
			t.Errorf("Suggest(%q) = %q, want %q", tt.typo, got, tt.want)
		}
	}
	if got := config.Suggest("claude", config.ConfiguredAgents); got != "" {
		t.Errorf("Suggest(claude) = %q: 5 edits from claude-code, want none", got)
	}
	if got := config.Suggest("claud-code", config.ConfiguredAgents); got != "claude-code" {
		t.Errorf("Suggest(claud-code) = %q, want claude-code", got)
	}
}

// TestDidYouMean runs the command lines a typo makes and checks each error names what the
// user meant.
func TestDidYouMean(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"command", []string{"stauts"}, `unknown command "stauts" (did you mean "status"?)`},
		{"top-level flag", []string{"--verison"}, `did you mean "--version"?`},
		{"flag", []string{"install", "--dry-rn"}, `install: flag provided but not defined: -dry-rn (did you mean "--dry-run"?)`},
		{"flag with value", []string{"status", "--hour=3"}, `did you mean "--hours"?`},
		{"flag of on", []string{"on", "--confg", "x"}, `did you mean "--config"?`},
		{"agent of install", []string{"install", "--dry-run", "--agents", "codx"}, `unknown agent "codx" (did you mean "codex"?)`},
		{"agent of off", []string{"off", "opencod"}, `unknown agent "opencod" (did you mean "opencode"?)`},
		{"service command", []string{"service", "stat"}, `service: unknown command "stat" (did you mean "start"?)`},
		{"agent of follow", []string{"follow", "claude-cod"}, `unknown agent "claude-cod" (did you mean "claude-code"?)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sys, _, _ := testSystem(t, env{})
			err := run(t.Context(), tt.args, sys)
			if ExitCode(err) != 2 || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v (exit %d), want a usage error containing %q", err, ExitCode(err), tt.want)
			}
		})
	}
	sys, _, _ := testSystem(t, env{})
	if err := run(t.Context(), []string{"frobnicate"}, sys); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("err = %v: want no suggestion for a word near no command", err)
	}
}
