//go:build !linux && !darwin && !windows

package installer

// No login service on other systems (BSDs, …): ServiceFile already returns
// ErrServiceUnsupported for them, so these are never reached; they keep the build whole.

import (
	"context"
	"fmt"
	"runtime"
)

func unsupported() error {
	return fmt.Errorf("%w: no login service for %s", ErrServiceUnsupported, runtime.GOOS)
}

func platformInstall(context.Context, ServiceConfig, ServiceDef) (ServiceResult, error) {
	return ServiceResult{}, unsupported()
}

func platformUninstall(context.Context, ServiceConfig, ServiceDef) (ServiceResult, error) {
	return ServiceResult{}, unsupported()
}

func platformStart(context.Context, ServiceConfig, ServiceDef) (ServiceResult, error) {
	return ServiceResult{}, unsupported()
}

func platformStop(context.Context, ServiceConfig, ServiceDef) (ServiceResult, error) {
	return ServiceResult{}, unsupported()
}

func platformStatus(context.Context, ServiceConfig, ServiceDef) (ServiceState, error) {
	return ServiceState{}, unsupported()
}

// StopRequests is Windows-only (service_windows.go): elsewhere a signal stops the service,
// so it returns a nil channel, which never fires.
func StopRequests(name string, port int) (<-chan struct{}, func(), error) {
	return nil, func() {}, nil
}
