package app

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/config"
)

// TestInstallUninstallUpstreamsByteIdentical: install chains Claude Code's gateway into
// [upstream.agents.claude-code] only, records it, and uninstall gives config.toml back byte
// for byte (or removes the file install created).
func TestInstallUninstallUpstreamsByteIdentical(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		config *string
	}{
		{"existing config", ptr("# mine\n[compaction]\nrecall = false # keep\n")},
		{"existing config ending in a blank line", ptr("[upstream]\nopenai = \"https://mine.example/v1\"\n\n")},
		{"existing config without a final newline", ptr("[compaction]\nrecall = false")},
		{"no config", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sys, stdout, _, _ := installSystem(t)
			cfgFile := filepath.Join(sys.configDir, "smarter-compact", "config.toml")
			record := filepath.Join(sys.configDir, "smarter-compact", "install", "upstreams.json")
			if c.config != nil {
				writeTestFile(t, cfgFile, *c.config)
			}
			if err := run(t.Context(), []string{"install", "--agents", "claude-code"}, sys); err != nil {
				t.Fatalf("install: %v\n%s", err, stdout)
			}
			cfg, err := config.Load(cfgFile, true, env{}.Get)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Proxy.AgentUpstreams["claude-code"]["anthropic"]; got != "https://gw.example/anthropic" || cfg.Proxy.Upstreams["anthropic"] != "https://api.anthropic.com" {
				t.Errorf("after install: claude-code %q, family %q", got, cfg.Proxy.Upstreams["anthropic"])
			}
			if fi, err := os.Stat(record); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("record: %v %v", err, fi)
			}
			if err := run(t.Context(), []string{"uninstall", "--agents", "claude-code"}, sys); err != nil {
				t.Fatalf("uninstall: %v\n%s", err, stdout)
			}
			if want := `claude-code: removed the upstream install chained: [upstream.agents.claude-code] anthropic = "https://gw.example/anthropic"`; !strings.Contains(stdout.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, stdout)
			}
			got, err := os.ReadFile(cfgFile)
			switch {
			case c.config == nil && !errors.Is(err, fs.ErrNotExist):
				t.Errorf("config.toml install created is still there: %q, %v", got, err)
			case c.config != nil && string(got) != *c.config:
				t.Errorf("config.toml after uninstall:\n%q\nwant\n%q", got, *c.config)
			}
			if _, err := os.Stat(record); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("record left after uninstall: %v", err)
			}
		})
	}
}

// TestUninstallKeepsChangedUpstream: a key the user changed after install survives
// uninstall, which says so; a key still as install wrote it goes.
func TestUninstallKeepsChangedUpstream(t *testing.T) {
	t.Parallel()
	sys, stdout, _, _ := installSystem(t)
	cfgFile := filepath.Join(sys.configDir, "smarter-compact", "config.toml")
	if err := run(t.Context(), []string{"install", "--agents", "claude-code"}, sys); err != nil {
		t.Fatalf("install: %v\n%s", err, stdout)
	}
	b, _ := os.ReadFile(cfgFile)
	edited := strings.Replace(string(b), "https://gw.example/anthropic", "https://new-gw.example", 1)
	if edited == string(b) {
		t.Fatalf("config.toml after install:\n%s", b)
	}
	if err := os.WriteFile(cfgFile, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), []string{"uninstall", "--agents", "claude-code"}, sys); err != nil {
		t.Fatalf("uninstall: %v\n%s", err, stdout)
	}
	if got, _ := os.ReadFile(cfgFile); string(got) != edited {
		t.Errorf("config.toml after uninstall:\n%s\nwant\n%s", got, edited)
	}
	if want := `claude-code: kept [upstream.agents.claude-code] anthropic = "https://new-gw.example" in ` + cfgFile + `: changed since install wrote "https://gw.example/anthropic"`; !strings.Contains(stdout.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, stdout)
	}
}

func ptr[T any](v T) *T { return &v }
