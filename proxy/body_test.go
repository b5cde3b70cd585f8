package proxy

import (
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

func TestZstdBodyIsDecodedAndRewritten(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "zstd", "claude-opus-5-5")
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": "hi"})
	enc, _ := zstd.NewWriter(nil)
	body := enc.EncodeAll(c.body(), nil)
	resp := post(t, r.srv.URL+"/claude-code/v1/messages", body, map[string]string{"Content-Encoding": "zstd", "X-Claude-Code-Session-Id": "zstd"})
	if resp != 200 {
		t.Fatalf("status %d", resp)
	}
	reqs := r.accepted(t)
	if reqs[0].Header.Get("Content-Encoding") != "" || !strings.Contains(string(reqs[0].Raw), StandingInstruction[:40]) {
		t.Fatal("want the decoded body, rewritten, without Content-Encoding")
	}
}
