package installer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// UpstreamConfig is what ChainUpstreams and UnchainUpstreams need of smarter-compact's own
// config.toml. Its schema belongs to the caller (app), which parses it.
type UpstreamConfig struct {
	// Path is config.toml.
	Path string
	// Port is the proxy's loopback port: a previous base URL there would loop.
	Port int
	// Families are the API families [upstream] has a key for ("anthropic", "openai",
	// "codex"); Agents the agents that have an [upstream.agents.<agent>] table.
	Families, Agents []string
	// Parse reads config.toml's text (nil: there is no file). Its error is the caller's own
	// wording of a file that does not load.
	Parse func(text []byte) (Upstreams, error)
}

// Upstreams is what config.toml says of the upstreams.
type Upstreams struct {
	// Family is the base URL in effect per API family ([upstream] <family>, else the
	// default), without a final "/".
	Family map[string]string
	// Agents are per agent the keys of [upstream.agents.<agent>] by family, as written.
	Agents map[string]map[string]string
}

// UpstreamRecordPath is the record of what ChainUpstreams wrote:
// <StateDir>/upstreams.json, an object from config.toml path to upstreamRecord (0600).
func UpstreamRecordPath(env Env) string { return filepath.Join(env.StateDir, "upstreams.json") }

// agentKey names [upstream.agents.<agent>] <family> in the report lines.
func agentKey(agent, fam string) string { return "[upstream.agents." + agent + "] " + fam }

// ChainUpstreams writes the base URLs the agents of rep pointed at before install into
// config.toml's per-agent tables [upstream.agents.<agent>] (DESIGN.md §5: we chain instead
// of replacing), so that one agent's gateway never takes another agent's traffic of the
// same API family. A key already set to another URL is kept and the conflict reported; a
// URL equal to the family's upstream needs no key; a URL that points back at the proxy
// itself is dropped (it would loop). What it wrote goes to the record at recordPath (""
// records nothing), for UnchainUpstreams.
//
// It returns the report lines in order, for the caller to print, and an error that says
// what to add by hand when config.toml could not be written (the agents are wired anyway).
// With dryRun it writes nothing.
func ChainUpstreams(c UpstreamConfig, rep Report, dryRun bool, recordPath string) ([]string, error) {
	text, _, err := readFile(c.Path)
	cur, perr := c.Parse(text)
	if err != nil || perr != nil {
		cur, _ = c.Parse(nil) // the defaults
	}
	var out, chained []string
	keys := map[string]map[string]string{} // by agent, family: the URL to write
	for _, a := range rep.Agents {
		if a.Err != nil || a.Skipped != "" {
			continue
		}
		for _, fam := range slices.Sorted(maps.Keys(a.Upstreams)) {
			u := strings.TrimRight(a.Upstreams[fam], "/")
			if why := c.notChained(a.Agent, fam, u); why != "" {
				out = append(out, why)
				continue
			}
			if p, ok := cur.Agents[a.Agent][fam]; ok {
				if old := strings.TrimRight(p, "/"); old != u {
					out = append(out, fmt.Sprintf("%s: pointed at %s before; %s keeps %q from %s (edit it there to chain to %s)", a.Agent, u, agentKey(a.Agent, fam), old, c.Path, u))
				}
				continue
			}
			if cur.Family[fam] == u {
				continue // the family's upstream already
			}
			if keys[a.Agent] == nil {
				keys[a.Agent] = map[string]string{}
			}
			keys[a.Agent][fam] = u
			chained = append(chained, fmt.Sprintf("%s: chained to its previous base URL: %s = %s", a.Agent, agentKey(a.Agent, fam), TOMLString(u)))
		}
	}
	if len(keys) == 0 {
		return out, nil
	}
	out = append(out, chained...)
	if dryRun {
		return append(out, fmt.Sprintf("would write those keys to %s", c.Path)), nil
	}
	old, existed, err := readFile(c.Path)
	rec := upstreamRecord{CreatedFile: !existed, Tables: map[string]*upstreamTable{}}
	if err == nil {
		var next []byte
		next, err = appendUpstreamKeys(old, keys, rec.Tables)
		if err == nil && !bytes.Equal(next, old) {
			err = ReplaceFile(c.Path, next)
		}
	}
	if err != nil {
		return out, fmt.Errorf("config %s: %v\nthe agents are wired, but requests go to the default upstreams until you add:%s", c.Path, err, keysText(keys))
	}
	out = append(out, fmt.Sprintf("wrote those keys to %s (restart the service to use them)", c.Path))
	if recordPath != "" {
		if err := mergeUpstreamRecord(recordPath, c.Path, rec); err != nil {
			return out, fmt.Errorf("record %s: %v\nuninstall will not remove the keys written to %s; remove them by hand then", recordPath, err, c.Path)
		}
	}
	return out, nil
}

// appendUpstreamKeys sets keys (by agent, family) in text's [upstream.agents.<agent>]
// tables, and notes in tables what it wrote per agent.
func appendUpstreamKeys(text []byte, keys map[string]map[string]string, tables map[string]*upstreamTable) ([]byte, error) {
	d, err := ParseTOMLDoc(text)
	if err != nil {
		return nil, fmt.Errorf("not valid TOML: %w", err)
	}
	for _, agent := range slices.Sorted(maps.Keys(keys)) {
		section := "upstream.agents." + agent
		text := d.Bytes()
		_, has := d.Table("[" + section + "]")
		created := !has
		last := text[bytes.LastIndexByte(text[:max(len(text)-1, 0)], '\n')+1:] // the last line
		tables[agent] = &upstreamTable{Keys: keys[agent], Created: created,
			Blank: created && len(text) > 0 && len(bytes.TrimSpace(last)) > 0,
			EOL:   created && len(text) > 0 && !bytes.HasSuffix(last, []byte("\n"))}
		for _, fam := range slices.Sorted(maps.Keys(keys[agent])) {
			v, _ := json.Marshal(keys[agent][fam])
			if _, err := d.SetKeyIn(section, fam, v); err != nil {
				return nil, err
			}
		}
	}
	return d.Bytes(), nil
}

// notChained is why agent's previous base URL u for family fam is not chained, one line
// for the report; "" when it may be.
func (c UpstreamConfig) notChained(agent, fam, u string) string {
	switch {
	case !slices.Contains(c.Families, fam):
		return fmt.Sprintf("%s: its previous %s base URL %s has no [upstream] key: requests go to the default", agent, fam, u)
	case !upstreamURL(u):
		return fmt.Sprintf("%s: its previous base URL %q is not an http(s) URL without query: not chained", agent, u)
	case loopsBack(u, c.Port):
		return fmt.Sprintf("%s: its previous base URL %s is this proxy: not chained", agent, u)
	case !slices.Contains(c.Agents, agent):
		return fmt.Sprintf("%s: has no [upstream.agents] table: its previous base URL %s is not chained", agent, u)
	}
	return ""
}

// keysText is keys as the tables to add by hand, each line indented: "\n  [upstream.agents.codex]\n  openai = …".
func keysText(keys map[string]map[string]string) string {
	var add strings.Builder
	for _, agent := range slices.Sorted(maps.Keys(keys)) {
		fmt.Fprintf(&add, "\n  [upstream.agents.%s]", agent)
		for _, fam := range slices.Sorted(maps.Keys(keys[agent])) {
			fmt.Fprintf(&add, "\n  %s = %s", fam, TOMLString(keys[agent][fam]))
		}
	}
	return add.String()
}

// upstreamRecord is what install wrote into one config.toml's [upstream.agents.<agent>]
// tables, so that uninstall removes exactly those keys, and only while they still hold the
// URL install wrote.
type upstreamRecord struct {
	// CreatedFile: install created config.toml; uninstall removes it when it is left empty.
	CreatedFile bool `json:"created_file,omitempty"`
	// Tables are by agent.
	Tables map[string]*upstreamTable `json:"tables"`
}

// upstreamTable is what install wrote into one [upstream.agents.<agent>] table.
type upstreamTable struct {
	// Keys are family to the URL written.
	Keys map[string]string `json:"keys"`
	// Created: install appended the table header; Blank: and a blank line before it; EOL:
	// and a line end to the file's last line. All go again when uninstall leaves the table
	// empty.
	Created bool `json:"created,omitempty"`
	Blank   bool `json:"blank,omitempty"`
	EOL     bool `json:"eol,omitempty"`
}

func readUpstreamRecords(path string) (map[string]*upstreamRecord, error) {
	recs := map[string]*upstreamRecord{}
	b, ok, err := readFile(path)
	if err != nil || !ok {
		return recs, err
	}
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	return recs, nil
}

func writeUpstreamRecords(path string, recs map[string]*upstreamRecord) error {
	if len(recs) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return err
	}
	return ReplaceFile(path, append(b, '\n'))
}

// mergeUpstreamRecord adds what one install wrote to the record; what an earlier install
// recorded for the same table keeps its Created and Blank.
func mergeUpstreamRecord(path, cfgPath string, add upstreamRecord) error {
	recs, err := readUpstreamRecords(path)
	if err != nil {
		return err
	}
	rec := recs[cfgPath]
	if rec == nil {
		rec = &upstreamRecord{CreatedFile: add.CreatedFile, Tables: map[string]*upstreamTable{}}
		recs[cfgPath] = rec
	}
	for agent, t := range add.Tables {
		if old := rec.Tables[agent]; old != nil {
			maps.Copy(old.Keys, t.Keys)
			continue
		}
		rec.Tables[agent] = t
	}
	return writeUpstreamRecords(path, recs)
}

// UnchainUpstreams is ChainUpstreams' inverse for uninstall: for each of agents it removes
// from config.toml the [upstream.agents.<agent>] keys install recorded, each only while it
// still holds the URL install wrote (a key changed since is kept, and reported), and the
// table header (and file) install created once nothing else is left in it. It returns the
// report lines in order; an error says what stays and what to do.
func UnchainUpstreams(c UpstreamConfig, agents []string, recordPath string, dryRun bool) ([]string, error) {
	recs, err := readUpstreamRecords(recordPath)
	if err != nil {
		return nil, fmt.Errorf("record %s: %v\nthe [upstream.agents] keys install wrote to %s stay: remove them by hand", recordPath, err, c.Path)
	}
	rec := recs[c.Path]
	if rec == nil {
		return nil, nil
	}
	old, _, err := readFile(c.Path)
	if err != nil {
		return nil, fmt.Errorf("config %s: %v", c.Path, err)
	}
	cur, err := c.Parse(old)
	if err != nil {
		return nil, fmt.Errorf("%w\nthe [upstream.agents] keys install wrote there stay: fix the file, then run uninstall again", err)
	}
	verb := map[bool]string{true: "would remove", false: "removed"}[dryRun]
	text := old
	var out, done []string
	for _, agent := range agents {
		t := rec.Tables[agent]
		if t == nil {
			continue
		}
		var names []string
		for _, fam := range slices.Sorted(maps.Keys(t.Keys)) {
			p, ok := cur.Agents[agent][fam]
			switch {
			case !ok:
			case strings.TrimRight(p, "/") == t.Keys[fam]:
				names = append(names, fam)
				done = append(done, fmt.Sprintf("%s: %s the upstream install chained: %s = %s", agent, verb, agentKey(agent, fam), TOMLString(t.Keys[fam])))
			default:
				out = append(out, fmt.Sprintf("%s: kept %s = %q in %s: changed since install wrote %q", agent, agentKey(agent, fam), p, c.Path, t.Keys[fam]))
			}
		}
		if len(names) > 0 && text != nil {
			next, err := RemoveKeysIn(text, "upstream.agents."+agent, names, t.Created, t.Blank, t.EOL)
			if err != nil {
				return out, fmt.Errorf("config %s: %v", c.Path, err)
			}
			text = next
		}
		delete(rec.Tables, agent)
	}
	out = append(out, done...)
	if dryRun {
		return out, nil
	}
	if err := writeBack(c.Path, old, text, rec.CreatedFile); err != nil {
		return out, fmt.Errorf("config %s: %v", c.Path, err)
	}
	if len(rec.Tables) == 0 {
		delete(recs, c.Path)
	}
	if err := writeUpstreamRecords(recordPath, recs); err != nil {
		return out, fmt.Errorf("record %s: %v", recordPath, err)
	}
	return out, nil
}

// writeBack writes text to path when it differs from old (nil: there was no file), and
// removes the file instead when text is empty and created says install made it.
func writeBack(path string, old, text []byte, created bool) error {
	switch {
	case old == nil || bytes.Equal(text, old):
		return nil
	case len(text) == 0 && created:
		return os.Remove(path)
	}
	return ReplaceFile(path, text)
}

// RemoveKeysIn deletes the named keys of the table [section] of the TOML text b through
// TOMLDoc.RemoveKeyIn (see it for dropTable, dropBlank and dropEOL) and returns the new
// text. An error (b not valid TOML, a key in an inline table) means the caller writes
// nothing.
func RemoveKeysIn(b []byte, section string, names []string, dropTable, dropBlank, dropEOL bool) ([]byte, error) {
	d, err := ParseTOMLDoc(b)
	if err != nil {
		return nil, fmt.Errorf("not valid TOML: %w", err)
	}
	for _, n := range names {
		if _, err := d.RemoveKeyIn(section, n, dropTable, dropBlank, dropEOL); err != nil {
			return nil, err
		}
	}
	return d.Bytes(), nil
}

// TOMLKey is one `name = value` line our commands write into config.toml: `on`/`off` the
// [context_proxy.agents] switches, the dashboard's settings, the chained [upstream] base
// URLs. Value is TOML text (TOMLBool, TOMLString).
type TOMLKey struct {
	Name, Value string
}

// TOMLBool is b as TOML text: "true" or "false".
func TOMLBool(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// SetKeysIn sets keys in the table [section] of the TOML text b through TOMLDoc.SetKeyIn:
// only those keys' lines change. An error (the keys in an inline table or dotted keys, b not
// valid TOML) means the caller writes nothing.
func SetKeysIn(b []byte, section string, keys []TOMLKey) ([]byte, error) {
	d, err := ParseTOMLDoc(b)
	if err != nil {
		return nil, fmt.Errorf("not valid TOML: %w", err)
	}
	for _, k := range keys {
		if _, err := d.SetKeyIn(section, k.Name, json.RawMessage(k.Value)); err != nil {
			return nil, err
		}
	}
	return d.Bytes(), nil
}

// upstreamURL accepts what config.toml's [upstream] keys accept: an http(s) URL with a host,
// no query and no fragment.
func upstreamURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.RawQuery == "" && u.Fragment == ""
}

// loopsBack reports a URL on this machine's loopback at the proxy's port.
func loopsBack(s string, port int) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	p := u.Port()
	if p == "" {
		p = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if p != strconv.Itoa(port) {
		return false
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback() || ip.IsUnspecified()
	}
	return strings.EqualFold(host, "localhost")
}

// ReplaceFile is WriteFileAtomic keeping the mode of the file it replaces, 0600 for a new
// one. An error reading that mode (other than the file not existing) is returned as is.
func ReplaceFile(path string, b []byte) error {
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return WriteFileAtomic(path, b, mode)
}
