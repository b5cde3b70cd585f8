#include "textflag.h"

// func dot8AVX2(q *int16, c *int8, n int) int32
// n is a multiple of 16. Four accumulators of 8 int32 lanes, 64 components a round.
TEXT ·dot8AVX2(SB), NOSPLIT, $0-28
	MOVQ q+0(FP), DI
	MOVQ c+8(FP), SI
	MOVQ n+16(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	CMPQ CX, $64
	JB   tail

round:
	VPMOVSXBW (SI), Y4
	VPMOVSXBW 16(SI), Y5
	VPMOVSXBW 32(SI), Y6
	VPMOVSXBW 48(SI), Y7
	VPMADDWD  (DI), Y4, Y4
	VPMADDWD  32(DI), Y5, Y5
	VPMADDWD  64(DI), Y6, Y6
	VPMADDWD  96(DI), Y7, Y7
	VPADDD    Y4, Y0, Y0
	VPADDD    Y5, Y1, Y1
	VPADDD    Y6, Y2, Y2
	VPADDD    Y7, Y3, Y3
	ADDQ      $64, SI
	ADDQ      $128, DI
	SUBQ      $64, CX
	CMPQ      CX, $64
	JAE       round

tail:
	CMPQ      CX, $16
	JB        sum
	VPMOVSXBW (SI), Y4
	VPMADDWD  (DI), Y4, Y4
	VPADDD    Y4, Y0, Y0
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	JMP       tail

sum:
	VPADDD       Y1, Y0, Y0
	VPADDD       Y3, Y2, Y2
	VPADDD       Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPADDD       X1, X0, X0
	VMOVD        X0, AX
	VZEROUPPER
	MOVL         AX, ret+24(FP)
	RET
