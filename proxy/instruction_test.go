package proxy

import (
	"bytes"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// R1. A string system prompt that is empty is legal (the API and the strict fake accept
// `"system": ""`), but the standing-instruction placement turns it into a leading text
// block with empty text, which the API rejects: "system: text content blocks must be
// non-empty" (api-rules §1.5). Contract (Proxy-inserted text, placement): "a string system
// becomes a single leading text block first" — that block must not be created when the
// string is empty (or whitespace-only).
//
// Regression test from the first review of proxy/ (R1…R11 name its findings).
func TestReviewEmptyStringSystemIsNotTurnedIntoAnEmptyTextBlock(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	body := reviewBody("claude-mythos-5-1", `,"system":""`, u("hello"))
	status := post(t, r.srv.URL+"/claude-code/v1/messages", body, map[string]string{"X-Claude-Code-Session-Id": "empty-sys"})
	if rej := r.fake.Rejections(); len(rej) > 0 {
		t.Fatalf("status %d: the proxy turned a valid request into an invalid one: %s\nforwarded system: %.200s",
			status, rej[0].Error, rej[0].Body[bytes.Index(rej[0].Body, []byte(`"system"`)):])
	}
}
