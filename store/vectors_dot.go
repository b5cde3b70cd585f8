package store

// dot8Go is q·c over the first len(c) components, in int32: the portable kernel of dot8, and
// its reference in tests. Exact for len(c) ≤ 2¹⁷ (|qᵢcᵢ| ≤ 127², the sum stays in int32).
func dot8Go(q []int16, c []int8) int32 {
	q = q[:len(c)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+4 <= len(c); i += 4 {
		s0 += int32(q[i]) * int32(c[i])
		s1 += int32(q[i+1]) * int32(c[i+1])
		s2 += int32(q[i+2]) * int32(c[i+2])
		s3 += int32(q[i+3]) * int32(c[i+3])
	}
	for ; i < len(c); i++ {
		s0 += int32(q[i]) * int32(c[i])
	}
	return s0 + s1 + s2 + s3
}
