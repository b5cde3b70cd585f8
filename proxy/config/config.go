package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/smarter-compact/smarter-compact/proxy"
	"github.com/smarter-compact/smarter-compact/store/savings"
)

// Agent names as they appear in [context_proxy.agents], route prefixes and events
// (DESIGN.md §5). AgentUnknown is a request on an unprefixed route whose agent the proxy
// could not infer; it has no config key and follows the master switch.
const (
	AgentClaudeCode = "claude-code"
	AgentCodex      = "codex"
	AgentOpenCode   = "opencode"
	AgentUnknown    = "unknown"
)

// ConfiguredAgents are the agents with a [context_proxy.agents] key, in display order.
var ConfiguredAgents = []string{AgentClaudeCode, AgentCodex, AgentOpenCode}

// Config is the resolved configuration of the service: config.toml overlaid by the
// environment, validated, defaults filled in (DESIGN.md §7; seed 001, "Configuration").
type Config struct {
	// Path is the config.toml that was read; "" when none exists at the default location.
	Path string
	// Port is the loopback port of the one listener ([context_proxy] port).
	Port int
	// Agents says whether trimming is on per agent, for claude-code, codex, opencode and
	// unknown: the effective rule of Switches.Rule (pause, CONTEXT_PROXY_ENABLED,
	// the agent's key, the master switch).
	Agents map[string]bool
	// Proxy holds the proxy's knobs: thresholds, standing instruction, upstream base URLs.
	Proxy proxy.Settings
	// CompactionMaxChars caps the recall block, frame included ([compaction] max_chars).
	CompactionMaxChars int
	// CompactionRecall puts recall in the trim pointer ([compaction] recall).
	CompactionRecall bool
	// TTLDays deletes sessions idle longer than this many days; 0 keeps everything.
	TTLDays int
	// EmbeddingModel turns on vectors for hybrid search when not empty.
	EmbeddingModel string
	// EmbeddingURL is the OpenAI-compatible embeddings base URL.
	EmbeddingURL string
	// EmbeddingTimeout bounds one background embeddings call per row.
	EmbeddingTimeout time.Duration
	// EmbeddingMaxChars is how many characters of each row's head are embedded.
	EmbeddingMaxChars int
	// Prices are the list prices the savings figures use ([prices], prices.go).
	Prices savings.Prices
	// Memory is the [memory] table: the recall provider and the banks (memory.go).
	Memory MemoryConfig
	// BodyReadTimeout bounds the arrival of a request body ([context_proxy]
	// body_read_timeout_s, timeouts.go).
	BodyReadTimeout time.Duration
	// Warnings are values that fell back to a default as the seed prescribes
	// (trim_to_fraction out of range, CONTEXT_TRIM_AT_TOKENS not an integer); serve logs
	// each once.
	Warnings []string
}

// File mirrors config.toml. Pointers tell an absent key from a zero value.
type File struct {
	ContextProxy FileContextProxy `toml:"context_proxy"`
	Compaction   struct {
		MaxChars *int64 `toml:"max_chars"`
		Recall   *bool  `toml:"recall"`
	} `toml:"compaction"`
	ContextStore struct {
		TTLDays           *int64  `toml:"ttl_days"`
		EmbeddingModel    *string `toml:"embedding_model"`
		EmbeddingURL      *string `toml:"embedding_url"`
		EmbeddingTimeoutS *int64  `toml:"embedding_timeout_s"`
		EmbeddingMaxChars *int64  `toml:"embedding_max_chars"`
	} `toml:"context_store"`
	Upstream struct {
		Anthropic *string `toml:"anthropic"`
		OpenAI    *string `toml:"openai"`
		Codex     *string `toml:"codex"`
		// Agents are the per-agent tables [upstream.agents.<agent>].
		Agents struct {
			ClaudeCode FileUpstreams `toml:"claude-code"`
			Codex      FileUpstreams `toml:"codex"`
			OpenCode   FileUpstreams `toml:"opencode"`
		} `toml:"agents"`
	} `toml:"upstream"`
	Prices map[string]filePrice `toml:"prices"` // prices.go
	Memory *fileMemory          `toml:"memory"` // memory.go
}

// Families returns [upstream]'s keys by API family.
func (f *File) Families() map[string]*string {
	u := &f.Upstream
	return FileUpstreams{u.Anthropic, u.OpenAI, u.Codex}.ByFamily()
}

// AgentUpstreams returns [upstream.agents.<agent>] by agent ("" for an agent without one).
func (f *File) AgentUpstreams(agent string) FileUpstreams {
	a := &f.Upstream.Agents
	return map[string]FileUpstreams{AgentClaudeCode: a.ClaudeCode, AgentCodex: a.Codex, AgentOpenCode: a.OpenCode}[agent]
}

// FileUpstreams are the base URL keys of [upstream] and of [upstream.agents.<agent>].
type FileUpstreams struct {
	Anthropic *string `toml:"anthropic"`
	OpenAI    *string `toml:"openai"`
	Codex     *string `toml:"codex"`
}

// ByFamily returns the keys by API family.
func (u FileUpstreams) ByFamily() map[string]*string {
	return map[string]*string{"anthropic": u.Anthropic, "openai": u.OpenAI, "codex": u.Codex}
}

type FileContextProxy struct {
	Enabled             *bool    `toml:"enabled"`
	Port                *int64   `toml:"port"`
	TrimAtTokens        *int64   `toml:"trim_at_tokens"`
	TrimToFraction      *float64 `toml:"trim_to_fraction"`
	CharsPerToken       *float64 `toml:"chars_per_token"`
	CompressOverTokens  *int64   `toml:"compress_over_tokens"`
	StandingInstruction *bool    `toml:"standing_instruction"`
	Paused              *bool    `toml:"paused"`
	Agents              struct {
		ClaudeCode *bool `toml:"claude-code"`
		Codex      *bool `toml:"codex"`
		OpenCode   *bool `toml:"opencode"`
	} `toml:"agents"`
	fileTimeouts // body_read_timeout_s, upstream_idle_timeout_s (timeouts.go)
}

// Path returns the config.toml to read: flagPath (--config), else
// SMARTER_COMPACT_CONFIG, else <configDir>/smarter-compact/config.toml, where configDir is
// os.UserConfigDir (~/.config, ~/Library/Application Support, %APPDATA%). explicit reports
// that the user named the file, so it must exist.
func Path(flagPath string, getenv func(string) string, configDir string) (path string, explicit bool, err error) {
	if flagPath != "" {
		return flagPath, true, nil
	}
	if p := getenv("SMARTER_COMPACT_CONFIG"); p != "" {
		return p, true, nil
	}
	if configDir == "" {
		return "", false, errors.New("cannot find the user config directory: pass --config PATH or set SMARTER_COMPACT_CONFIG")
	}
	return filepath.Join(configDir, "smarter-compact", "config.toml"), false, nil
}

// Load reads the config.toml at path (missing is fine unless explicit), overlays the
// environment read through getenv, and validates every value. Unknown keys, values of the
// wrong type and values out of range are errors naming the key (or the variable) and what
// it accepts, all of them at once; trim_to_fraction out of range and a CONTEXT_TRIM_AT_TOKENS
// that is not an integer fall back as seed 001 says and add a warning instead.
func Load(path string, explicit bool, getenv func(string) string) (Config, error) {
	rc, err := loadConfig(path, explicit, getenv)
	return rc.Config, err
}

// Resolved is a config as Load resolves it, with what the runtime state needs besides.
type Resolved struct {
	Config Config
	// File is config.toml as decoded; its nil pointers are the keys the file leaves out.
	File File
	// WarnKeys are the keys of the file's values that fell back to a default with a warning.
	WarnKeys []Key
}

// loadConfig is LoadConfig with the decoded file.
func loadConfig(path string, explicit bool, getenv func(string) string) (Resolved, error) {
	rc, _, err := LoadText(path, explicit, getenv)
	return rc, err
}

// LoadText is loadConfig that also returns the bytes it resolved (nil: no file), so a
// caller can remember what it loaded without reading the file again.
func LoadText(path string, explicit bool, getenv func(string) string) (Resolved, []byte, error) {
	b, err := ReadFile(path)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		path, b = "", nil
	default:
		return Resolved{}, nil, fmt.Errorf("read config: %w", err)
	}
	rc, err := ResolveText(path, b, getenv)
	return rc, b, err
}

// ResolveText decodes b as the text of the config.toml at path ("" and nil: no file)
// and resolves it with the environment exactly as LoadConfig does, with the same messages.
// Every error that concerns one key wraps a *keyError, so a caller can tell which key it is
// about (the dashboard's settings form); errors of several keys come joined. With an error,
// only warnKeys is set in the result.
func ResolveText(path string, b []byte, getenv func(string) string) (Resolved, error) {
	var f File
	var decodeErr error
	if b == nil {
		path = ""
	} else {
		complete, err := decodeFileAll(path, b, &f)
		if err != nil && !complete {
			return Resolved{}, err
		}
		decodeErr = err // unknown keys and wrong types: the values are checked too
	}
	r := &resolver{path: path, getenv: getenv}
	c := r.resolve(&f)
	if decodeErr != nil || len(r.errs) > 0 {
		return Resolved{WarnKeys: r.warnKeys}, errors.Join(append([]error{decodeErr}, r.errs...)...)
	}
	return Resolved{Config: c, File: f, WarnKeys: r.warnKeys}, nil
}

// KeyError is an error about one config key; Error is the message LoadConfig gives,
// detail the same without the file's name and position.
type KeyError struct {
	Key    Key
	Detail string // e.g. "[context_proxy] port = 0: must be an integer from 1 to 65535"
	err    error
}

func (e *KeyError) Error() string { return e.err.Error() }
func (e *KeyError) Unwrap() error { return e.err }

// KeyErrors returns the *keyError in err, which may be a join of errors, and whether every
// error in it is one.
func KeyErrors(err error) (out []*KeyError, all bool) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	all = true
	for _, e := range errs {
		var ke *KeyError
		if errors.As(e, &ke) {
			out = append(out, ke)
		} else {
			all = false
		}
	}
	return out, all
}

// DecodeFile decodes strictly; each error names the file, the line and the key. It reports
// every error of the file at once (issue 15, Deliver 6): every unknown key, and every value
// of the wrong type (go-toml stops at the first, so that line is blanked and the text decoded
// again). A syntax error ends the list. Whether f then holds every other key is complete.
func DecodeFile(path string, b []byte, f *File) error {
	_, err := decodeFileAll(path, b, f)
	return err
}

// maxConfigErrors bounds the decodes of decodeFileAll, one per value of the wrong type.
const maxConfigErrors = 50

// decodeFileAll is decodeFile that also reports whether f holds every key the file sets
// whose value has the right type (complete: the errors are all unknown keys and types, so
// the values may be checked as well).
func decodeFileAll(path string, b []byte, f *File) (complete bool, err error) {
	var errs []error
	text := b
	blanked := false
	for range maxConfigErrors {
		*f = File{}
		err := toml.NewDecoder(bytes.NewReader(text)).DisallowUnknownFields().Decode(f)
		if err == nil {
			return true, errors.Join(errs...)
		}
		var strict *toml.StrictMissingError
		if errors.As(err, &strict) {
			for i := range strict.Errors {
				errs = append(errs, unknownKeyError(path, &strict.Errors[i]))
			}
			return true, errors.Join(errs...)
		}
		var de *toml.DecodeError
		if !errors.As(err, &de) {
			return false, errors.Join(append(errs, fmt.Errorf("config %s: %w", path, err))...)
		}
		line, col := de.Position()
		k, isKey := lookupKey(de.Key())
		switch {
		case isKey:
			detail := fmt.Sprintf("%s must be %s", k, k.Accepts)
			errs = append(errs, &KeyError{k, detail, fmt.Errorf("config %s:%d:%d: %s", path, line, col, detail)})
		case blanked:
			// A line blanked to go on may have cut a value in two; what follows is not
			// the user's error.
			return false, errors.Join(errs...)
		default:
			if section := strings.Join(de.Key(), "."); isSection(section) {
				errs = append(errs, fmt.Errorf("config %s:%d:%d: %s must be a table: write [%s] on a line of its own, its keys below", path, line, col, section, section))
			} else {
				errs = append(errs, fmt.Errorf("config %s:%d:%d: %s", path, line, col, strings.TrimPrefix(de.Error(), "toml: ")))
			}
			return false, errors.Join(errs...)
		}
		next, ok := blankLine(text, line)
		if !ok {
			return false, errors.Join(errs...)
		}
		text, blanked = next, true
	}
	return false, errors.Join(errs...)
}

// unknownKeyError is the error of one key config.toml does not know, with the key it most
// likely meant.
func unknownKeyError(path string, e *toml.DecodeError) error {
	line, _ := e.Position()
	k := e.Key()
	if len(k) >= 3 && k[0] == "upstream" && k[1] == "agents" && !slices.Contains(ConfiguredAgents, k[2]) {
		return fmt.Errorf("config %s:%d: unknown agent %q in [upstream.agents.%s]%s: use %s", path, line, k[2], k[2], DidYouMean(k[2], ConfiguredAgents), strings.Join(ConfiguredAgents, ", "))
	}
	name := strings.Join(k, ".")
	var known []string
	for _, ak := range AllKeys {
		known = append(known, ak.Section+"."+ak.Name)
	}
	return fmt.Errorf("config %s:%d: unknown key %q%s (the keys are listed in docs/configuration.md)", path, line, name, DidYouMean(name, known))
}

// blankLine returns b with its 1-based line n emptied (its newline kept, so the other lines
// keep their numbers), and false when b has no such line or it is empty already.
func blankLine(b []byte, n int) ([]byte, bool) {
	start := 0
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(b[start:], '\n')
		if j < 0 {
			return nil, false
		}
		start += j + 1
	}
	end := len(b)
	if j := bytes.IndexByte(b[start:], '\n'); j >= 0 {
		end = start + j
	}
	if end == start {
		return nil, false
	}
	out := make([]byte, 0, len(b)-(end-start))
	out = append(out, b[:start]...)
	return append(out, b[end:]...), true
}

func isSection(name string) bool {
	for _, k := range AllKeys {
		if k.Section == name || strings.HasPrefix(k.Section, name+".") {
			return true
		}
	}
	return false
}

func lookupKey(path []string) (Key, bool) {
	if len(path) < 2 {
		return Key{}, false
	}
	section, name := strings.Join(path[:len(path)-1], "."), path[len(path)-1]
	for _, k := range AllKeys {
		if k.Section == section && k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// resolver applies "environment over file over default" per key and collects every error.
type resolver struct {
	path     string
	getenv   func(string) string
	errs     []error
	warnings []string
	// warnKeys are the keys of the warnings that came from the file, not the environment.
	warnKeys []Key
}

func (r *resolver) resolve(f *File) Config {
	s := proxy.DefaultSettings()
	cp := &f.ContextProxy
	c := Config{
		Path:               r.path,
		Port:               r.intKey(KeyPort, cp.Port, 4100),
		CompactionMaxChars: r.intKey(KeyMaxChars, f.Compaction.MaxChars, 12000),
		CompactionRecall:   r.boolKey(KeyRecall, f.Compaction.Recall, true),
		TTLDays:            r.intKey(KeyTTLDays, f.ContextStore.TTLDays, 30),
		EmbeddingModel:     r.stringKey(KeyEmbeddingModel, f.ContextStore.EmbeddingModel, ""),
		EmbeddingURL:       r.urlKey(KeyEmbeddingURL, f.ContextStore.EmbeddingURL, "http://127.0.0.1:11434/v1"),
		EmbeddingTimeout:   time.Duration(r.intKey(KeyEmbeddingTimeoutS, f.ContextStore.EmbeddingTimeoutS, 30)) * time.Second,
		EmbeddingMaxChars:  r.intKey(KeyEmbeddingMaxChars, f.ContextStore.EmbeddingMaxChars, 4000),
	}

	s.TrimAtTokens = r.trimAtTokens(cp.TrimAtTokens)
	s.TrimToFraction = r.trimToFraction(cp.TrimToFraction, s.TrimToFraction)
	s.CharsPerToken = r.floatKey(KeyCharsPerToken, cp.CharsPerToken, s.CharsPerToken)
	s.CompressOverTokens = r.intKey(KeyCompressOverTokens, cp.CompressOverTokens, s.CompressOverTokens)
	s.StandingInstruction = r.boolKey(KeyStandingInstruction, cp.StandingInstruction, s.StandingInstruction)
	up := s.Upstreams // DefaultSettings returns a fresh map
	up["anthropic"] = r.urlKey(KeyUpstreamAnthropic, f.Upstream.Anthropic, up["anthropic"])
	up["openai"] = r.urlKey(KeyUpstreamOpenAI, f.Upstream.OpenAI, up["openai"])
	up["codex"] = r.urlKey(KeyUpstreamCodex, f.Upstream.Codex, up["codex"])
	s.AgentUpstreams = r.agentUpstreams(f)
	c.Proxy = s
	r.timeouts(&cp.fileTimeouts, &c)

	c.Agents = r.agents(cp)
	c.Prices = r.prices(f.Prices)
	c.Memory = r.memory(f.Memory)
	c.Warnings = r.warnings
	return c
}

// agents resolves whether each agent trims, by Switches.Rule.
func (r *resolver) agents(cp *FileContextProxy) map[string]bool {
	if v, ok := r.env(KeyEnabled); ok {
		if _, err := ParseBool(v); err != nil {
			r.envErr(KeyEnabled, v)
		}
	}
	return SwitchesOf(cp, r.getenv).Effective()
}

// agentUpstreams resolves the [upstream.agents.<agent>] tables: agent to family to base
// URL, only the keys that are set; nil when there are none.
func (r *resolver) agentUpstreams(f *File) map[string]map[string]string {
	var out map[string]map[string]string
	for _, agent := range ConfiguredAgents {
		keys := f.AgentUpstreams(agent).ByFamily()
		for _, fam := range UpstreamFamilies {
			p := keys[fam]
			if p == nil {
				continue
			}
			if u := r.urlKey(agentUpstreamKey(agent, fam), p, ""); u != "" {
				if out == nil {
					out = map[string]map[string]string{}
				}
				if out[agent] == nil {
					out[agent] = map[string]string{}
				}
				out[agent][fam] = u
			}
		}
	}
	return out
}

// env returns the key's environment override (envOverride).
func (r *resolver) env(k Key) (string, bool) { return EnvOverride(k, r.getenv) }

func (r *resolver) envErr(k Key, v string) {
	detail := fmt.Sprintf("%s=%q: must be %s", k.Env, v, k.Accepts)
	r.errs = append(r.errs, &KeyError{k, detail, errors.New(detail)})
}

func (r *resolver) fileErr(k Key, v any) {
	detail := fmt.Sprintf("%s = %v: must be %s", k, v, k.Accepts)
	r.errs = append(r.errs, &KeyError{k, detail, fmt.Errorf("config %s: %s", r.path, detail)})
}

// keyValue resolves k: its environment variable wins when set (parse turns the text into a
// value, false when it is none), else the file's value, else def. A value that does not
// parse or fails inRange is an error of the key, and def is used.
func keyValue[T any](r *resolver, k Key, file *T, def T, parse func(string) (T, bool), inRange func(T) bool) T {
	if v, ok := r.env(k); ok {
		x, ok := parse(v)
		if !ok || !inRange(x) {
			r.envErr(k, v)
			return def
		}
		return x
	}
	if file != nil {
		if !inRange(*file) {
			r.fileErr(k, *file)
			return def
		}
		return *file
	}
	return def
}

func (r *resolver) intKey(k Key, file *int64, def int) int {
	parse := func(v string) (int64, bool) { n, err := strconv.ParseInt(v, 10, 64); return n, err == nil }
	return int(keyValue(r, k, file, int64(def), parse, func(n int64) bool { return k.ok(float64(n)) }))
}

func (r *resolver) floatKey(k Key, file *float64, def float64) float64 {
	parse := func(v string) (float64, bool) { f, err := strconv.ParseFloat(v, 64); return f, err == nil }
	return keyValue(r, k, file, def, parse, func(f float64) bool { return finite(f) && k.ok(f) })
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func (r *resolver) boolKey(k Key, file *bool, def bool) bool {
	parse := func(v string) (bool, bool) { b, err := ParseBool(v); return b, err == nil }
	return keyValue(r, k, file, def, parse, func(bool) bool { return true })
}

func (r *resolver) stringKey(k Key, file *string, def string) string {
	return keyValue(r, k, file, def, func(v string) (string, bool) { return v, true }, func(string) bool { return true })
}

// urlKey accepts an absolute http(s) base URL and drops trailing slashes, so that the proxy
// can append an API path to it.
func (r *resolver) urlKey(k Key, file *string, def string) string {
	v, fromEnv := r.env(k)
	if !fromEnv {
		if file == nil {
			return def
		}
		v = *file
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		if fromEnv {
			r.envErr(k, v)
		} else {
			r.fileErr(k, strconv.Quote(v))
		}
		return def
	}
	return strings.TrimRight(v, "/")
}

// trimAtTokens returns 0 ("follow the model") when unset. Seed 001: CONTEXT_TRIM_AT_TOKENS
// "unset or not an integer" follows the model; an integer below 1 is an error.
func (r *resolver) trimAtTokens(file *int64) int {
	k := KeyTrimAtTokens
	if v, ok := r.env(k); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			r.warnings = append(r.warnings, fmt.Sprintf("%s=%q is not an integer: the trim threshold follows the model (95000 for Haiku, 120000 otherwise)", k.Env, v))
			return 0
		}
		if !k.ok(float64(n)) {
			r.envErr(k, v)
			return 0
		}
		return int(n)
	}
	return r.intKey(k, file, 0)
}

// trimToFraction falls back to def on any value outside (0, 1), from the file or the
// environment (seed 001: "another value falls back to 0.3").
func (r *resolver) trimToFraction(file *float64, def float64) float64 {
	k := KeyTrimToFraction
	if v, ok := r.env(k); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !k.ok(f) {
			r.warnings = append(r.warnings, fmt.Sprintf("%s=%q is not %s: using %v", k.Env, v, k.Accepts, def))
			return def
		}
		return f
	}
	if file != nil {
		if !k.ok(*file) {
			r.warnings = append(r.warnings, fmt.Sprintf("config %s: %s = %v is not %s: using %v", r.path, k, *file, k.Accepts, def))
			r.warnKeys = append(r.warnKeys, k)
			return def
		}
		return *file
	}
	return def
}

// ParseBool accepts 0, 1, true and false (any case), the values seed 001 documents.
func ParseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true":
		return true, nil
	case "0", "false":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean: %q", v)
}
