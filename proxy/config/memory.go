package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/smarter-compact/smarter-compact/proxy"
	"github.com/smarter-compact/smarter-compact/proxy/memory"
)

// MemoryConfig is config.toml's [memory] table (issue 17): the memory provider the proxy
// asks for recall on trim, and the bank a session is registered under (contract: Location,
// the registration's bank). Without the table Provider is "" and there is no recall.
type MemoryConfig struct {
	// Provider is "hindsight", the one provider so far; "" means no [memory] table.
	Provider string
	// URL is the provider's base URL (Hindsight: http://127.0.0.1:8888).
	URL string
	// APIKey is sent as a Bearer token when not ""; SMARTER_COMPACT_MEMORY_API_KEY wins over
	// the file. It is never logged: String leaves it out.
	APIKey string
	// Bank is the bank template of sessions no [memory.banks] prefix maps; {repo} is the
	// session's git root directory name. Default "coding-agent::{repo}" (the seed's).
	Bank string
	// Banks maps path prefixes (absolute, cleaned) to bank templates; the longest prefix of
	// a session's working directory wins over Bank.
	Banks map[string]string
}

// defaultBank is the seed's bank template (seed 001, banks: coding-agent::<repo-directory-name>).
const defaultBank = "coding-agent::{repo}"

// Configured reports whether a [memory] table names a provider.
func (m MemoryConfig) Configured() bool { return m.Provider != "" }

// String describes the table for logs and status, without the API key.
func (m MemoryConfig) String() string {
	if !m.Configured() {
		return "off (no [memory] table)"
	}
	key := "no api key"
	if m.APIKey != "" {
		key = "api key set"
	}
	return fmt.Sprintf("%s at %s, bank %q, %d mapped prefixes, %s", m.Provider, m.URL, m.Bank, len(m.Banks), key)
}

// BankFor returns the bank of a session working in cwd: the template of the longest
// [memory.banks] prefix holding cwd, else Bank, with {repo} replaced by the name of cwd's git
// root (the nearest ancestor holding .git, else cwd itself). It returns "" when memory is
// not configured, or when the template needs {repo} and cwd is "".
func (m MemoryConfig) BankFor(cwd string) string {
	if !m.Configured() {
		return ""
	}
	tmpl := m.Bank
	if cwd != "" {
		cwd = filepath.Clean(cwd)
		best := -1
		for prefix, bank := range m.Banks {
			if pathHas(prefix, cwd) && len(prefix) > best {
				best, tmpl = len(prefix), bank
			}
		}
	}
	if !strings.Contains(tmpl, "{repo}") {
		return tmpl
	}
	if cwd == "" {
		return ""
	}
	return strings.ReplaceAll(tmpl, "{repo}", filepath.Base(gitRootOf(cwd)))
}

// pathHas reports whether dir is prefix or lies under it.
func pathHas(prefix, dir string) bool {
	if dir == prefix {
		return true
	}
	return strings.HasPrefix(dir, strings.TrimRight(prefix, string(filepath.Separator))+string(filepath.Separator))
}

// gitRootOf is the nearest ancestor of dir (itself included) holding .git, else dir.
func gitRootOf(dir string) string {
	for d := dir; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// RecallSettings sets the proxy's recall knobs from c (contract: Proxy-inserted text): the
// provider's client when [memory] names one and [compaction] recall is on, the cap, and the
// bank of sessions the proxy registers itself.
func (c Config) RecallSettings(ps *proxy.Settings) {
	ps.RecallMaxChars = c.CompactionMaxChars
	ps.Recall, ps.BankFor = nil, nil
	if c.Memory.Configured() {
		ps.BankFor = c.Memory.BankFor
	}
	if c.Memory.Configured() && c.CompactionRecall {
		ps.Recall = memory.NewHindsight(c.Memory.URL, c.Memory.APIKey)
	}
}

// RecallChanged reports whether the settings recallSettings reads differ between a and b.
func RecallChanged(a, b Config) bool {
	return a.CompactionMaxChars != b.CompactionMaxChars || a.CompactionRecall != b.CompactionRecall ||
		!reflect.DeepEqual(a.Memory, b.Memory)
}

// fileMemory mirrors [memory]; nil when the file has no such table.
type fileMemory struct {
	Provider *string           `toml:"provider"`
	URL      *string           `toml:"url"`
	APIKey   *string           `toml:"api_key"`
	Bank     *string           `toml:"bank"`
	Banks    map[string]string `toml:"banks"`
}

// The [memory] keys (issue 17). [memory.banks] holds one key per path prefix.
var (
	keyMemoryProvider = Key{"memory", "provider", "", `"hindsight"`, nil}
	keyMemoryURL      = Key{"memory", "url", "", "an absolute http or https URL (the provider's base URL, e.g. http://127.0.0.1:8888)", nil}
	keyMemoryAPIKey   = Key{"memory", "api_key", "SMARTER_COMPACT_MEMORY_API_KEY", "a string (the provider's API key; empty sends none)", nil}
	keyMemoryBank     = Key{"memory", "bank", "", `a bank name, where {repo} stands for the session's git root directory name (default "coding-agent::{repo}")`, nil}

	memoryKeys = []Key{keyMemoryProvider, keyMemoryURL, keyMemoryAPIKey, keyMemoryBank}
)

// memoryProviders are the accepted values of [memory] provider.
var memoryProviders = []string{"hindsight"}

// memory resolves [memory]; the zero MemoryConfig when the table is absent. The API key's
// value never goes into an error.
func (r *resolver) memory(f *fileMemory) MemoryConfig {
	if f == nil {
		if v, ok := r.env(keyMemoryAPIKey); ok && v != "" {
			r.warnings = append(r.warnings, keyMemoryAPIKey.Env+" is set but config.toml has no [memory] table: no recall")
		}
		return MemoryConfig{}
	}
	m := MemoryConfig{
		Provider: r.stringKey(keyMemoryProvider, f.Provider, "hindsight"),
		URL:      r.urlKey(keyMemoryURL, f.URL, ""),
		APIKey:   r.stringKey(keyMemoryAPIKey, f.APIKey, ""),
		Bank:     strings.TrimSpace(r.stringKey(keyMemoryBank, f.Bank, defaultBank)),
	}
	if !slices.Contains(memoryProviders, m.Provider) {
		r.fileErr(keyMemoryProvider, strconv.Quote(m.Provider))
	}
	if m.URL == "" && f.URL == nil {
		detail := fmt.Sprintf("%s is missing: the [memory] table needs the provider's base URL, e.g. url = \"http://127.0.0.1:8888\"", keyMemoryURL)
		r.errs = append(r.errs, &KeyError{keyMemoryURL, detail, fmt.Errorf("config %s: %s", r.path, detail)})
	}
	if m.Bank == "" {
		r.fileErr(keyMemoryBank, `""`)
	}
	for prefix, bank := range f.Banks {
		k := Key{"memory.banks", prefix, "", "an absolute path prefix mapped to a non-empty bank name", nil}
		if !filepath.IsAbs(prefix) || strings.TrimSpace(bank) == "" {
			r.fileErr(k, strconv.Quote(bank))
			continue
		}
		if m.Banks == nil {
			m.Banks = map[string]string{}
		}
		m.Banks[filepath.Clean(prefix)] = strings.TrimSpace(bank)
	}
	return m
}
