package store

import "golang.org/x/sys/cpu"

// hasAVX2 selects dot8AVX2 (AVX2 is on every x86-64 since Haswell, 2013; not on every one).
var hasAVX2 = cpu.X86.HasAVX2

// dot8AVX2 is dot8Go(q[:n], c[:n]) for n a multiple of 16, 16 components an instruction
// (sign-extend c to int16, VPMADDWD, add in int32 lanes): integers, so the result is the same.
//
//go:noescape
func dot8AVX2(q *int16, c *int8, n int) int32

// dot8 is q·c in int32 (len(q) ≥ len(c), len(c) a multiple of 16 for the fast kernel).
func dot8(q []int16, c []int8) int32 {
	if hasAVX2 && len(c)%16 == 0 && len(c) > 0 {
		_ = q[len(c)-1]
		return dot8AVX2(&q[0], &c[0], len(c))
	}
	return dot8Go(q, c)
}
