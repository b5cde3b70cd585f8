package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	"github.com/smarter-compact/smarter-compact/store"
)

// sessionID picks the session id by the contract's five sources (contract: Session id),
// each sanitized; it returns "" when none yields one.
func sessionID(h interface{ Get(string) string }, req *request) string {
	sid, _ := sessionIDSource(h, req)
	return sid
}

// sessionIDSource is sessionID and the source it came from: a header name, "metadata",
// or "prompt_cache_key". After the contract's headers (session_id, x-session-id,
// conversation_id) it also reads session-id and thread-id, which Codex sends with the
// value of its prompt_cache_key.
func sessionIDSource(h interface{ Get(string) string }, req *request) (string, string) {
	if sid, source := headerSessionID(h); sid != "" {
		return sid, source
	}
	if sid := metadataSessionID(req.metadata); sid != "" {
		return sid, "metadata"
	}
	if sid, ok := store.SanitizeSID(req.promptCacheKey); ok {
		return sid, "prompt_cache_key"
	}
	for _, name := range laterSIDHeaders {
		if sid, ok := store.SanitizeSID(h.Get(name)); ok {
			return sid, strings.ToLower(name)
		}
	}
	return "", ""
}

// laterSIDHeaders are source 5 of the contract, then Codex's session-id and thread-id.
var laterSIDHeaders = []string{"Session_id", "X-Session-Id", "Conversation_id", "Session-Id", "Thread-Id"}

// hintSessionID guesses the session from headers alone, to find its previous request
// before the body is parsed (fast path); the body may still name another session.
func hintSessionID(h interface{ Get(string) string }) string {
	for _, name := range laterSIDHeaders {
		if sid, ok := store.SanitizeSID(h.Get(name)); ok {
			return sid
		}
	}
	return ""
}

// headerSessionID is the session id from the first two sources: our header, then Claude
// Code's.
func headerSessionID(h interface{ Get(string) string }) (sid, source string) {
	for _, name := range []string{"X-Smarter-Compact-Session-Id", "X-Claude-Code-Session-Id"} {
		if sid, ok := store.SanitizeSID(h.Get(name)); ok {
			return sid, strings.ToLower(name)
		}
	}
	return "", ""
}

var legacyUserID = regexp.MustCompile(`_session_([0-9A-Za-z-]{8,})$`)

// metadataSessionID reads metadata.user_id: the JSON form's session_id, then the legacy
// user_<hex>_account_<uuid>_session_<id> form.
func metadataSessionID(meta []byte) string {
	if kindOf(meta) != '{' {
		return ""
	}
	fields, err := objectMembers(meta)
	if err != nil {
		return ""
	}
	for _, f := range fields {
		if f.key != "user_id" || kindOf(f.val) != '"' {
			continue
		}
		uid, _ := decodeString(f.val)
		if strings.HasPrefix(strings.TrimSpace(uid), "{") {
			if inner, err := objectMembers([]byte(uid)); err == nil {
				for _, g := range inner {
					if g.key == "session_id" && kindOf(g.val) == '"' {
						s, _ := decodeString(g.val)
						if sid, ok := store.SanitizeSID(s); ok {
							return sid
						}
					}
				}
			}
		}
		if m := legacyUserID.FindStringSubmatch(uid); m != nil {
			if sid, ok := store.SanitizeSID(m[1]); ok {
				return sid
			}
		}
	}
	return ""
}

// fallbackSessionID is fp-<first 16 hex of SHA-256(system prompt + first user message)>,
// over the system text blocks joined by newlines and the first user message's row texts
// joined by newlines.
func fallbackSessionID(req *request, msgs []*message) string {
	h := sha256.New()
	if req.format == anthropicFormat || req.system != nil {
		h.Write([]byte(systemText(req.system)))
	}
	if req.format != anthropicFormat {
		// Chat and Responses carry the system prompt as pinned messages
		for _, m := range msgs {
			if m.pinned && m.contentAt >= 0 {
				t, _ := partsText(m.memberVal(m.contentAt))
				h.Write([]byte(t))
			}
		}
	}
	for _, m := range msgs {
		if m.role == "user" {
			for i, r := range m.rows {
				if i > 0 {
					h.Write([]byte{'\n'})
				}
				h.Write([]byte(r.text))
			}
			break
		}
	}
	return "fp-" + hex.EncodeToString(h.Sum(nil))[:16]
}

func systemText(system []byte) string {
	switch kindOf(system) {
	case '"':
		s, _ := decodeString(system)
		return s
	case '[':
		elems, err := arrayElems(system)
		if err != nil {
			return ""
		}
		parts := make([]string, 0, len(elems))
		for _, e := range elems {
			if t, typ, err := textBlock(e); err == nil && typ == "text" {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}
