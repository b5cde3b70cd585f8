package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

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

// setConfigKeys sets keys in the table [section] of config.toml's text b through the
// installer's TOML editor (TOMLDoc.SetKeyIn): only those keys' lines change. An error (the
// keys in an inline table or dotted keys, b not valid TOML) means the caller writes nothing.
func setConfigKeys(b []byte, section string, keys []configKey) ([]byte, error) {
	d, err := installer.ParseTOMLDoc(b)
	if err != nil {
		return nil, fmt.Errorf("not valid TOML: %w", err)
	}
	for _, k := range keys {
		if _, err := d.SetKeyIn(section, k.name, json.RawMessage(k.value)); err != nil {
			return nil, err
		}
	}
	return d.Bytes(), nil
}

// hasTable reports whether config.toml's text b has a [section] header (false for text that
// is not TOML: setConfigKeys reports that).
func hasTable(b []byte, section string) bool {
	d, err := installer.ParseTOMLDoc(b)
	if err != nil {
		return false
	}
	_, ok := d.Table("[" + section + "]")
	return ok
}

// removeConfigKeys deletes the named keys of [section] through TOMLDoc.RemoveKeyIn (see it
// for dropTable, dropBlank and dropEOL).
func removeConfigKeys(b []byte, section string, names []string, dropTable, dropBlank, dropEOL bool) ([]byte, error) {
	d, err := installer.ParseTOMLDoc(b)
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
