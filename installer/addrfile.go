package installer

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
)

// The service's address file: serve records where it listens, so that `on` and `off` find a
// service started with --port (its port is then not the config's). It sits next to the API
// token, <configDir>/smarter-compact/service-addr (mode 0600), and serve removes it when it
// stops. A service that crashed leaves it behind: the address then refuses connections, and
// `on`/`off` go on to the config's port.

// addrFileName is the address file's name in the token's folder.
const addrFileName = "service-addr"

// addrRecord is the address file's content.
type addrRecord struct {
	Addr string `json:"addr"` // http://127.0.0.1:<port>
	PID  int    `json:"pid"`
}

// AddrFilePath is the address file, next to the API token (TokenPath).
func AddrFilePath(configDir string) (string, error) {
	tok, err := TokenPath(configDir)
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(tok), addrFileName), nil
}

// WriteAddrFile records base (http://127.0.0.1:<port>) as this process's address. remove
// deletes the file while it still holds this record (a second service that started since
// keeps its own).
func WriteAddrFile(configDir, base string) (remove func(), err error) {
	path, err := AddrFilePath(configDir)
	if err != nil {
		return func() {}, err
	}
	b, _ := json.Marshal(addrRecord{Addr: base, PID: os.Getpid()})
	b = append(b, '\n')
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return func() {}, err
	}
	if err := WriteFileAtomic(path, b, 0o600); err != nil {
		return func() {}, err
	}
	return func() {
		if cur, err := os.ReadFile(path); err == nil && string(cur) == string(b) {
			_ = os.Remove(path)
		}
	}, nil
}

// ReadAddrFile returns the base URL a running service recorded, "" when there is none or it
// is not a loopback http URL with a port (the token is sent there: never anywhere else).
func ReadAddrFile(configDir string) string {
	path, err := AddrFilePath(configDir)
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var rec addrRecord
	if json.Unmarshal(b, &rec) != nil {
		return ""
	}
	base, err := loopbackBase(rec.Addr)
	if err != nil {
		return ""
	}
	return base
}

// loopbackBase checks that raw is http://127.0.0.1:<port> (or localhost, [::1]) and returns
// it as http://127.0.0.1:<port> or http://[::1]:<port>.
func loopbackBase(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", errors.New("not an http://127.0.0.1:<port> address")
	}
	host, port := u.Hostname(), u.Port()
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("no port in %q", raw)
	}
	switch host {
	case "127.0.0.1", "localhost":
		return "http://127.0.0.1:" + port, nil
	case "::1":
		return "http://" + net.JoinHostPort("::1", port), nil
	}
	return "", fmt.Errorf("%q is not a loopback address", raw)
}
