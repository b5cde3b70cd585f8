package installer

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// tokenBytes is the API token's length in random bytes (64 hex characters).
const tokenBytes = 32

// TokenPath is the per-install API token file: <configDir>/smarter-compact/api-token, where
// configDir is os.UserConfigDir (the folder of the default config.toml, whatever --config
// names). The token guards /api/* (web.Options.APIToken); `on` and `off` send it.
func TokenPath(configDir string) (string, error) {
	if configDir == "" {
		return "", errors.New("cannot find the user config directory for the API token: set XDG_CONFIG_HOME or HOME (APPDATA on Windows)")
	}
	return filepath.Join(configDir, "smarter-compact", "api-token"), nil
}

// EnsureToken returns the API token, creating the file (folder 0700, file 0600) with a new
// random token when it is missing or does not hold one; a file open to group or others is
// tightened to 0600. serve calls it at start. The token is never logged.
func EnsureToken(configDir string) (string, error) {
	path, err := TokenPath(configDir)
	if err != nil {
		return "", err
	}
	tok, err := readTokenFile(path)
	if err == nil {
		if runtime.GOOS != "windows" {
			if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
				if err := os.Chmod(path, 0o600); err != nil {
					return "", fmt.Errorf("API token %s is open to other users and cannot be tightened: %w: chmod 600 it", path, err)
				}
			}
		}
		return tok, nil
	}
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errBadToken) {
		return "", err
	}
	b := make([]byte, tokenBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error
	tok = hex.EncodeToString(b)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("create the API token's folder: %w", err)
	}
	// One atomic write, 0600 whatever mode a bad file had: no moment without a file.
	if err := WriteFileAtomic(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write the API token %s: %w", path, err)
	}
	return tok, nil
}

// errBadToken is a token file that does not hold 64 hex characters.
var errBadToken = errors.New("not an API token")

// ReadToken returns the API token the running service created, for `on` and `off`. A
// missing file wraps fs.ErrNotExist.
func ReadToken(configDir string) (string, error) {
	path, err := TokenPath(configDir)
	if err != nil {
		return "", err
	}
	return readTokenFile(path)
}

func readTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the API token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if _, err := hex.DecodeString(tok); err != nil || len(tok) != 2*tokenBytes {
		return "", fmt.Errorf("API token %s: %w (want %d hex characters): restart the service to make a new one", path, errBadToken, 2*tokenBytes)
	}
	return tok, nil
}
