package app

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"

	"github.com/pelletier/go-toml/v2"

	"github.com/smarter-compact/smarter-compact/installer"
)

// configKey is one key = value line our commands write into config.toml: `on`/`off` the
// [context_proxy.agents] switches, `install` the chained [upstream] base URLs. Value is TOML
// text (tomlBool, tomlString).
type configKey struct {
	name, value string
}

func tomlBool(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// tomlString quotes s as a TOML basic string: `\` and `"` escaped, control characters as
// \uXXXX (TOML has no \x, \a or \v escapes, which strconv.Quote would write).
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// setConfigKeys sets keys in the table [section] of config.toml's text b, changing only the
// lines of those keys (DESIGN.md §8, applied to our own file): an existing key line gets the
// new value and keeps its indentation and comment; a missing key goes after the table's last
// key; a missing table is appended. Comments, order, blank lines and CRLF line ends survive.
//
// The result is checked by decoding both texts: it must hold exactly the old values plus the
// keys set. When it does not (the keys live in an inline table or a dotted key elsewhere, or
// b is not valid TOML), setConfigKeys returns an error and the caller writes nothing.
func setConfigKeys(b []byte, section string, keys []configKey) ([]byte, error) {
	var before map[string]any
	if err := toml.Unmarshal(b, &before); err != nil {
		return nil, fmt.Errorf("not valid TOML: %w", err)
	}
	eol := "\n"
	if bytes.Contains(b, []byte("\r\n")) {
		eol = "\r\n"
	}
	lines := splitLines(string(b))
	want := splitKeyPath(section)
	start, end := tableSpan(lines, want)

	out := slices.Clone(lines)
	if start < 0 {
		var add strings.Builder
		if len(out) > 0 && !strings.HasSuffix(out[len(out)-1], "\n") {
			out[len(out)-1] += eol
		}
		if len(out) > 0 && strings.TrimSpace(out[len(out)-1]) != "" {
			add.WriteString(eol)
		}
		add.WriteString("[" + section + "]" + eol)
		for _, k := range keys {
			add.WriteString(k.name + " = " + k.value + eol)
		}
		out = append(out, add.String())
	} else {
		for _, k := range keys {
			found := false
			last := start // the table's last key line
			for i := start + 1; i < end; i++ {
				name, indent, rest, ok := keyLine(out[i])
				if !ok {
					continue
				}
				last = i
				if !slices.Equal(splitKeyPath(name), []string{k.name}) {
					continue
				}
				lineEnd := lineEnding(out[i])
				out[i] = indent + k.name + " = " + k.value + trailingComment(rest) + lineEnd
				found = true
			}
			if found {
				continue
			}
			if !strings.HasSuffix(out[last], "\n") {
				out[last] += eol
			}
			ins := k.name + " = " + k.value + eol
			out = append(out[:last+1], append([]string{ins}, out[last+1:]...)...)
			end++
		}
	}
	result := []byte(strings.Join(out, ""))

	var after map[string]any
	if err := toml.Unmarshal(result, &after); err != nil {
		return nil, fmt.Errorf("the edit would not be valid TOML (%v): the keys must be written by hand", err)
	}
	expect, err := withKeys(before, want, keys)
	if err != nil {
		return nil, err
	}
	if !reflect.DeepEqual(after, expect) {
		return nil, errors.New("the keys are defined in a form this edit does not handle (an inline table or a dotted key): write them by hand")
	}
	return result, nil
}

// tableSpan finds the header line of the table at path want and the end of the table (the
// next header or EOF); start is -1 when there is no such header.
func tableSpan(lines []string, want []string) (start, end int) {
	start, end = -1, len(lines)
	inMulti := ""
	for i, line := range lines {
		if inMulti != "" {
			if strings.Count(line, inMulti)%2 == 1 {
				inMulti = ""
			}
			continue
		}
		for _, q := range []string{`"""`, `'''`} {
			if strings.Count(line, q)%2 == 1 {
				inMulti = q
			}
		}
		name, ok := tableHeader(line)
		if !ok {
			continue
		}
		if start >= 0 {
			return start, i
		}
		if slices.Equal(splitKeyPath(name), want) {
			start = i
		}
	}
	return start, end
}

// removeConfigKeys is setConfigKeys' inverse for uninstall: it deletes the lines of the
// named keys in the table [section] of b and, with dropTable, also the table's header when
// only blank lines are left in it, and then with dropBlank one blank line right before the
// header (the one setConfigKeys adds when it appends a table), and with dropEOL, when the
// table was the file's end, the line end setConfigKeys added to a last line without one.
// Every other line is kept byte for byte. The result is checked by decoding: it must hold the old values minus those keys
// (an empty table may go).
func removeConfigKeys(b []byte, section string, names []string, dropTable, dropBlank, dropEOL bool) ([]byte, error) {
	var before map[string]any
	if err := toml.Unmarshal(b, &before); err != nil {
		return nil, fmt.Errorf("not valid TOML: %w", err)
	}
	want := splitKeyPath(section)
	lines := splitLines(string(b))
	start, end := tableSpan(lines, want)
	if start < 0 {
		start, end = len(lines), len(lines) // no header: nothing to remove, checked below
	}
	var kept []string
	for i := start + 1; i < end; i++ {
		if name, _, _, ok := keyLine(lines[i]); ok && slices.ContainsFunc(names, func(n string) bool {
			return slices.Equal(splitKeyPath(name), []string{n})
		}) {
			continue
		}
		kept = append(kept, lines[i])
	}
	head := slices.Clone(lines[:min(start+1, len(lines))])
	empty := !slices.ContainsFunc(kept, func(l string) bool { return strings.TrimSpace(l) != "" })
	if dropTable && empty && start < len(lines) {
		head = head[:start]
		if dropBlank && start > 0 && strings.TrimSpace(head[start-1]) == "" {
			head = head[:start-1]
		}
		if n := len(head); dropEOL && end == len(lines) && len(kept) == 0 && n > 0 {
			head[n-1] = strings.TrimSuffix(head[n-1], lineEnding(head[n-1]))
		}
	}
	result := []byte(strings.Join(append(append(head, kept...), lines[end:]...), ""))

	var after map[string]any
	if err := toml.Unmarshal(result, &after); err != nil {
		return nil, fmt.Errorf("the edit would not be valid TOML (%v): remove the keys by hand", err)
	}
	expect := deepCopy(before).(map[string]any)
	t := expect
	for _, p := range want {
		next, ok := t[p].(map[string]any)
		if !ok {
			if _, exists := t[p]; exists {
				return nil, fmt.Errorf("%s is not a table", section)
			}
			next = map[string]any{}
		}
		t = next
	}
	for _, n := range names {
		delete(t, n)
	}
	if !reflect.DeepEqual(pruneEmpty(after), pruneEmpty(expect)) {
		return nil, errors.New("the keys are defined in a form this edit does not handle (an inline table or a dotted key): remove them by hand")
	}
	return result, nil
}

// pruneEmpty drops empty tables, recursively, so that a removed empty table compares equal.
func pruneEmpty(m map[string]any) map[string]any {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok && len(pruneEmpty(sub)) == 0 {
			delete(m, k)
		}
	}
	return m
}

// withKeys returns a copy of doc with keys set in the table at path, decoded as go-toml
// decodes them.
func withKeys(doc map[string]any, path []string, keys []configKey) (map[string]any, error) {
	var text strings.Builder
	for _, k := range keys {
		text.WriteString(k.name + " = " + k.value + "\n")
	}
	var vals map[string]any
	if err := toml.Unmarshal([]byte(text.String()), &vals); err != nil {
		return nil, fmt.Errorf("bad value: %w", err)
	}
	out := deepCopy(doc).(map[string]any)
	t := out
	for _, p := range path {
		next, ok := t[p].(map[string]any)
		if !ok {
			if _, exists := t[p]; exists {
				return nil, fmt.Errorf("%s is not a table", strings.Join(path, "."))
			}
			next = map[string]any{}
			t[p] = next
		}
		t = next
	}
	for k, v := range vals {
		t[k] = v
	}
	return out, nil
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}

// splitLines splits s after each "\n", keeping the line ends; a last line without one is
// kept as is.
func splitLines(s string) []string {
	var lines []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

func lineEnding(line string) string {
	switch {
	case strings.HasSuffix(line, "\r\n"):
		return "\r\n"
	case strings.HasSuffix(line, "\n"):
		return "\n"
	}
	return ""
}

// tableHeader returns the name of a [table] header line; array tables ([[x]]) count as
// headers too (they end the table before them) and return their name in brackets.
func tableHeader(line string) (string, bool) {
	s := strings.TrimSpace(stripComment(line))
	if strings.HasPrefix(s, "[[") && strings.HasSuffix(s, "]]") {
		return "[" + s[2:len(s)-2] + "]", true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		return s[1 : len(s)-1], true
	}
	return "", false
}

// keyLine splits a `key = value` line into the key, its indentation and the text after "=".
func keyLine(line string) (key, indent, rest string, ok bool) {
	body := strings.TrimRight(line, "\r\n")
	trimmed := strings.TrimLeft(body, " \t")
	if trimmed == "" || trimmed[0] == '#' || trimmed[0] == '[' {
		return "", "", "", false
	}
	indent = body[:len(body)-len(trimmed)]
	// The "=" after the key, outside quotes.
	if i := unquotedIndex(trimmed, '='); i >= 0 {
		return strings.TrimSpace(trimmed[:i]), indent, trimmed[i+1:], true
	}
	return "", "", "", false
}

// trailingComment returns " # …" when the value text ends in a comment, else "".
func trailingComment(rest string) string {
	v := stripComment(rest)
	if c := strings.TrimRight(rest[len(v):], "\r\n"); c != "" {
		return " " + strings.TrimSpace(c)
	}
	return ""
}

// stripComment cuts s at a "#" outside quoted strings.
func stripComment(s string) string {
	if i := unquotedIndex(s, '#'); i >= 0 {
		return s[:i]
	}
	return s
}

// unquotedIndex returns the index of the first c in s outside TOML basic ("…", with
// backslash escapes) and literal ('…') strings, or -1.
func unquotedIndex(s string, c byte) int {
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case quote != 0:
			if b == '\\' && quote == '"' {
				i++
			} else if b == quote {
				quote = 0
			}
		case b == '"' || b == '\'':
			quote = b
		case b == c:
			return i
		}
	}
	return -1
}

// splitKeyPath splits a TOML dotted key into its parts, unquoting quoted parts and dropping
// the whitespace around dots.
func splitKeyPath(s string) []string {
	var parts []string
	var cur strings.Builder
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' && i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			} else if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '.':
			parts = append(parts, cur.String())
			cur.Reset()
		case c == ' ' || c == '\t':
		default:
			cur.WriteByte(c)
		}
	}
	return append(parts, cur.String())
}

// writeConfigFile replaces path with b through installer.WriteFileAtomic (temporary file,
// fsync of file and folder, rename; a symbolic link stays one and its target is written),
// keeping an existing file's mode, 0600 for a new one.
func writeConfigFile(path string, b []byte) error {
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return installer.WriteFileAtomic(path, b, mode)
}

// readConfigText returns config.toml's bytes, nil when it does not exist.
func readConfigText(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// isReadOnlyFS reports a write refused because the file system is mounted read-only.
func isReadOnlyFS(err error) bool { return errors.Is(err, syscall.EROFS) }
