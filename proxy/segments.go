package proxy

import (
	"bytes"
	"io"
	"net"
	"unsafe"
)

// segments is a request body as it goes upstream: spans of the body the client sent
// (base) and the few bytes the proxy inserts, in order (issue 18, item 1: no second copy
// of the body on the way out). A span that continues where the last one ended extends it,
// and a separator or bracket the body has at that place is taken from the body, so the
// compact JSON coding agents send becomes a handful of parts whatever its length: a warm
// Claude Code request of 400 messages is about five.
//
// The parts point into base, which must not change until the upstream has read them
// (the request's body is not reused: readBody allocates it, and nothing writes to it).
type segments struct {
	base  []byte
	parts [][]byte
	n     int // total bytes
	// s, e: the open span of base, extended until something else is written; s < 0 when
	// there is none.
	s, e int
	// scratch holds inserted literals; parts keep subslices of it (a reallocation leaves
	// the earlier ones on the old array, whose bytes do not change).
	scratch []byte
}

func newSegments(base []byte) *segments { return &segments{base: base, s: -1} }

// offset returns where b lies in base, or false when b is not a subslice of it.
func (w *segments) offset(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > len(w.base) {
		return 0, false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	q := uintptr(unsafe.Pointer(unsafe.SliceData(w.base)))
	if p < q || p-q > uintptr(len(w.base)-len(b)) {
		return 0, false
	}
	return int(p - q), true
}

// span writes base[s:e].
func (w *segments) span(s, e int) {
	if s >= e {
		return
	}
	if w.s >= 0 && s == w.e {
		w.e = e
		return
	}
	w.flush()
	w.s, w.e = s, e
}

// grow extends the open span to e when it ends at from, and reports whether it did.
func (w *segments) grow(from, e int) bool {
	if w.s < 0 || w.e != from {
		return false
	}
	w.e = e
	return true
}

// flush closes the open span into parts.
func (w *segments) flush() {
	if w.s < 0 {
		return
	}
	w.parts = append(w.parts, w.base[w.s:w.e:w.e])
	w.n += w.e - w.s
	w.s = -1
}

// write writes b: a span when b is part of base, else a copy of it.
func (w *segments) write(b []byte) {
	if len(b) == 0 {
		return
	}
	if off, ok := w.offset(b); ok {
		w.span(off, off+len(b))
		return
	}
	w.literal(b)
}

// literal writes a copy of b, unless base holds the same bytes right where the open span
// ends (a comma or a bracket of the client's own list), which then extends the span.
func (w *segments) literal(b []byte) {
	if w.s >= 0 && bytes.HasPrefix(w.base[w.e:], b) {
		w.e += len(b)
		return
	}
	w.flush()
	start := len(w.scratch)
	w.scratch = append(w.scratch, b...)
	w.parts = append(w.parts, w.scratch[start:len(w.scratch):len(w.scratch)])
	w.n += len(b)
}

func (w *segments) str(s string) { w.literal(unsafe.Slice(unsafe.StringData(s), len(s))) }

// done closes the open span; the parts are complete.
func (w *segments) done() *segments {
	w.flush()
	return w
}

// len is the body's length in bytes.
func (w *segments) len() int { return w.n }

// bytes returns the body as one slice (a copy, unless it is one part).
func (w *segments) bytes() []byte {
	switch len(w.parts) {
	case 0:
		return []byte{}
	case 1:
		return w.parts[0]
	}
	return bytes.Join(w.parts, nil)
}

// reader returns a reader of the body; each call starts from its beginning. It writes
// the parts with WriterTo, so the transport copies each part once into its buffer.
func (w *segments) reader() io.Reader {
	b := make(net.Buffers, len(w.parts))
	copy(b, w.parts)
	return &b
}

// segList writes the elements of a JSON array, a comma before each but the first; n
// counts them. The caller writes the brackets.
type segList struct {
	w *segments
	n int
}

func (l *segList) add(v []byte) {
	if l.n > 0 {
		l.w.str(",")
	}
	l.w.write(v)
	l.n++
}

// spliceObjectSegs is spliceObject onto segments: obj's bytes (obj is w's base or a span of
// it) with the values of the members in repl replaced, member at's value written by fill
// (at < 0: none), and before, when not nil, written before obj's closing brace (a member
// added at the end).
// A replaced value is its pieces, written in order.
func spliceObjectSegs(w *segments, obj []byte, mem []member, repl map[int][][]byte, at int, fill func(*segments), before []byte) {
	last := 0
	for i, m := range mem {
		v, ok := repl[i]
		if !ok && i != at {
			continue
		}
		w.write(obj[last:m.vs])
		if i == at {
			fill(w)
		} else {
			for _, piece := range v {
				w.write(piece)
			}
		}
		last = m.end
	}
	if before == nil {
		w.write(obj[last:])
		return
	}
	end := bytes.LastIndexByte(obj, '}') // obj is an object: its closing brace follows every member
	if end < last {
		end = len(obj) // not an object after all: before goes at the end
	}
	w.write(obj[last:end])
	w.literal(before)
	w.write(obj[end:])
}
