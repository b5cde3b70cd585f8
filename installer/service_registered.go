//go:build linux || darwin

package installer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// registeredFile reads def's unit or plist and fills the registration part of a
// ServiceState from it (registeredState); a missing file means nothing is registered,
// any other read error is returned naming the path.
func registeredFile(goos string, def ServiceDef) (ServiceState, error) {
	b, err := os.ReadFile(def.Path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ServiceState{}, fmt.Errorf("read %s: %w", def.Path, err)
	}
	return registeredState(goos, def, string(b), err == nil), nil
}
