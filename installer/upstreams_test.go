package installer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// testUpstreamConfig is config.toml at path as app gives it to ChainUpstreams, for the
// keys these tests write: [upstream] over the proxy's default base URLs, and the
// [upstream.agents.<agent>] tables of claude-code, codex and opencode.
func testUpstreamConfig(path string, port int) UpstreamConfig {
	return UpstreamConfig{Path: path, Port: port,
		Families: []string{"anthropic", "openai", "codex"}, Agents: []string{"claude-code", "codex", "opencode"},
		Parse: func(b []byte) (Upstreams, error) {
			var f struct {
				Upstream map[string]any `toml:"upstream"`
			}
			if err := toml.Unmarshal(b, &f); err != nil {
				return Upstreams{}, err
			}
			u := Upstreams{Family: map[string]string{"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1", "codex": "https://chatgpt.com/backend-api/codex"},
				Agents: map[string]map[string]string{}}
			for k, v := range f.Upstream {
				switch v := v.(type) {
				case string:
					u.Family[k] = strings.TrimRight(v, "/")
				case map[string]any:
					for agent, t := range v {
						u.Agents[agent] = map[string]string{}
						for fam, url := range t.(map[string]any) {
							u.Agents[agent][fam] = url.(string)
						}
					}
				}
			}
			return u, nil
		}}
}

func TestChainUpstreams(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(config, []byte("# mine\n[upstream]\nopenai = \"https://mine.example/v1\"\n\n[upstream.agents.opencode]\nopenai = \"https://mine.example/v1\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := Report{Agents: []AgentReport{
		{Agent: "claude-code", Upstreams: map[string]string{"anthropic": "https://gw.example/anthropic/"}},
		{Agent: "opencode", Upstreams: map[string]string{"openai": "https://other.example/v1", "anthropic": "https://gw.example/anthropic"}},
		{Agent: "codex", Upstreams: map[string]string{"codex": "http://localhost:4100/codex", "openai": "https://mine.example/v1/"}},
		{Agent: "failed", Err: errors.New("x"), Upstreams: map[string]string{"codex": "https://never.example"}},
		{Agent: "odd", Upstreams: map[string]string{"gemini": "https://g.example", "openai": "ftp://x"}},
	}}
	var out strings.Builder
	lines, err := ChainUpstreams(testUpstreamConfig(config, 4100), rep, false, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		fmt.Fprintln(&out, l)
	}
	got, _ := os.ReadFile(config)
	if want := "# mine\n[upstream]\nopenai = \"https://mine.example/v1\"\n\n[upstream.agents.opencode]\nopenai = \"https://mine.example/v1\"\n" +
		"anthropic = \"https://gw.example/anthropic\"\n\n[upstream.agents.claude-code]\nanthropic = \"https://gw.example/anthropic\"\n"; string(got) != want {
		t.Errorf("config.toml:\n%s\nwant\n%s", got, want)
	}
	for _, want := range []string{
		`claude-code: chained to its previous base URL: [upstream.agents.claude-code] anthropic = "https://gw.example/anthropic"`,
		`opencode: chained to its previous base URL: [upstream.agents.opencode] anthropic = "https://gw.example/anthropic"`,
		`opencode: pointed at https://other.example/v1 before; [upstream.agents.opencode] openai keeps "https://mine.example/v1"`,
		"codex: its previous base URL http://localhost:4100/codex is this proxy: not chained",
		"odd: its previous gemini base URL https://g.example has no [upstream] key",
		`odd: its previous base URL "ftp://x" is not an http(s) URL`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// codex's openai URL is [upstream] openai already: no key for it
	if strings.Contains(out.String(), "never.example") || strings.Count(out.String(), "chained to") != 2 {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestUnchainUpstreamsRoundTrip: what ChainUpstreams wrote and recorded, UnchainUpstreams
// takes out again, giving config.toml back byte for byte (or removing the file it created)
// and removing the record; a key changed since stays, and is reported. The CLI's round trip
// through install and uninstall is app's TestInstallUninstallUpstreamsByteIdentical.
func TestUnchainUpstreamsRoundTrip(t *testing.T) {
	t.Parallel()
	rep := Report{Agents: []AgentReport{{Agent: "claude-code", Upstreams: map[string]string{"anthropic": "https://gw.example/anthropic/"}}}}
	for _, before := range []string{"", "# mine\n[compaction]\nrecall = false", "[upstream]\nopenai = \"https://mine.example/v1\"\n\n"} {
		dir := t.TempDir()
		config, record := filepath.Join(dir, "config.toml"), filepath.Join(dir, "install", "upstreams.json")
		if before != "" {
			if err := os.WriteFile(config, []byte(before), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		c := testUpstreamConfig(config, 4100)
		if _, err := ChainUpstreams(c, rep, false, record); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(record)
		if err != nil || (posixModes && fi.Mode().Perm() != 0o600) {
			t.Fatalf("%q: record: %v %v", before, err, fi)
		}
		checkModes(t)
		lines, err := UnchainUpstreams(c, []string{"claude-code"}, record, false)
		if err != nil {
			t.Fatal(err)
		}
		if want := `claude-code: removed the upstream install chained: [upstream.agents.claude-code] anthropic = "https://gw.example/anthropic"`; !slices.Contains(lines, want) {
			t.Errorf("%q: lines %q lack %q", before, lines, want)
		}
		got, err := os.ReadFile(config)
		switch {
		case before == "" && !errors.Is(err, fs.ErrNotExist):
			t.Errorf("the config.toml ChainUpstreams created is still there: %q, %v", got, err)
		case before != "" && string(got) != before:
			t.Errorf("config.toml after the round trip:\n%q\nwant\n%q", got, before)
		}
		if _, err := os.Stat(record); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%q: record left: %v", before, err)
		}
	}

	// A key changed since install stays.
	dir := t.TempDir()
	config, record := filepath.Join(dir, "config.toml"), filepath.Join(dir, "upstreams.json")
	c := testUpstreamConfig(config, 4100)
	if _, err := ChainUpstreams(c, rep, false, record); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(config)
	edited := strings.Replace(string(b), "https://gw.example/anthropic", "https://new-gw.example", 1)
	if err := os.WriteFile(config, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	lines, err := UnchainUpstreams(c, []string{"claude-code"}, record, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(config); string(got) != edited {
		t.Errorf("config.toml:\n%s\nwant\n%s", got, edited)
	}
	if want := `claude-code: kept [upstream.agents.claude-code] anthropic = "https://new-gw.example" in ` + config + `: changed since install wrote "https://gw.example/anthropic"`; !slices.Contains(lines, want) {
		t.Errorf("lines %q lack %q", lines, want)
	}
}
