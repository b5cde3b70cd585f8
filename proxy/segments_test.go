package proxy

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
)

// TestSegmentsWriteWhatIsGiven: random sequences of writes (spans of the base, copies of
// base bytes that are not spans of it, literals that repeat the base where the open span
// ends, other literals) give exactly the concatenation of what was written, through bytes()
// and through every reader(), and a run of contiguous spans is one part.
func TestSegmentsWriteWhatIsGiven(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for iter := range 2000 {
		base := make([]byte, 1+rng.IntN(300))
		for i := range base {
			base[i] = "[],{}ab"[rng.IntN(7)]
		}
		w := newSegments(base)
		var want []byte
		pos := 0 // where a contiguous span would start
		for range rng.IntN(12) {
			switch rng.IntN(4) {
			case 0: // the span that continues the last one, or any span
				s := pos
				if rng.IntN(2) == 0 {
					s = rng.IntN(len(base))
				}
				if s >= len(base) {
					continue
				}
				e := s + rng.IntN(len(base)-s+1)
				w.write(base[s:e])
				want = append(want, base[s:e]...)
				pos = e
			case 1: // the same bytes, not in base
				s := rng.IntN(len(base))
				e := s + rng.IntN(len(base)-s+1)
				c := bytes.Clone(base[s:e])
				w.write(c)
				want = append(want, c...)
			case 2: // a literal that is what base holds next
				if pos < len(base) {
					lit := string(base[pos : pos+1])
					w.str(lit)
					want = append(want, lit...)
				}
			default:
				lit := []string{",", "]", "[", "xyz"}[rng.IntN(4)]
				w.str(lit)
				want = append(want, lit...)
			}
		}
		w.done()
		if got := w.bytes(); !bytes.Equal(got, want) {
			t.Fatalf("iteration %d: bytes() = %q, want %q", iter, got, want)
		}
		if w.len() != len(want) {
			t.Fatalf("iteration %d: len() = %d, want %d", iter, w.len(), len(want))
		}
		for range 2 {
			got, err := io.ReadAll(w.reader())
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("iteration %d: reader gave %q, %v; want %q", iter, got, err, want)
			}
		}
	}
	base := []byte(`{"a":[1,2,3]}`)
	w := newSegments(base)
	w.write(base[:5])
	w.str("[")
	w.write(base[6:7])
	w.str(",")
	w.write(base[8:13])
	if w.done(); len(w.parts) != 1 {
		t.Fatalf("contiguous writes make %d parts, want 1: %q", len(w.parts), w.parts)
	}
}

// TestWarmViewSpansTheBody: a warm Claude Code request (about 400 messages) goes out as a
// few spans of its own body: the standing instruction and the brackets around it are the
// only bytes the view copies (issue 18, item 1), with or without a carried cut.
func TestWarmViewSpansTheBody(t *testing.T) {
	for _, cut := range []bool{false, true} {
		p := benchProxy(t, 10_000_000)
		c := convoOfSize()
		h := benchHeader("segments")
		if cut {
			p.cfg().TrimAtTokens = 1000
			if res, _, err := p.rewriteAs(anthropicBench, h, c.Body()); err != nil || res.trimmed != 2 {
				t.Fatalf("no cut: %v", err)
			}
			p.cfg().TrimAtTokens = 10_000_000
		} else if _, _, err := p.rewriteAs(anthropicBench, h, c.Body()); err != nil {
			t.Fatal(err)
		}
		c.Add()
		body := c.Body()
		res, _, err := p.rewriteAs(anthropicBench, h, body)
		if err != nil {
			t.Fatal(err)
		}
		copied := 0
		for _, part := range res.out.parts {
			if _, ok := res.out.offset(part); !ok {
				copied += len(part)
			}
		}
		limit, parts := len(textBlockJSON(StandingInstruction))+16, 12
		if cut {
			limit += 2048 // the pointer and the message it leads
			parts = 40    // and a span on each side of every run of dropped messages
		}
		if copied > limit || len(res.out.parts) > parts {
			t.Fatalf("cut %v: the view of a %d-byte body has %d parts and copies %d bytes (limit %d)",
				cut, len(body), len(res.out.parts), copied, limit)
		}
	}
}
