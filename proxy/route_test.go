package proxy

import (
	"net/http/httptest"
	"testing"
)

// Every prefix the listener mounts (RoutePrefixes) reaches a route of routeFor, with and
// without a tail, and a path that only starts like one does not.
func TestRoutePrefixesAreRouted(t *testing.T) {
	tails := map[string]string{OpenCodePrefix: "anthropic/v1/messages", V1Prefix: "messages"}
	for _, prefix := range RoutePrefixes() {
		tail := tails[prefix]
		if tail == "" {
			tail = "responses"
		}
		if _, ok := routeFor(httptest.NewRequest("POST", prefix+tail, nil)); !ok {
			t.Errorf("%s%s: not routed", prefix, tail)
		}
	}
	for _, path := range []string{"/claude-codex/v1/messages", "/v1", "/codexx/responses", "/backend-api/responses"} {
		if rt, ok := routeFor(httptest.NewRequest("POST", path, nil)); ok {
			t.Errorf("%s: routed to %+v, want no route", path, rt)
		}
	}
}
