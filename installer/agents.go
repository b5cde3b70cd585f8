package installer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/tailscale/hujson"
)

// Agents returns every agent the installer wires, in the order install handles them.
// openCodePlugin is the OpenCode plugin file (assets.OpenCodePlugin()): installer imports
// nothing of ours, so app passes the embedded bytes in.
func Agents(openCodePlugin []byte) []Agent {
	return []Agent{ClaudeCode{}, Codex{}, OpenCode{Plugin: openCodePlugin}}
}

// mcpServerName is the key our MCP server and Codex provider have in every agent's config.
const mcpServerName = "smarter-compact"

// newFileMode is the mode of a config file we create (the contract: the existing file's
// mode, else 0600).
const newFileMode os.FileMode = 0o600

// current is a file as Plan found it.
type current struct {
	path   string
	before []byte // nil: absent
	mode   os.FileMode
}

// readCurrent reads path; a missing file is not an error (before stays nil).
func readCurrent(path string) (current, error) {
	c := current{path: path, mode: newFileMode}
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if st.IsDir() {
		return c, fmt.Errorf("%s is a directory, not a config file", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	c.before, c.mode = b, st.Mode().Perm()
	return c, nil
}

// edit is the FileEdit of c once its new bytes and ops are known.
func (c current) edit(after []byte, ops []Op) FileEdit {
	return FileEdit{Path: c.path, Before: c.before, After: after, Mode: c.mode, Ops: ops}
}

// exists reports whether path exists (a file or a directory).
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// isDir reports whether path is a directory.
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// getenv reads env's environment; a nil Getenv means nothing is set.
func getenv(env Env, key string) string {
	if env.Getenv == nil {
		return ""
	}
	return env.Getenv(key)
}

// proxyURL is the proxy's base URL for one route prefix ("/claude-code", "/codex",
// "/opencode/anthropic/v1"), DESIGN.md §5.
func proxyURL(env Env, route string) string {
	return "http://127.0.0.1:" + strconv.Itoa(env.Port) + route
}

// routePrefixes are the path prefixes only this proxy serves (DESIGN.md §5).
var routePrefixes = []string{"/claude-code", "/codex", "/opencode"}

// isOurs reports whether raw is a base URL of this proxy: a loopback URL on env's port (any
// path: chaining to ourselves would loop), or a loopback URL under one of our route
// prefixes on another port (an earlier install with another port). Such a value is
// replaced, never chained.
func isOurs(env Env, raw string) bool {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return false
	}
	if !isLoopbackHost(u) {
		return false
	}
	if u.Port() == strconv.Itoa(env.Port) {
		return true
	}
	for _, p := range routePrefixes {
		if u.Path == p || strings.HasPrefix(u.Path, p+"/") {
			return true
		}
	}
	return false
}

// chain records raw as the upstream of family in plan when it is a URL that is not ours
// (DESIGN.md §5: we chain instead of replacing a gateway). trim is a path suffix to strip
// ("/v1" for OpenCode, whose baseURL ends where the proxy's route tail begins). It returns
// whether raw was recorded.
func chain(env Env, plan *AgentPlan, family, raw, trim string) bool {
	raw = strings.TrimSpace(raw)
	if raw == "" || isOurs(env, raw) {
		return false
	}
	up := strings.TrimRight(raw, "/")
	if trim != "" {
		up = strings.TrimSuffix(up, trim)
	}
	if plan.Upstreams == nil {
		plan.Upstreams = map[string]string{}
	}
	plan.Upstreams[family] = up
	return true
}

// jsonString is s as a JSON string, without HTML escaping.
func jsonString(s string) json.RawMessage {
	return marshal(s)
}

// marshal encodes v as compact JSON without HTML escaping (no "\u0026" for "&": peers.md
// item 32). Values here are strings, slices and ordered objects, which always encode.
func marshal(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("installer: encode %T: %v", v, err))
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n"))
}

// member is one key of an ordered JSON object.
type member struct {
	key   string
	value any
}

// object is a JSON object that keeps its keys in the order given (a Go map would sort
// them), so what we insert reads like a hand edit.
type object []member

// MarshalJSON encodes o with its keys in order.
func (o object) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(marshal(m.key))
		buf.WriteByte(':')
		buf.Write(marshal(m.value))
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// pointer joins keys into an RFC 6901 JSON pointer, escaping "~" and "/".
func pointer(keys ...string) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(k))
	}
	return b.String()
}

// setJSON sets the value at the pointer made of keys. A missing parent is made by the
// edit engine, whose Op then names the outermost key it made, so uninstall removes exactly
// the subtree we added. A value that is already there gives no Op: install is idempotent.
func setJSON(doc *JSONDoc, value json.RawMessage, keys ...string) ([]Op, error) {
	p := pointer(keys...)
	if got, ok := doc.Get(p); ok && sameValue(got, value) {
		return nil, nil
	}
	op, err := doc.Set(p, value)
	if err != nil {
		return nil, err
	}
	return []Op{op}, nil
}

// getString returns the string at the pointer made of keys, if there is one.
func getString(doc *JSONDoc, keys ...string) (string, bool) {
	raw, ok := doc.Get(pointer(keys...))
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// jsonKind names the kind of a JSON value for error messages, by its first byte, in
// kindName's words ("an object", "a number", ...); "empty" for no value. Any byte that
// starts no other kind counts as a number.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "empty"
	}
	k := hujson.Kind(t[0])
	switch k {
	case '{', '[', '"', 't', 'f', 'n':
	default:
		k = '0'
	}
	return kindName(k)
}

// parseJSONFile parses c's bytes (an absent file reads as {}), naming the file in the
// error.
func parseJSONFile(c current) (*JSONDoc, error) {
	doc, err := ParseJSONDoc(c.before)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.path, err)
	}
	return doc, nil
}

// windowsPath reports whether p is a Windows path (a drive letter or a UNC path), whatever
// the OS the installer runs on, so tests cover both.
func windowsPath(p string) bool {
	if len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') {
		c := p[0] | 0x20
		return c >= 'a' && c <= 'z'
	}
	return strings.HasPrefix(p, `\\`)
}

// shellQuote quotes exe for a command line that a POSIX shell runs: Claude Code runs hook
// commands through bash, Git Bash on Windows, where an unquoted backslash path collapses
// ("C:Usersx.exe") and a space splits it. A Windows path gets forward slashes, which Git
// Bash and cmd both accept; the result is double-quoted with \ " $ ` escaped.
func shellQuote(exe string) string {
	if windowsPath(exe) {
		exe = strings.ReplaceAll(exe, `\`, "/")
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range exe {
		switch r {
		case '\\', '"', '$', '`':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// notInstalled is ErrNotInstalled with what was looked for.
func notInstalled(agent string, looked ...string) error {
	return fmt.Errorf("%s: %w (looked for %s)", agent, ErrNotInstalled, strings.Join(looked, ", "))
}

// isLoopbackHost reports whether u names this machine: 127.0.0.1, localhost, ::1
// (any case) or another loopback IP address.
func isLoopbackHost(u *url.URL) bool {
	switch strings.ToLower(u.Hostname()) {
	case "127.0.0.1", "localhost", "::1":
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// isOurRoute reports whether raw is a loopback URL whose path is route or under it (any
// port: an earlier install may have used another). Tier 3 of uninstall removes only such
// values, which nothing but this proxy serves.
func isOurRoute(raw, route string) bool {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if !isLoopbackHost(u) {
		return false
	}
	p := strings.TrimRight(u.Path, "/")
	return p == route || strings.HasPrefix(p, route+"/")
}

// unwireJSON removes the value at the pointer made of keys, together with each parent it
// leaves empty (not the document itself), and prepends to ops the removal of the outermost
// value removed: Old nil, New that value as it was. An absent value is no op.
func unwireJSON(doc *JSONDoc, ops *[]Op, keys ...string) error {
	if _, ok := doc.Get(pointer(keys...)); !ok {
		return nil
	}
	top := len(keys)
	for top > 1 {
		raw, _ := doc.Get(pointer(keys[:top-1]...))
		if !singleChild(raw) {
			break
		}
		top--
	}
	p := pointer(keys[:top]...)
	val, _ := doc.Get(p)
	if _, err := doc.Remove(p); err != nil {
		return err
	}
	*ops = append([]Op{{Format: "json", Path: p, New: val}}, *ops...)
	return nil
}

// singleChild reports whether raw is an object with one member or an array with one
// element.
func singleChild(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil {
		return len(m) == 1
	}
	var a []json.RawMessage
	return json.Unmarshal(raw, &a) == nil && len(a) == 1
}

// unwireFile is the removal of a file only we write, when it holds marker.
func unwireFile(path, marker string) (FileEdit, bool, error) {
	cur, err := readCurrent(path)
	if err != nil || cur.before == nil || !bytes.Contains(cur.before, []byte(marker)) {
		return FileEdit{}, false, err
	}
	op := Op{Format: "file", New: jsonString(string(cur.before))}
	return FileEdit{Path: path, Before: cur.before, Mode: cur.mode, Ops: []Op{op}}, true, nil
}
