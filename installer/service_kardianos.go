//go:build linux || darwin

package installer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/kardianos/service"
)

// kardianosProgram is the service.Interface kardianos/service wants (systemd on Linux,
// launchd on macOS); we never call Run, so it is never used.
type kardianosProgram struct{}

func (kardianosProgram) Start(service.Service) error { return nil }
func (kardianosProgram) Stop(service.Service) error  { return nil }

// registeredService builds the manager's service for def with build, after checking
// that def's unit or plist exists (ErrServiceNotInstalled wrapped, naming the path) and
// that c.Home is this user's home (sameHome).
func registeredService(c ServiceConfig, def ServiceDef, build func(ServiceConfig, ServiceDef) (service.Service, error)) (service.Service, error) {
	if _, err := os.Stat(def.Path); err != nil {
		return nil, fmt.Errorf("%w (no %s)", ErrServiceNotInstalled, def.Path)
	}
	if err := sameHome(c.Home); err != nil {
		return nil, err
	}
	return build(c, def)
}

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
