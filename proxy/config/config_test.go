package config

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy"
	"github.com/smarter-compact/smarter-compact/proxy/config/configtest"
	"github.com/smarter-compact/smarter-compact/store/savings"
)

// env is a fake environment for getenv (configtest.Env, shared with app's tests).
type env = configtest.Env

// load reads text as an explicitly named config.toml under e.
func load(t *testing.T, text string, e env) (Config, error) {
	t.Helper()
	return Load(configtest.WriteConfig(t, text), true, e.Get)
}

func wantDefaults() Config {
	px := proxy.DefaultSettings()
	px.IdleTimeout = defaultUpstreamIdleTimeoutS * time.Second
	return Config{
		Port: 4100,
		Agents: map[string]bool{
			"claude-code": true, "codex": true, "opencode": true, "unknown": true,
		},
		Proxy:              px,
		CompactionMaxChars: 12000,
		CompactionRecall:   true,
		TTLDays:            30,
		EmbeddingURL:       "http://127.0.0.1:11434/v1",
		EmbeddingTimeout:   30 * time.Second,
		EmbeddingMaxChars:  4000,
		Prices:             savings.DefaultPrices(),
		BodyReadTimeout:    defaultBodyReadTimeoutS * time.Second,
	}
}

func TestConfigDefaultsWhenFileMissing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, explicit, err := Path("", env{}.Get, dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "smarter-compact", "config.toml"); path != want || explicit {
		t.Fatalf("ConfigPath = %q, %v; want %q, false", path, explicit, want)
	}
	got, err := Load(path, explicit, env{}.Get)
	if err != nil {
		t.Fatal(err)
	}
	want := wantDefaults()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", got, want)
	}
	if got.Proxy.TrimAtTokens != 0 {
		t.Errorf("TrimAtTokens = %d, want 0 (follow the model)", got.Proxy.TrimAtTokens)
	}
}

func TestConfigPathPrecedence(t *testing.T) {
	t.Parallel()
	e := env{"SMARTER_COMPACT_CONFIG": "/from/env.toml"}
	tests := []struct {
		name, flag   string
		env          env
		configDir    string
		want         string
		wantExplicit bool
		wantErr      string
	}{
		{name: "flag wins", flag: "/from/flag.toml", env: e, configDir: "/cfg", want: "/from/flag.toml", wantExplicit: true},
		{name: "env next", env: e, configDir: "/cfg", want: "/from/env.toml", wantExplicit: true},
		{name: "user config dir", env: env{}, configDir: "/cfg", want: filepath.Join("/cfg", "smarter-compact", "config.toml")},
		{name: "no config dir", env: env{}, wantErr: "SMARTER_COMPACT_CONFIG"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, explicit, err := Path(tt.flag, tt.env.Get, tt.configDir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want || explicit != tt.wantExplicit {
				t.Fatalf("ConfigPath = %q, %v, %v; want %q, %v", got, explicit, err, tt.want, tt.wantExplicit)
			}
		})
	}
}

func TestConfigExplicitPathMustExist(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "typo.toml")
	_, err := Load(path, true, env{}.Get)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want one naming %s", err, path)
	}
}

const fullFile = `
[context_proxy]
enabled = false
port = 4200
trim_at_tokens = 90000
trim_to_fraction = 0.5
chars_per_token = 3
compress_over_tokens = 0
standing_instruction = false

[context_proxy.agents]
codex = true

[compaction]
max_chars = 8000
recall = false

[context_store]
ttl_days = 0
embedding_model = "nomic-embed-text"
embedding_url = "http://127.0.0.1:9999/v1/"
embedding_timeout_s = 5
embedding_max_chars = 2000

[upstream]
anthropic = "https://gateway.example/anthropic"
openai = "http://127.0.0.1:8080"
codex = "https://chatgpt.example/backend-api/codex"
`

func TestConfigFileValues(t *testing.T) {
	t.Parallel()
	path := configtest.WriteConfig(t, fullFile)
	got, err := Load(path, true, env{}.Get)
	if err != nil {
		t.Fatal(err)
	}
	want := wantDefaults()
	want.Path = path
	want.Port = 4200
	want.Agents = map[string]bool{"claude-code": false, "codex": true, "opencode": false, "unknown": false}
	want.Proxy.TrimAtTokens = 90000
	want.Proxy.TrimToFraction = 0.5
	want.Proxy.CharsPerToken = 3
	want.Proxy.CompressOverTokens = 0
	want.Proxy.StandingInstruction = false
	want.Proxy.Upstreams = map[string]string{
		"anthropic": "https://gateway.example/anthropic",
		"openai":    "http://127.0.0.1:8080",
		"codex":     "https://chatgpt.example/backend-api/codex",
	}
	want.CompactionMaxChars = 8000
	want.CompactionRecall = false
	want.TTLDays = 0
	want.EmbeddingModel = "nomic-embed-text"
	want.EmbeddingURL = "http://127.0.0.1:9999/v1" // trailing slash dropped
	want.EmbeddingTimeout = 5 * time.Second
	want.EmbeddingMaxChars = 2000
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("file values:\n got %+v\nwant %+v", got, want)
	}
}

func TestConfigEnvWinsOverFile(t *testing.T) {
	t.Parallel()
	e := env{
		"CONTEXT_PROXY_PORT":                 "4300",
		"CONTEXT_PROXY_ENABLED":              "1",
		"CONTEXT_TRIM_AT_TOKENS":             "70000",
		"CONTEXT_TRIM_TO_FRACTION":           "0.25",
		"CONTEXT_CHARS_PER_TOKEN":            "2.3",
		"CONTEXT_COMPRESS_OVER_TOKENS":       "1000",
		"CONTEXT_STANDING_INSTRUCTION":       "TRUE",
		"CONTEXT_COMPACTION_MAX_CHARS":       "500",
		"CONTEXT_COMPACTION_RECALL":          "true",
		"CONTEXT_STORE_TTL_DAYS":             "7",
		"CONTEXT_EMBEDDING_MODEL":            "env-model",
		"CONTEXT_EMBEDDING_URL":              "https://embed.example/v1",
		"CONTEXT_EMBEDDING_TIMEOUT_S":        "12",
		"CONTEXT_EMBEDDING_MAX_CHARS":        "100",
		"SMARTER_COMPACT_UPSTREAM_ANTHROPIC": "https://a.example",
		"SMARTER_COMPACT_UPSTREAM_OPENAI":    "https://o.example",
		"SMARTER_COMPACT_UPSTREAM_CODEX":     "https://c.example/codex",
	}
	got, err := load(t, fullFile, e)
	if err != nil {
		t.Fatal(err)
	}
	want := wantDefaults()
	want.Path = got.Path
	want.Port = 4300
	want.Agents = map[string]bool{"claude-code": true, "codex": true, "opencode": true, "unknown": true}
	want.Proxy.TrimAtTokens = 70000
	want.Proxy.TrimToFraction = 0.25
	want.Proxy.CharsPerToken = 2.3
	want.Proxy.CompressOverTokens = 1000
	want.Proxy.StandingInstruction = true
	want.Proxy.Upstreams = map[string]string{"anthropic": "https://a.example", "openai": "https://o.example", "codex": "https://c.example/codex"}
	want.CompactionMaxChars = 500
	want.CompactionRecall = true
	want.TTLDays = 7
	want.EmbeddingModel = "env-model"
	want.EmbeddingURL = "https://embed.example/v1"
	want.EmbeddingTimeout = 12 * time.Second
	want.EmbeddingMaxChars = 100
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("env over file:\n got %+v\nwant %+v", got, want)
	}
}

func TestConfigEmptyEnvIsUnset(t *testing.T) {
	t.Parallel()
	got, err := load(t, "[context_proxy]\nport = 4200\n", env{"CONTEXT_PROXY_PORT": "", "CONTEXT_PROXY_ENABLED": " "})
	if err != nil {
		t.Fatal(err)
	}
	if got.Port != 4200 || !got.Agents["codex"] {
		t.Fatalf("Port = %d, codex = %v; want the file's 4200 and the default on", got.Port, got.Agents["codex"])
	}
}

func TestConfigAgents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		env  env
		want map[string]bool // claude-code, codex, opencode, unknown
	}{
		{
			name: "nothing set: every agent on",
			want: map[string]bool{"claude-code": true, "codex": true, "opencode": true, "unknown": true},
		},
		{
			name: "enabled false: missing keys follow it",
			file: "[context_proxy]\nenabled = false\n[context_proxy.agents]\nopencode = true\n",
			want: map[string]bool{"claude-code": false, "codex": false, "opencode": true, "unknown": false},
		},
		{
			name: "enabled unset: a key set false turns only that agent off",
			file: "[context_proxy.agents]\nclaude-code = false\n",
			want: map[string]bool{"claude-code": false, "codex": true, "opencode": true, "unknown": true},
		},
		{
			name: "enabled true with an agent off",
			file: "[context_proxy]\nenabled = true\n[context_proxy.agents]\ncodex = false\n",
			want: map[string]bool{"claude-code": true, "codex": false, "opencode": true, "unknown": true},
		},
		{
			name: "CONTEXT_PROXY_ENABLED=0 is the master switch over agent keys",
			file: "[context_proxy.agents]\nclaude-code = true\n",
			env:  env{"CONTEXT_PROXY_ENABLED": "0"},
			want: map[string]bool{"claude-code": false, "codex": false, "opencode": false, "unknown": false},
		},
		{
			name: "CONTEXT_PROXY_ENABLED=true over enabled = false",
			file: "[context_proxy]\nenabled = false\n[context_proxy.agents]\ncodex = false\n",
			env:  env{"CONTEXT_PROXY_ENABLED": "true"},
			want: map[string]bool{"claude-code": true, "codex": true, "opencode": true, "unknown": true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := load(t, tt.file, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Agents, tt.want) {
				t.Fatalf("Agents = %v, want %v", got.Agents, tt.want)
			}
		})
	}
}

func TestConfigUnknownKey(t *testing.T) {
	t.Parallel()
	path := configtest.WriteConfig(t, "[context_proxy]\nport = 4100\nprot = 4200\n\n[context_proxy.agents]\ncursor = true\n")
	_, err := Load(path, true, env{}.Get)
	if err == nil {
		t.Fatal("want an error for unknown keys")
	}
	for _, want := range []string{path + ":3:", `"context_proxy.prot"`, path + ":6:", `"context_proxy.agents.cursor"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestConfigSyntaxError(t *testing.T) {
	t.Parallel()
	path := configtest.WriteConfig(t, "[context_proxy\nport = 1\n")
	_, err := Load(path, true, env{}.Get)
	if err == nil || !strings.Contains(err.Error(), path+":1:") {
		t.Fatalf("err = %v, want one naming %s and line 1", err, path)
	}
}

// TestConfigBadValues checks that every rejected value names its key (or variable) and what
// the key accepts.
func TestConfigBadValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		env  env
		want []string
	}{
		{"section as value", "context_proxy = 3", nil, []string{":1:", "context_proxy must be a table"}},
		{"subsection as value", "[context_proxy]\nagents = true", nil, []string{":2:", "context_proxy.agents must be a table"}},
		{"port 0", "[context_proxy]\nport = 0", nil, []string{"[context_proxy] port = 0", "1 to 65535"}},
		{"port too big", "[context_proxy]\nport = 70000", nil, []string{"[context_proxy] port = 70000", "1 to 65535"}},
		{"port as string", "[context_proxy]\nport = \"4100\"", nil, []string{":2:", "[context_proxy] port must be", "1 to 65535"}},
		{"port float", "[context_proxy]\nport = 4100.5", nil, []string{"[context_proxy] port must be", "1 to 65535"}},
		{"env port word", "", env{"CONTEXT_PROXY_PORT": "http"}, []string{`CONTEXT_PROXY_PORT="http"`, "1 to 65535"}},
		{"env port range", "", env{"CONTEXT_PROXY_PORT": "65536"}, []string{`CONTEXT_PROXY_PORT="65536"`, "1 to 65535"}},
		{"trim_at_tokens 0", "[context_proxy]\ntrim_at_tokens = 0", nil, []string{"[context_proxy] trim_at_tokens = 0", "at least 1"}},
		{"env trim at tokens negative", "", env{"CONTEXT_TRIM_AT_TOKENS": "-5"}, []string{`CONTEXT_TRIM_AT_TOKENS="-5"`, "at least 1"}},
		{"chars_per_token 0", "[context_proxy]\nchars_per_token = 0.0", nil, []string{"[context_proxy] chars_per_token = 0", "greater than 0"}},
		{"chars_per_token nan", "[context_proxy]\nchars_per_token = nan", nil, []string{"[context_proxy] chars_per_token = NaN", "greater than 0"}},
		{"env chars per token", "", env{"CONTEXT_CHARS_PER_TOKEN": "-1"}, []string{`CONTEXT_CHARS_PER_TOKEN="-1"`, "greater than 0"}},
		{"compress negative", "[context_proxy]\ncompress_over_tokens = -1", nil, []string{"[context_proxy] compress_over_tokens = -1", "at least 0"}},
		{"standing instruction type", "[context_proxy]\nstanding_instruction = 1", nil, []string{"[context_proxy] standing_instruction must be true or false"}},
		{"env standing instruction", "", env{"CONTEXT_STANDING_INSTRUCTION": "yes"}, []string{`CONTEXT_STANDING_INSTRUCTION="yes"`, "0, 1, true, false"}},
		{"env enabled", "", env{"CONTEXT_PROXY_ENABLED": "on"}, []string{`CONTEXT_PROXY_ENABLED="on"`, "0, 1, true, false"}},
		{"agent type", "[context_proxy.agents]\ncodex = \"yes\"", nil, []string{"[context_proxy.agents] codex must be true or false"}},
		{"max_chars negative", "[compaction]\nmax_chars = -1", nil, []string{"[compaction] max_chars = -1", "at least 0"}},
		{"env recall", "", env{"CONTEXT_COMPACTION_RECALL": "2"}, []string{`CONTEXT_COMPACTION_RECALL="2"`, "true, false"}},
		{"ttl negative", "[context_store]\nttl_days = -1", nil, []string{"[context_store] ttl_days = -1", "at least 0"}},
		{"env ttl", "", env{"CONTEXT_STORE_TTL_DAYS": "30d"}, []string{`CONTEXT_STORE_TTL_DAYS="30d"`, "at least 0"}},
		{"embedding url scheme", "[context_store]\nembedding_url = \"127.0.0.1:11434/v1\"", nil, []string{"[context_store] embedding_url", "absolute http or https URL"}},
		{"embedding timeout 0", "[context_store]\nembedding_timeout_s = 0", nil, []string{"[context_store] embedding_timeout_s = 0", "at least 1"}},
		{"env embedding max chars", "", env{"CONTEXT_EMBEDDING_MAX_CHARS": "0"}, []string{`CONTEXT_EMBEDDING_MAX_CHARS="0"`, "at least 1"}},
		{"upstream relative", "[upstream]\nanthropic = \"/v1\"", nil, []string{"[upstream] anthropic", "absolute http or https URL"}},
		{"upstream ftp", "[upstream]\nopenai = \"ftp://x.example\"", nil, []string{"[upstream] openai", "absolute http or https URL"}},
		{"env upstream", "", env{"SMARTER_COMPACT_UPSTREAM_CODEX": "chatgpt.com"}, []string{`SMARTER_COMPACT_UPSTREAM_CODEX="chatgpt.com"`, "absolute http or https URL"}},
		{
			"several at once", "[context_proxy]\nport = 0\n[compaction]\nmax_chars = -1", env{"CONTEXT_STORE_TTL_DAYS": "x"},
			[]string{"[context_proxy] port = 0", "[compaction] max_chars = -1", `CONTEXT_STORE_TTL_DAYS="x"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := configtest.WriteConfig(t, tt.file+"\n")
			_, err := Load(path, true, tt.env.Get)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if tt.env == nil && !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file %s", err, path)
			}
		})
	}
}

// TestConfigFallbacks covers the two places where seed 001 falls back instead of failing.
func TestConfigFallbacks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		file         string
		env          env
		wantTrimAt   int
		wantFraction float64
		wantWarning  string // "" means no warning
	}{
		{name: "fraction 1 in file", file: "[context_proxy]\ntrim_to_fraction = 1.0", wantFraction: 0.3, wantWarning: "[context_proxy] trim_to_fraction = 1"},
		{name: "fraction 0 in file", file: "[context_proxy]\ntrim_to_fraction = 0.0", wantFraction: 0.3, wantWarning: "trim_to_fraction = 0"},
		{name: "fraction out of range in env", file: "[context_proxy]\ntrim_to_fraction = 0.5", env: env{"CONTEXT_TRIM_TO_FRACTION": "1.5"}, wantFraction: 0.3, wantWarning: `CONTEXT_TRIM_TO_FRACTION="1.5"`},
		{name: "fraction not a number in env", env: env{"CONTEXT_TRIM_TO_FRACTION": "half"}, wantFraction: 0.3, wantWarning: `CONTEXT_TRIM_TO_FRACTION="half"`},
		{name: "fraction valid", env: env{"CONTEXT_TRIM_TO_FRACTION": "0.9"}, wantFraction: 0.9},
		{name: "trim at not an integer follows the model", file: "[context_proxy]\ntrim_at_tokens = 50000", env: env{"CONTEXT_TRIM_AT_TOKENS": "120k"}, wantTrimAt: 0, wantFraction: 0.3, wantWarning: `CONTEXT_TRIM_AT_TOKENS="120k" is not an integer`},
		{name: "trim at from file", file: "[context_proxy]\ntrim_at_tokens = 50000", wantTrimAt: 50000, wantFraction: 0.3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := load(t, tt.file+"\n", tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if got.Proxy.TrimAtTokens != tt.wantTrimAt || got.Proxy.TrimToFraction != tt.wantFraction {
				t.Errorf("TrimAtTokens, TrimToFraction = %d, %v; want %d, %v", got.Proxy.TrimAtTokens, got.Proxy.TrimToFraction, tt.wantTrimAt, tt.wantFraction)
			}
			switch {
			case tt.wantWarning == "" && len(got.Warnings) != 0:
				t.Errorf("Warnings = %q, want none", got.Warnings)
			case tt.wantWarning != "" && (len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], tt.wantWarning)):
				t.Errorf("Warnings = %q, want one containing %q", got.Warnings, tt.wantWarning)
			}
		})
	}
}

// TestConfigKeysMatchFile keeps AllKeys (used for type errors) in step with File: every
// leaf of the TOML struct has a key, and every key a leaf.
func TestConfigKeysMatchFile(t *testing.T) {
	t.Parallel()
	var leaves []string
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Anonymous { // fileTimeouts: its keys are the outer table's
				walk(prefix, f.Type)
				continue
			}
			name := prefix + f.Tag.Get("toml")
			ft := f.Type
			if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
				ft = ft.Elem() // an optional table ([memory])
			}
			if ft.Kind() == reflect.Struct {
				walk(name+".", ft)
				continue
			}
			if ft.Kind() == reflect.Map {
				continue // a table of the user's own keys ([memory.banks]), checked where it is resolved
			}
			leaves = append(leaves, name)
		}
	}
	walk("", reflect.TypeFor[File]())
	var keys []string
	for _, k := range AllKeys {
		keys = append(keys, k.Section+"."+k.Name)
		if _, ok := lookupKey(strings.Split(k.Section+"."+k.Name, ".")); !ok {
			t.Errorf("lookupKey does not find %s", k)
		}
	}
	slices.Sort(leaves)
	slices.Sort(keys)
	if !reflect.DeepEqual(leaves, keys) {
		t.Fatalf("fileConfig leaves and allKeys differ:\nleaves %v\nkeys   %v", leaves, keys)
	}
}

// TestConfigEveryErrorAtOnce checks that one load names every error of the file: unknown
// keys (with the key meant), values of the wrong type and values out of range together,
// each with its line.
func TestConfigEveryErrorAtOnce(t *testing.T) {
	t.Parallel()
	text := "[context_proxy]\n" +
		"port = \"4100\"\n" + // 2: wrong type
		"trim_at_token = 5\n" + // 3: unknown, near trim_at_tokens
		"chars_per_token = 0.0\n" + // 4: out of range
		"standing_instruction = 1\n" + // 5: wrong type
		"[compaction]\n" +
		"max_chars = -1\n" + // 7: out of range
		"[context_store]\n" +
		"ttl_dayz = 3\n" // 9: unknown
	path := configtest.WriteConfig(t, text)
	_, err := Load(path, true, env{}.Get)
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{
		path + ":2:", "[context_proxy] port must be an integer from 1 to 65535",
		path + ":3:", `unknown key "context_proxy.trim_at_token" (did you mean "context_proxy.trim_at_tokens"?)`,
		"[context_proxy] chars_per_token = 0", "greater than 0",
		path + ":5:", "[context_proxy] standing_instruction must be true or false",
		"[compaction] max_chars = -1",
		path + ":9:", `unknown key "context_store.ttl_dayz" (did you mean "context_store.ttl_days"?)`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 6 {
		t.Errorf("%d error lines, want 6 (one per error):\n%v", n, err)
	}
}

func TestBlankLine(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		n    int
		want string
		ok   bool
	}{
		{"a\nb\nc", 2, "a\n\nc", true},
		{"a\nb\nc", 3, "a\nb\n", true},
		{"a\nb\nc", 1, "\nb\nc", true},
		{"a\n\nc", 2, "", false},
		{"a\nb", 5, "", false},
	} {
		got, ok := blankLine([]byte(tt.in), tt.n)
		if ok != tt.ok || (ok && string(got) != tt.want) {
			t.Errorf("blankLine(%q, %d) = %q, %v; want %q, %v", tt.in, tt.n, got, ok, tt.want, tt.ok)
		}
	}
}
