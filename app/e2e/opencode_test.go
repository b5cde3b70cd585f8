//go:build e2e

package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// openCodeTrimAt is CONTEXT_TRIM_AT_TOKENS for the OpenCode sessions. OpenCode 1.18.33's
// first agent request is about 31 KB with either provider (12k tokens by the uncalibrated
// estimate, about 10k by the fake's count); each step adds a 4 KB file. 16000 keeps the first
// request whole, and the session crosses it in turn 2.
const openCodeTrimAt = 16000

// TestE2EOpenCodeTrims drives the real OpenCode CLI (`opencode run`) through the real
// `smarter-compact serve` against the strict fake model, for a session of three runs
// (--session) whose bash tool loops outgrow openCodeTrimAt, once per provider family
// OpenCode reaches the proxy with: its Anthropic provider (/opencode/anthropic, Messages)
// and an OpenAI-compatible provider (/opencode/openai, Chat Completions). See
// checkTrimmedSession for what it checks.
func TestE2EOpenCodeTrims(t *testing.T) {
	opencode := openCodeCLI.findLogged(t)
	bin := buildBinary(t)
	for _, tc := range []struct {
		name     string
		format   string
		upstream string // serve's variable for the route's upstream
		route    string // OpenCode's baseURL under serve
		model    string // the model of the agent requests
		config   func(baseURL string) map[string]any
	}{
		{
			// The bundled catalogue's model. OpenCode posts <baseURL>/messages; its title request
			// goes to the catalogue's small model (claude-haiku-4-5) with thinking on.
			name: "anthropic", format: formatAnthropic, upstream: "SMARTER_COMPACT_UPSTREAM_ANTHROPIC",
			route: "/opencode/anthropic/v1", model: "claude-sonnet-4-5",
			config: func(baseURL string) map[string]any {
				return map[string]any{
					"model": "anthropic/claude-sonnet-4-5",
					"provider": map[string]any{"anthropic": map[string]any{
						"options": map[string]any{"baseURL": baseURL, "apiKey": "dummy-key"},
					}},
				}
			},
		},
		{
			// @ai-sdk/openai-compatible is bundled (no install); it posts <baseURL>/chat/completions.
			// The model is declared, since it is in no catalogue; it is the small model too.
			name: "openai-compatible", format: formatChat, upstream: "SMARTER_COMPACT_UPSTREAM_OPENAI",
			route: "/opencode/openai/v1", model: "e2e-model",
			config: func(baseURL string) map[string]any {
				return map[string]any{
					"model":       "e2e/e2e-model",
					"small_model": "e2e/e2e-model",
					"provider": map[string]any{"e2e": map[string]any{
						"npm":     "@ai-sdk/openai-compatible",
						"name":    "smarter-compact e2e",
						"options": map[string]any{"baseURL": baseURL, "apiKey": "dummy-key"},
						"models": map[string]any{"e2e-model": map[string]any{
							"name": "E2E model", "tool_call": true,
							"limit": map[string]any{"context": 200000, "output": 8192},
						}},
					}},
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work, home := agentDirs(t)
			sc := &toolScript{
				files: script{dir: filepath.Join(work, "data")},
				tool:  "bash",
				input: func(path string) any {
					return map[string]any{"command": "cat " + path, "description": "Show data file"}
				},
			}
			sc.files.writeFiles(t)

			fake, srv, tp := startRig(t, bin, sc.reply, func(fakeURL string) []string {
				return []string{tc.upstream + "=" + fakeURL, "CONTEXT_TRIM_AT_TOKENS=" + strconv.Itoa(openCodeTrimAt)}
			})
			out := startOutside(t)

			cfg := tc.config(tp.URL + tc.route)
			cfg["autoupdate"], cfg["share"] = false, "disabled"
			raw, err := json.MarshalIndent(cfg, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(work, "opencode.json"), raw, 0o644); err != nil {
				t.Fatal(err)
			}
			// The quiet flags of clients.md (run 08) stop the catalogue fetch and the update
			// check. OpenCode also installs its plugin SDK into its config directory, from
			// registry.npmjs.org, before the first model call, unless node_modules exists and the
			// lockfile names every dependency of package.json: seeded so, it calls nothing
			// outside (anything it still tries goes to out and is refused).
			seedOpenCodeConfigDir(t, filepath.Join(home, ".config", "opencode"))
			env := append([]string{
				"HOME=" + home,
				"OPENCODE_DISABLE_MODELS_FETCH=1",
				"OPENCODE_DISABLE_AUTOUPDATE=1",
				"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
				"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
				"OPENCODE_DISABLE_SHARE=1",
			}, out.env()...)

			runs, sid, took := runResuming(t, resumingAgent{
				name: "opencode", bin: opencode, work: work, env: env,
				args: func(i int, prompt, sid string) []string {
					args := []string{"run", "--pure", "--format", "json", "--auto"}
					if i > 0 {
						args = append(args, "--session", sid)
					}
					// One argv word per prompt word: a single quoted word reaches the model in quotes.
					return append(args, strings.Fields(prompt)...)
				},
				events: func(stdout string) (string, []string, []string) {
					ev := openCodeEvents(stdout)
					return ev.session, ev.texts, ev.errors
				},
				idWord: "session", idName: "sessionID", keep: "--session should keep the session",
			}, fake, srv)

			checkTrimmedSession(t, trimSession{
				agent: "OpenCode", format: tc.format, model: tc.model, sid: sid,
				sidOf: func(r fakeupstream.Recorded, _ *wireBody) string {
					return r.Header.Get("X-Session-Id")
				},
				trimAt: openCodeTrimAt, sc: sc, fake: fake, srv: srv, tp: tp, out: out, runs: runs, took: took,
			})
		})
	}
}

// openCodeRun is what `opencode run --format json` printed: one JSON event a line.
type openCodeRun struct {
	session string   // sessionID of the events
	texts   []string // the text parts
	errors  []string // error events, as printed
}

func openCodeEvents(stdout string) openCodeRun {
	var r openCodeRun
	eachJSONLine(stdout, func(ev struct {
		Type      string `json:"type"`
		SessionID string `json:"sessionID"`
		Part      struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"part"`
	}, line string) {
		if r.session == "" {
			r.session = ev.SessionID
		}
		switch {
		case ev.Type == "error":
			r.errors = append(r.errors, line)
		case ev.Part.Type == "text":
			r.texts = append(r.texts, ev.Part.Text)
		}
	})
	return r
}

// seedOpenCodeConfigDir makes dir (OpenCode's global config directory) look as if the plugin
// SDK were installed: an existing node_modules and a lockfile that lists what package.json
// lists is what OpenCode's install check accepts.
func seedOpenCodeConfigDir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	deps := `{"@opencode-ai/plugin": "` + openCodeVersion + `"}`
	for name, text := range map[string]string{
		"package.json":      `{"dependencies": ` + deps + `}`,
		"package-lock.json": `{"packages": {"": {"dependencies": ` + deps + `}}}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
