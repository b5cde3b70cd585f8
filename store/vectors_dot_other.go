//go:build !amd64

package store

// hasAVX2 is amd64's; other architectures run dot8Go.
const hasAVX2 = false

// dot8 is q·c in int32 (len(q) ≥ len(c)).
func dot8(q []int16, c []int8) int32 { return dot8Go(q, c) }
