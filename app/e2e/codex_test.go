//go:build e2e

package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// codexTrimAt is CONTEXT_TRIM_AT_TOKENS for the Codex session. Codex 0.171.0's first request
// is about 41 KB (16.4k tokens by the uncalibrated estimate, about 13.7k by the fake's count);
// each step adds a 4 KB file. 20000 keeps the first request whole, and the session crosses it
// in turn 2.
const codexTrimAt = 20000

// codexModel is the model of the session. Codex has no metadata for it under a custom
// provider and says so once per run ("Defaulting to fallback metadata"), which is harmless.
const codexModel = "gpt-5-codex"

// TestE2ECodexTrims drives the real Codex CLI (`codex exec --json`, then `codex exec resume`)
// through the real `smarter-compact serve` (/codex, Responses over HTTP) against the strict
// fake model, for a session of three turns whose exec_command tool loops outgrow codexTrimAt.
// Every reply starts with a reasoning item, as a real model's does, so a trim that separates
// one from the call it came with is rejected upstream. See checkTrimmedSession for what it
// checks.
func TestE2ECodexTrims(t *testing.T) {
	codex := codexCLI.findLogged(t)
	bin := buildBinary(t)

	work, home := agentDirs(t)
	codexHome := filepath.Join(home, ".codex") // Codex wants it to exist
	makeDirs(t, codexHome)
	sc := &toolScript{
		files:    script{dir: filepath.Join(work, "data")},
		tool:     "exec_command",
		input:    func(path string) any { return map[string]any{"cmd": "cat " + path} },
		thinking: true,
	}
	sc.files.writeFiles(t)

	fake, srv, tp := startRig(t, bin, sc.reply, func(fakeURL string) []string {
		return []string{"SMARTER_COMPACT_UPSTREAM_CODEX=" + fakeURL + "/v1", "CONTEXT_TRIM_AT_TOKENS=" + strconv.Itoa(codexTrimAt)}
	})
	out := startOutside(t)

	// A custom provider on HTTP (no websocket: over one Codex sends only the new items, and
	// nothing could be trimmed); clients.md's settings that keep Codex off the network, and
	// --disable plugins --disable apps below.
	config := fmt.Sprintf(`model = %q
model_provider = "smarter-compact"
approval_policy = "never"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false

[model_providers.smarter-compact]
name = "smarter-compact e2e"
base_url = %q
wire_api = "responses"
supports_websockets = false
env_key = "SMARTER_COMPACT_E2E_KEY"

[analytics]
enabled = false
`, codexModel, tp.URL+"/codex")
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append([]string{
		"HOME=" + home,
		"CODEX_HOME=" + codexHome,
		"SMARTER_COMPACT_E2E_KEY=dummy-key", // sent as Authorization: Bearer
	}, out.env()...)

	runs, thread, took := runResuming(t, resumingAgent{
		name: "codex", bin: codex, work: work, env: env,
		args: func(i int, prompt, thread string) []string {
			args := []string{"exec", "--skip-git-repo-check", "--disable", "plugins", "--disable", "apps", "--json"}
			if i > 0 {
				args = append(args, "resume", thread)
			}
			return append(args, prompt) // one argv word
		},
		events: func(stdout string) (string, []string, []string) {
			ev := codexEvents(stdout)
			return ev.thread, ev.messages, ev.errors
		},
		idWord: "thread", idName: "thread.started", keep: "resume should keep the thread",
	}, fake, srv)

	// Codex sends every reasoning item back (store false, include reasoning.encrypted_content),
	// so the trims had reasoning items to keep with their calls.
	if sent := tp.requests(); len(sent) > 0 {
		b, err := parseWire(formatResponses, sent[len(sent)-1].body)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range b.msgs {
			for _, p := range m.parts {
				if p.kind == "thinking" {
					n++
				}
			}
		}
		if n == 0 {
			t.Error("Codex's last request carries no reasoning item: the session did not test keeping reasoning with its calls")
		}
		t.Logf("Codex's last request carries %d reasoning items", n)
	}

	checkTrimmedSession(t, trimSession{
		agent: "Codex", format: formatResponses, model: codexModel, sid: thread,
		// Codex names the thread three times: prompt_cache_key, session-id and thread-id.
		sidOf: func(r fakeupstream.Recorded, b *wireBody) string {
			if h := r.Header.Get("Session-Id"); h != b.promptCacheKey || r.Header.Get("Thread-Id") != h {
				return fmt.Sprintf("prompt_cache_key %q, session-id %q, thread-id %q", b.promptCacheKey, h, r.Header.Get("Thread-Id"))
			}
			return b.promptCacheKey
		},
		trimAt: codexTrimAt, sc: sc, fake: fake, srv: srv, tp: tp, out: out, runs: runs, took: took,
	})
}

// codexRun is what `codex exec --json` printed: one JSON event a line.
type codexRun struct {
	thread   string   // thread.started's thread_id
	messages []string // the agent_message items' text
	errors   []string // turn.failed and error events, as printed
}

func codexEvents(stdout string) codexRun {
	var r codexRun
	eachJSONLine(stdout, func(ev struct {
		Type     string `json:"type"`
		ThreadID string `json:"thread_id"`
		Item     struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"item"`
	}, line string) {
		switch {
		case ev.Type == "thread.started":
			r.thread = ev.ThreadID
		case ev.Type == "turn.failed" || ev.Type == "error":
			r.errors = append(r.errors, line)
		case ev.Type == "item.completed" && ev.Item.Type == "agent_message":
			r.messages = append(r.messages, ev.Item.Text)
		}
	})
	return r
}
