package fakeupstream

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// tooLarge is the 413 the API (Cloudflare in front of it) answers over 32 MB (api-rules §1.1).
func tooLarge() *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: "request_too_large",
		Message: "Request exceeds the maximum allowed number of bytes."} // our text
}

// readRaw reads the body as received, up to one byte over the limit.
func readRaw(r *http.Request, limit int64) ([]byte, *Error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return raw, invalid("The request body could not be read: %v", err) // our text
	}
	return raw, nil
}

// decodeBody holds the body as received to the limit and decodes its Content-Encoding (gzip,
// deflate, br, zstd; checklist §6 items 1 and 3), holding the decoded body to the limit too.
func decodeBody(raw []byte, encoding string, limit int64) ([]byte, *Error) {
	if int64(len(raw)) > limit {
		return nil, tooLarge()
	}
	enc := strings.ToLower(strings.TrimSpace(encoding))
	var dec io.Reader
	switch enc {
	case "", "identity":
		return raw, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, undecodable(enc, err)
		}
		dec = zr
	case "deflate":
		zr, err := zlib.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, undecodable(enc, err)
		}
		dec = zr
	case "br":
		dec = brotli.NewReader(bytes.NewReader(raw))
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, undecodable(enc, err)
		}
		defer zr.Close()
		dec = zr
	default:
		return nil, invalid("Unsupported Content-Encoding: %q", enc) // our text
	}
	decoded, err := io.ReadAll(io.LimitReader(dec, limit+1))
	if err != nil {
		return nil, undecodable(enc, err)
	}
	if int64(len(decoded)) > limit {
		return nil, tooLarge()
	}
	return decoded, nil
}

func undecodable(enc string, err error) *Error {
	return invalid("The request body could not be decoded with Content-Encoding %s: %v", enc, err) // our text
}

// notJSON is the API's parse error: "The request body is not valid JSON: …" (seen in
// anthropics/claude-code#6508, #9586).
func notJSON(detail string) *Error {
	return invalid("The request body is not valid JSON: %s", detail)
}

// parseJSON decodes the body into a JSON object with numbers kept as json.Number. Unlike
// encoding/json it rejects what the API's parser rejects: invalid UTF-8 and unpaired UTF-16
// surrogate escapes (a proxy that cuts a string between the two halves of an escaped pair
// causes "no low surrogate in string").
func parseJSON(body []byte) (map[string]any, *Error) {
	if !utf8.Valid(body) {
		return nil, notJSON("invalid UTF-8")
	}
	if msg, at := unpairedSurrogate(body); msg != "" {
		line, col, char := position(body, at)
		return nil, notJSON(fmt.Sprintf("%s: line %d column %d (char %d)", msg, line, col, char))
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, notJSON(err.Error())
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, notJSON("extra data after the JSON value")
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, invalid("Input should be a valid dictionary") // our text (pydantic wording)
	}
	return doc, nil
}

// unpairedSurrogate finds the first \uD800–\uDFFF escape inside a JSON string that is not
// part of a high+low pair. It returns the Python-style message and the byte offset.
func unpairedSurrogate(b []byte) (string, int) {
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 < len(b) && b[i+1] == 'u' {
				u, ok := hex4(b, i+2)
				switch {
				case !ok:
				case u >= 0xDC00 && u <= 0xDFFF:
					return "invalid high surrogate in string", i
				case u >= 0xD800 && u <= 0xDBFF:
					if i+7 >= len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
						return "no low surrogate in string", i
					}
					lo, ok := hex4(b, i+8)
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return "invalid low surrogate in string", i
					}
					i += 6 // the pair's low half is consumed with it
				}
				i += 5
				continue
			}
			i++ // skip the escaped character
		}
	}
	return "", 0
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}

// position turns a byte offset into a 1-based line and column and a 0-based character index.
func position(b []byte, at int) (line, col, char int) {
	line, col = 1, 1
	for _, r := range string(b[:at]) {
		char++
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col, char
}
