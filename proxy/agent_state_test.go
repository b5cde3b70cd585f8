package proxy

import (
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// The route's agent reaches sessions/<sid>.trim.json ("agent"); the unknown route records none.
func TestTrimStateRecordsAgent(t *testing.T) {
	r := newRig(t, testSettings(1_000_000), fakeupstream.Options{})
	c := r.client(t, "agentsess", "claude-mythos-5-1")
	c.userTurn("first", output(1, 0))
	r.accepted(t)
	body := []byte(`{"model":"claude-mythos-5-1","max_tokens":10,"messages":[{"role":"user","content":"plain"}]}`)
	post(t, r.srv.URL+"/v1/messages", body, map[string]string{"X-Smarter-Compact-Session-Id": "anon"})
	must(t, r.proxy.Close())
	for sid, want := range map[string]string{"agentsess": "claude-code", "anon": ""} {
		b, err := r.root.LoadTrimState(sid)
		must(t, err)
		if st := decodeTrimState(b); st.Agent != want {
			t.Errorf("%s: agent %q want %q (%s)", sid, st.Agent, want, b)
		}
	}
}
