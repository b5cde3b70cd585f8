package installer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The Claude Code hook protocol of the hooks claude.go wires (`smarter-compact hook
// session-start|prompt-submit`): the JSON Claude Code hands a hook on stdin and the answer
// that blocks a prompt.

// hookInputLimit bounds the JSON an agent hands a hook on stdin. Claude Code's hook input is a
// few hundred bytes plus the prompt; a prompt past this is not "/smarter-compact" anyway.
const hookInputLimit = 4 << 20

// ForceCommand is the prompt that forces a trim on the next request (seed 001, "Turn it on
// or off": `/smart-compact` in the seed, `/smarter-compact` here).
const ForceCommand = "/smarter-compact"

// ForceReason is what Claude Code shows the user after a /smarter-compact prompt. The prompt
// itself never reaches the model.
const ForceReason = "smarter-compact: the next request of this session will be trimmed. " +
	"Older turns stay searchable (smart_compact_search); send your next prompt as usual."

// ClaudeHookInput is the part of Claude Code's hook input we read (SessionStart:
// session_id, cwd, hook_event_name, source; UserPromptSubmit adds prompt).
type ClaudeHookInput struct {
	SessionID     string `json:"session_id"`
	Cwd           string `json:"cwd"`
	HookEventName string `json:"hook_event_name"`
	Prompt        string `json:"prompt"`
}

// claudeBlock is Claude Code's UserPromptSubmit output that stops the prompt: the prompt is
// not sent to the model and reason is shown to the user.
type claudeBlock struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
}

// ReadClaudeHookInput decodes the agent's JSON from stdin (nil: none), at most
// hookInputLimit bytes.
func ReadClaudeHookInput(stdin io.Reader) (ClaudeHookInput, error) {
	var in ClaudeHookInput
	if stdin == nil {
		return in, errors.New("no hook input on stdin")
	}
	b, err := io.ReadAll(io.LimitReader(stdin, hookInputLimit+1))
	if err != nil {
		return in, fmt.Errorf("read hook input: %w", err)
	}
	if len(b) > hookInputLimit {
		return in, fmt.Errorf("hook input over %d bytes", hookInputLimit)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, fmt.Errorf("hook input is not the agent's JSON: %w", err)
	}
	return in, nil
}

// WriteClaudeBlock writes the UserPromptSubmit answer that stops the prompt and shows
// reason to the user, {"decision":"block","reason":…}, as one line of JSON without HTML
// escaping.
func WriteClaudeBlock(w io.Writer, reason string) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(claudeBlock{Decision: "block", Reason: reason})
}
