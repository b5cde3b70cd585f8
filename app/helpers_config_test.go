package app

import (
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/proxy/config/configtest"
)

// env is a fake environment for getenv (configtest.Env, shared with proxy/config's tests).
type env = configtest.Env

// load reads text as an explicitly named config.toml under e.
func load(t *testing.T, text string, e env) (config.Config, error) {
	t.Helper()
	return config.Load(configtest.WriteConfig(t, text), true, e.Get)
}

// hangGuard bounds a call that must return at once (as in proxy/config's read tests: a
// FIFO or a device as config.toml must not block).
const hangGuard = 30 * time.Second
