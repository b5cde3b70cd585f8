//go:build linux

package installer

import (
	"fmt"
	"os"

	"github.com/kardianos/service"
)

// kardianosProgram is the service.Interface kardianos/service wants (systemd on Linux;
// macOS runs launchctl itself, service_darwin.go); we never call Run, so it is never used.
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
