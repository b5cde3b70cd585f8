//go:build linux || darwin

package installer

import "github.com/kardianos/service"

// kardianosProgram is the service.Interface kardianos/service wants (systemd on Linux,
// launchd on macOS); we never call Run, so it is never used.
type kardianosProgram struct{}

func (kardianosProgram) Start(service.Service) error { return nil }
func (kardianosProgram) Stop(service.Service) error  { return nil }
