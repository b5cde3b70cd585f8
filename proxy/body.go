package proxy

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// maxBody bounds a request body the proxy reads to rewrite; a larger one is forwarded as
// it came (the Messages API itself stops at 32 MB, api-rules §1.1).
const maxBody = 64 << 20

// bufferBody reads a pass-through request body of up to maxBody bytes into memory before
// it goes upstream, byte for byte and with its headers untouched. Streamed straight from
// the incoming connection, an upstream that answers before the transport has read the body
// to its end (an early error, a stream that starts at once) lost its answer mid-stream: Go's
// HTTP/1 server drains or closes an unread request body when the response starts, the
// transport's body copy then fails, and the transport drops the upstream connection
// (found by make bench; TestPassThroughEarlyAnswerArrivesWhole). Full duplex is no cure:
// the transport may still read the body after the handler returned, which the server
// forbids. A body over maxBody streams as before, with that risk; none is expected from a
// model API client.
func bufferBody(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	raw, err := readBody(r)
	if err != nil {
		r.Body.Close()
		return err
	}
	if len(raw) > maxBody {
		streamRest(r, raw)
		return nil
	}
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(raw))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
	if r.ContentLength < 0 {
		// the upstream gets the same bytes with a length instead of chunks
		r.ContentLength = int64(len(raw))
		r.TransferEncoding = nil
	}
	return nil
}

// streamRest makes r's body the head already read followed by the rest as it comes.
func streamRest(r *http.Request, head []byte) {
	rest := r.Body
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), rest), rest}
	r.GetBody = nil
}

// readBody reads up to maxBody+1 bytes of r's body into one buffer sized from
// Content-Length when it is known (io.ReadAll's doubling copied a 1 MB body about ten
// times and left twice its size for the GC).
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength <= 0 || r.ContentLength > maxBody {
		return io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	}
	buf := make([]byte, r.ContentLength+1) // one byte more sees a body longer than announced
	n, err := io.ReadFull(r.Body, buf)
	switch {
	case err == io.ErrUnexpectedEOF && int64(n) == r.ContentLength:
		return buf[:n], nil
	case err == nil:
		// more than announced: the server's body reader does not allow it, but be safe
		rest, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1-int64(n)))
		return append(buf[:n], rest...), err
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return nil, fmt.Errorf("the body ended after %d of %d bytes", n, r.ContentLength)
	}
	return nil, err
}

// decodeBody undoes a request Content-Encoding (gzip, zstd, br; DESIGN.md §4.3).
func decodeBody(raw []byte, encoding string) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "", "identity":
		return raw, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(io.LimitReader(zr, maxBody))
	case "zstd":
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxBody))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		return d.DecodeAll(raw, nil)
	case "br":
		return io.ReadAll(io.LimitReader(brotli.NewReader(bytes.NewReader(raw)), maxBody))
	}
	return nil, fmt.Errorf("unsupported Content-Encoding %q", encoding)
}

// zstdEncoder re-encodes rewritten bodies that came zstd-encoded; EncodeAll is safe for
// concurrent use.
var zstdEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
