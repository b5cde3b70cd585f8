package proxy

import (
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/store"
)

// Shared helpers of the OpenAI adapter tests (golden_openai_test.go, parity_test.go,
// chat_test.go, responses_test.go, routes_openai_test.go). Names start with "ad" so they
// do not collide with the helpers of the other test files in the package.

// adNow is the fixed clock of every adapter test proxy, so stored timestamps compare.
var adNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type adEnv struct {
	p    *Proxy
	root *store.Root
	logs *logBuf
}

// newAdEnv is a Proxy without HTTP over a fresh context root, with a fixed clock.
func newAdEnv(t testing.TB, s Settings) *adEnv {
	t.Helper()
	root := openRoot(t)
	logs := &logBuf{}
	p := New(s, allOn{}, root, slog.New(slog.NewTextHandler(logs, nil)))
	p.now = func() time.Time { return adNow }
	return &adEnv{p: p, root: root, logs: logs}
}

func adHeader(sid string) http.Header {
	h := http.Header{}
	if sid != "" {
		h.Set("X-Smarter-Compact-Session-Id", sid)
	}
	return h
}

var (
	adChat      = target{chatFormat, "openai"}
	adResponses = target{responsesFormat, "openai"}
	adCodex     = target{responsesFormat, "codex"}
	adAnthropic = target{anthropicFormat, "anthropic"}
)

// send rewrites one request; force sets the session's .force flag first (store API).
func (e *adEnv) send(t testing.TB, tg target, h http.Header, body []byte, force bool) *rewritten {
	t.Helper()
	if force {
		sid := h.Get("X-Smarter-Compact-Session-Id")
		if sid == "" {
			t.Fatal("force needs the session header")
		}
		must(t, e.root.SetForce(sid))
	}
	res, _, err := e.p.rewriteAs(tg, h, body)
	if err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	return res
}

// The contract's own text (seed 002, cut into testdata by text_test.go's goldens), not
// the constants of text.go: the expected bytes below come from the contract.
func adContractSI(t testing.TB) string {
	b, err := os.ReadFile("testdata/standing_instruction.golden")
	must(t, err)
	return string(b)
}

func adContractPointer(t testing.TB, sid string, n int) string {
	b, err := os.ReadFile("testdata/pointer_ses_.._x_42.golden")
	must(t, err)
	p := strings.ReplaceAll(string(b), "ses_.._x", sid)
	if !strings.Contains(p, "; 42 earlier messages") {
		t.Fatal("pointer golden changed shape")
	}
	return strings.Replace(p, "; 42 earlier messages", "; "+strconv.Itoa(n)+" earlier messages", 1)
}

// adJSONInner escapes s as the inside of a JSON string the minimal way (", \ and control
// characters), written out here rather than taken from the code under test.
func adJSONInner(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&0xf])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

var adPlaceholder = regexp.MustCompile(`\{\{(SI|POINTER (\d+))\}\}`)

// adExpand fills {{SI}} and {{POINTER n}} in a fixture with the contract texts, escaped
// for the inside of a JSON string.
func adExpand(t testing.TB, tmpl, sid string) []byte {
	si := adJSONInner(adContractSI(t))
	out := adPlaceholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		sub := adPlaceholder.FindStringSubmatch(m)
		if sub[1] == "SI" {
			return si
		}
		n, _ := strconv.Atoi(sub[2])
		return adJSONInner(adContractPointer(t, sid, n))
	})
	return []byte(out)
}

func adFixture(t testing.TB, name, sid string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	must(t, err)
	return adExpand(t, string(b), sid)
}

// The placement of the standing instruction and the pointer in the Chat and Responses
// formats (contract: Proxy-inserted text, placement; the decisions of issue 4): each
// fixture request goes through the rewrite, forced to trim where it names a pointer, and
// the forwarded body must equal the hand-built expected bytes exactly. The expected files
// were written by hand from the rules, with the contract's texts filled in; there is no
// -update for them.
func TestOpenAIPlacementGolden(t *testing.T) {
	cases := []struct {
		name  string
		tg    target
		sid   string // session header; "" leaves the id to the body
		want  string // pointer session id when sid is ""
		force bool
	}{
		// Chat: one system message after the leading system/developer messages (index 0
		// without any); pointer as a leading text part, a string content becoming a list.
		{"chat_nosys_string", adChat, "gold-chat-1", "", true},
		// leading system + developer; list content keeps its parts after the pointer;
		// thinking_blocks leave older kept assistant messages, reasoning_content stays, the
		// latest assistant message keeps its thinking_blocks
		{"chat_sys_list_strip", adChat, "gold-chat-2", "", true},
		// first request, before any trim: the instruction after the leading pinned
		// messages only, a later system message stays where it is
		{"chat_first_request", adChat, "gold-chat-3", "", false},
		{"chat_user_first", adChat, "gold-chat-4", "", false},
		// a pinned message that already carries the instruction: nothing is added
		{"chat_si_present", adChat, "gold-chat-5", "", false},

		// Responses: instructions + "\n\n" + SI spliced into the raw string; pointer as a
		// leading input_text part; the kept reply whose reasoning was dropped loses its id,
		// a call whose reasoning is kept keeps it
		{"resp_instructions", adResponses, "gold-resp-1", "", true},
		// no instructions: one developer item after the leading developer items; a string
		// content becomes a list of two input_text parts
		{"resp_noinstr", adResponses, "gold-resp-2", "", true},
		{"resp_empty_instructions", adResponses, "gold-resp-3", "", false},
		// the Codex backend: instructions untouched, a developer item instead; the first
		// turn is the environment-context item plus the prompt item; the session id comes
		// from prompt_cache_key
		{"resp_codex", adCodex, "", "019a-thread", true},
		// a string input goes out as a one-item list
		{"resp_string_input", adResponses, "gold-resp-5", "", false},
		{"resp_string_input_codex", adCodex, "gold-resp-6", "", false},
		// the instruction is already there: nothing is added
		{"resp_si_in_instructions", adResponses, "gold-resp-7", "", false},
		{"resp_si_in_developer_codex", adCodex, "gold-resp-8", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newAdEnv(t, testSettings(10_000_000))
			sid := tc.sid
			if sid == "" {
				sid = tc.want
			}
			in := adFixture(t, "place_"+tc.name+"_in.json", sid)
			want := adFixture(t, "place_"+tc.name+"_out.golden", sid)
			h := adHeader(tc.sid)
			if tc.force {
				must(t, e.root.SetForce(sid))
			}
			res, _, err := e.p.rewriteAs(tc.tg, h, in)
			if err != nil {
				t.Fatalf("rewrite: %v", err)
			}
			wantTrim := int64(0)
			if tc.force {
				wantTrim = 2
			}
			if res.trimmed != wantTrim {
				t.Errorf("trimmed = %d, want %d", res.trimmed, wantTrim)
			}
			if string(res.body()) != string(want) {
				t.Fatalf("forwarded body differs from testdata/place_%s_out.golden\n got: %s\nwant: %s\nfirst difference at byte %d",
					tc.name, res.body(), want, adFirstDiff(res.body(), want))
			}
			if strings.Contains(e.logs.String(), "fail-open") {
				t.Fatalf("fail-open: %s", e.logs.String())
			}
		})
	}
}

func adFirstDiff(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) == len(b) {
		return -1
	}
	return min(len(a), len(b))
}

// The placement is the same on the next request of the session: the carried cut renders
// the pointer and the instruction byte for byte as the trim did (prompt-cache stable), and
// the new messages follow unchanged.
func TestOpenAIPlacementRepeatsAfterTheCut(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		tg          target
	}{
		{"chat_sys_list_strip", `,{"role":"assistant","content":"Done."},{"role":"user","content":"next"}`, adChat},
		{"resp_instructions", `,{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]},{"role":"user","content":"next"}`, adResponses},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newAdEnv(t, testSettings(10_000_000))
			sid := "again-" + tc.name
			in := adFixture(t, "place_"+tc.name+"_in.json", sid)
			first := e.send(t, tc.tg, adHeader(sid), in, true)
			key := `],"tools"`
			if tc.tg.format == responsesFormat {
				key = `],"store"`
			}
			grow := func(b []byte) []byte {
				s := string(b)
				i := strings.LastIndex(s, key)
				if i < 0 {
					t.Fatalf("no %q in %s", key, s)
				}
				return []byte(s[:i] + tc.extra + s[i:])
			}
			second := e.send(t, tc.tg, adHeader(sid), grow(in), false)
			if second.trimmed != 1 {
				t.Fatalf("trimmed = %d, want 1 (carried cut)", second.trimmed)
			}
			if want := grow(first.body()); string(second.body()) != string(want) {
				t.Fatalf("the carried cut renders differently:\n got %s\nwant %s", second.body(), want)
			}
		})
	}
}
