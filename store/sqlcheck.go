package store

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// refusedKeywords are the words the statement check refuses anywhere outside comments, string
// literals and quoted identifiers (contract: SQL step 1). REPLACE is refused only as REPLACE
// INTO, so the replace() function stays usable.
var refusedKeywords = map[string]bool{
	"ATTACH": true, "DETACH": true, "PRAGMA": true, "INSERT": true, "UPDATE": true, "DELETE": true,
	"UPSERT": true, "CREATE": true, "DROP": true, "ALTER": true, "VACUUM": true, "REINDEX": true,
	"ANALYZE": true, "BEGIN": true, "COMMIT": true, "ROLLBACK": true, "SAVEPOINT": true,
	"RELEASE": true, "TRANSACTION": true,
}

const acceptedSQL = "only one read-only SELECT or WITH … SELECT statement is accepted"

// CheckSelect applies the contract's statement check (SQL step 1): nil for one SELECT or
// WITH … SELECT, else an error naming what is refused. Comments, string literals and quoted
// identifiers are blanked first, so words inside them do not count. One trailing ";" (followed
// only by whitespace) is allowed. The check is a first filter; the authorizer on the Reader's
// connections is what enforces read-only.
func CheckSelect(sql string) error {
	_, err := checkSelect(sql)
	return err
}

// checkSelect is CheckSelect that also returns the statement to run: sql without its trailing
// ";" and what follows it (the driver would otherwise run the empty rest as a second
// statement and return its empty result).
func checkSelect(sql string) (string, error) {
	s := blankSQL(sql)
	body, run := strings.TrimRight(s, " \t\r\n\f\v"), sql
	if strings.HasSuffix(body, ";") {
		body = body[:len(body)-1]
		run = sql[:len(body)]
	}
	words := sqlWords(body)
	if len(words) == 0 {
		return "", fmt.Errorf("the statement is empty; %s", acceptedSQL)
	}
	if first := strings.ToUpper(words[0].text); (first != "SELECT" && first != "WITH") || strings.TrimSpace(body[:words[0].start]) != "" {
		return "", fmt.Errorf("the statement starts with %q, not SELECT or WITH; %s", firstToken(body), acceptedSQL)
	}
	if i := strings.IndexByte(body, ';'); i >= 0 {
		return "", fmt.Errorf("\";\" separates statements (only one trailing \";\" is allowed); %s", acceptedSQL)
	}
	for i, w := range words {
		u := strings.ToUpper(w.text)
		if refusedKeywords[u] {
			return "", fmt.Errorf("%s is not allowed; %s", u, acceptedSQL)
		}
		if u == "REPLACE" && i+1 < len(words) && strings.EqualFold(words[i+1].text, "INTO") &&
			strings.TrimSpace(body[w.start+len(w.text):words[i+1].start]) == "" {
			return "", fmt.Errorf("REPLACE INTO is not allowed (the replace() function is); %s", acceptedSQL)
		}
	}
	return run, nil
}

// blankSQL replaces comments (-- to end of line, /* … */), string literals ('…' with ”
// escapes) and quoted identifiers ("…", `…`, […]) with spaces, byte for byte, so positions and
// the words around them stay where they were. An unterminated one is blanked to the end.
func blankSQL(sql string) string {
	b := []byte(sql)
	blank := func(from, to int) {
		for k := from; k < to; k++ {
			b[k] = ' '
		}
	}
	for i := 0; i < len(b); {
		switch c := b[i]; {
		case c == '-' && i+1 < len(b) && b[i+1] == '-':
			j := strings.IndexByte(sql[i:], '\n')
			end := len(b)
			if j >= 0 {
				end = i + j
			}
			blank(i, end)
			i = end
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			j := strings.Index(sql[i+2:], "*/")
			end := len(b)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			blank(i, end)
			i = end
		case c == '\'' || c == '"' || c == '`':
			end := closeQuote(sql, i, c)
			blank(i, end)
			i = end
		case c == '[':
			end := len(b)
			if j := strings.IndexByte(sql[i+1:], ']'); j >= 0 {
				end = i + 1 + j + 1
			}
			blank(i, end)
			i = end
		default:
			i++
		}
	}
	return string(b)
}

// closeQuote returns the index after the quote q that closes the literal opened at i; a
// doubled quote is an escaped one.
func closeQuote(s string, i int, q byte) int {
	for j := i + 1; j < len(s); j++ {
		if s[j] == q {
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(s)
}

type sqlWord struct {
	text  string
	start int
}

// sqlWords splits s into identifier-like words (letters, digits, _, $ and any non-ASCII code
// point, the characters SQLite allows in a bare identifier).
func sqlWords(s string) []sqlWord {
	var words []sqlWord
	start := -1
	for i := 0; i <= len(s); {
		isWord := false
		size := 1
		if i < len(s) {
			c := s[i]
			if c >= utf8.RuneSelf {
				_, size = utf8.DecodeRuneInString(s[i:])
				isWord = true
			} else {
				isWord = c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
			}
		}
		switch {
		case isWord && start < 0:
			start = i
		case !isWord && start >= 0:
			words = append(words, sqlWord{text: s[start:i], start: start})
			start = -1
		}
		i += size
	}
	return words
}

// firstToken is the statement's first non-space run, for the error message.
func firstToken(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	t := f[0]
	if utf8.RuneCountInString(t) > 20 {
		r := []rune(t)
		t = string(r[:20]) + "…"
	}
	return t
}
