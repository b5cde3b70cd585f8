package config

import "time"

// fileTimeouts are the [context_proxy] keys of the proxy's timeouts, embedded in
// fileContextProxy.
type fileTimeouts struct {
	BodyReadTimeoutS     *int64 `toml:"body_read_timeout_s"`
	UpstreamIdleTimeoutS *int64 `toml:"upstream_idle_timeout_s"`
}

// Defaults of the timeout keys, in seconds. A request body comes over loopback from a
// local agent, so a minute is generous (nginx's client_body_timeout is 60 s too); an
// upstream that sends nothing for five minutes is not answering (Codex's own
// stream_idle_timeout_ms and OpenCode's provider timeout are 300,000 ms).
const (
	defaultBodyReadTimeoutS     = 60
	defaultUpstreamIdleTimeoutS = 300
)

var (
	keyBodyReadTimeoutS = Key{"context_proxy", "body_read_timeout_s", "CONTEXT_PROXY_BODY_READ_TIMEOUT_S",
		"an integer of at least 1 (seconds)", atLeast(1)}
	keyUpstreamIdleTimeoutS = Key{"context_proxy", "upstream_idle_timeout_s", "CONTEXT_PROXY_UPSTREAM_IDLE_TIMEOUT_S",
		"an integer of at least 1 (seconds)", atLeast(1)}
)

// timeoutKeys are added to allKeys.
var timeoutKeys = []Key{keyBodyReadTimeoutS, keyUpstreamIdleTimeoutS}

// timeouts resolves the timeout keys into c: Config.BodyReadTimeout, the whole time a request
// body may take to arrive (bodyDeadline), and Proxy.IdleTimeout, the longest the upstream may
// send nothing, before the response headers or between two reads of the body (a stream that
// keeps sending is never cut). Both take effect when serve starts.
func (r *resolver) timeouts(t *fileTimeouts, c *Config) {
	c.BodyReadTimeout = time.Duration(r.intKey(keyBodyReadTimeoutS, t.BodyReadTimeoutS, defaultBodyReadTimeoutS)) * time.Second
	c.Proxy.IdleTimeout = time.Duration(r.intKey(keyUpstreamIdleTimeoutS, t.UpstreamIdleTimeoutS, defaultUpstreamIdleTimeoutS)) * time.Second
}
