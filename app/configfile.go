package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy/config"
)

// configKey is one key = value line our commands write into config.toml: `on`/`off` the
// [context_proxy.agents] switches, `install` the chained [upstream] base URLs. Value is TOML
// text (tomlBool, installer.TOMLString).
type configKey struct {
	name, value string
}

func tomlBool(b bool) string {
	if b {
		return "true"
	}
	return "false"
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

// readConfigText returns config.toml's bytes, nil when it does not exist; a file that is
// not regular or too large is an error (ReadFile).
func readConfigText(path string) ([]byte, error) {
	b, err := config.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// isReadOnlyFS reports a write refused because the file system is mounted read-only.
func isReadOnlyFS(err error) bool { return errors.Is(err, syscall.EROFS) }
