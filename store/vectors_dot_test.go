package store

import (
	"math/rand/v2"
	"testing"
)

// TestDot8MatchesGo: the kernel dot8 picks (AVX2 on most amd64) gives dot8Go's integers for
// every length, at the extreme codes and on random ones.
func TestDot8MatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, n := range []int{0, 1, 15, 16, 17, 48, 64, 80, 128, 768, 784, 4096} {
		q, c := make([]int16, n), make([]int8, n)
		for round := range 20 {
			for i := range c {
				switch round {
				case 0:
					q[i], c[i] = 127, 127
				case 1:
					q[i], c[i] = -127, 127
				case 2:
					q[i], c[i] = -127, -128
				default:
					q[i], c[i] = int16(rng.IntN(255)-127), int8(rng.IntN(256)-128)
				}
			}
			var want int64
			for i := range c {
				want += int64(q[i]) * int64(c[i])
			}
			if got := dot8Go(q, c); int64(got) != want {
				t.Fatalf("n %d round %d: dot8Go %d, want %d", n, round, got, want)
			}
			if got := dot8(q, c); int64(got) != want {
				t.Fatalf("n %d round %d: dot8 %d, want %d (avx2 %v)", n, round, got, want, hasAVX2)
			}
		}
	}
}
