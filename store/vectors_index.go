package store

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
)

// Vector index (contract: Search, hybrid): the vectors of one model and dimension of a
// session, decoded once into memory beside the pooled reader and kept current from the
// vectors table, so a hybrid search computes its cosines without reading and decoding every
// blob again. The contract's tables are unchanged; the index is a cache of them.
//
// Rows are never deleted from vectors but by PutVectors' INSERT OR REPLACE, and SQLite picks
// the new row's rowid (one above the largest, sqlite.org/autoinc.html) before REPLACE deletes
// the row it conflicts with: every vector written, a replaced one (the embedder giving up on a
// row) included, gets a rowid above all the table had (TestVectorRowidsOnlyGrow pins it). So a
// refresh reads the rows from the highest rowid seen on and overwrites by seq; it reads that
// row again too, which would keep it right if a replace of the last row reused its rowid.
//
// The ranking is exactly the brute force's: a first pass scores every row from 8-bit codes of
// the vectors and the query (a quarter of the bytes of float32, integer dot products), each
// within a bound of the exact float64 cosine proven per row (quantized below); the rows whose
// bound can still reach the k nearest are scored again exactly as before, and only those exact
// scores rank.

// vectorIndex is a pooled reader's decoded vectors of one (model, dim). Guarded by mu.
type vectorIndex struct {
	mu        sync.Mutex
	model     string
	dim       int
	lastRowid int64            // highest vectors rowid read; 0 before the first load
	slot      map[int64]int    // seq → slot
	seqs      []int64          // per slot; the slot of a vector no longer usable keeps its seq but norm 0
	roles     []int32          // per slot: the message's role, an index into roleNames
	roleNames []string         // the roles seen
	roleIDs   map[string]int32 // roleNames' indexes
	norms     []float64        // per slot: sqrt of Σ x², as the brute force computes it; 0 = skip
	vecs      []float32        // dim values per slot
	codes     []int8           // stride codes per slot (quantize); the padding is 0
	quant     []quantized      // per slot: how its codes stand for its vector
	scratch   []float64        // per slot: the first pass's upper bound of the cosine
	qcodes    []int16          // the query's codes, stride of them, widened for dot8
	qcodes8   []int8           // the query's codes as quantize writes them
	roleWant  []bool           // per role index: under the search's roles filter
	mem       memEntry         // its place in the search memory budget (search_memory.go)
}

// quantized is how a slot's codes c stand for its vector x (norm ‖x‖): x ≈ x̃ = s·c.
type quantized struct {
	scale  float64 // s / ‖x‖
	resid  float64 // ‖x − x̃‖ / ‖x‖; +Inf for a vector with a component not finite (always a candidate)
	approx float64 // ‖x̃‖ / ‖x‖
}

// codeStride is the codes a slot takes for dim components: dim rounded up to the AVX2
// kernel's 16.
func codeStride(dim int) int { return (dim + 15) &^ 15 }

// vectorSlotBytes is what a slot takes besides its vector and codes: seq, role, norm,
// quantized, scratch and its entry in slot, about.
const vectorSlotBytes = 8 + 4 + 8 + 24 + 8 + 40

// vectorIndex returns the reader's vector index for (model, dim), refreshed from the vectors
// table, and accounted in the search memory budget: an index past the whole budget serves
// this search and is let go. The caller holds the returned index's mu.

func (sr *sharedReader) vectorIndex(ctx context.Context, db conn, model string, dim int) (*vectorIndex, error) {
	sr.vimu.Lock()
	vi, old := sr.vectors, (*vectorIndex)(nil)
	if vi == nil || vi.model != model || vi.dim != dim {
		old, vi = vi, &vectorIndex{model: model, dim: dim, slot: map[int64]int{}, roleIDs: map[string]int32{}}
		sr.vectors = vi
	}
	sr.vimu.Unlock()
	if old != nil {
		searchMem.forget(&old.mem)
	}
	vi.mu.Lock()
	if err := vi.refresh(ctx, db); err != nil {
		vi.mu.Unlock()
		return nil, err
	}
	drop := func() {
		sr.vimu.Lock()
		if sr.vectors == vi {
			sr.vectors = nil
		}
		sr.vimu.Unlock()
	}
	if !searchMem.use(&vi.mem, int64(4*len(vi.vecs)+len(vi.codes)+vectorSlotBytes*len(vi.seqs)), drop) {
		drop()
	}
	return vi, nil
}

// refresh reads the vectors of vi's model stored since the last refresh.
func (vi *vectorIndex) refresh(ctx context.Context, db conn) error {
	rows, err := db.QueryContext(ctx, "SELECT v.rowid, v.message_seq, v.dim, v.blob, m.role FROM vectors v JOIN messages m ON m.seq = v.message_seq "+
		"WHERE v.model = ? AND v.rowid >= ? ORDER BY v.rowid", vi.model, vi.lastRowid)
	if err != nil {
		return fmt.Errorf("read vectors: %w", err)
	}
	defer rows.Close()
	var blob []byte
	stride := codeStride(vi.dim)
	for rows.Next() {
		var rowid, seq int64
		var dim int
		var role string
		if err := rows.Scan(&rowid, &seq, &dim, &blob, &role); err != nil {
			return fmt.Errorf("read vectors: %w", err)
		}
		vi.lastRowid = max(vi.lastRowid, rowid)
		i, ok := vi.slot[seq]
		usable := dim == vi.dim && len(blob) == 4*vi.dim
		if !ok {
			if !usable {
				continue
			}
			i = len(vi.seqs)
			vi.slot[seq] = i
			vi.seqs = append(vi.seqs, seq)
			vi.roles = append(vi.roles, 0)
			vi.norms = append(vi.norms, 0)
			vi.quant = append(vi.quant, quantized{})
			vi.vecs = slices.Grow(vi.vecs, vi.dim)[:len(vi.vecs)+vi.dim]
			vi.codes = slices.Grow(vi.codes, stride)[:len(vi.codes)+stride]
		}
		vi.roles[i] = vi.roleOf(role)
		vi.norms[i] = 0
		if !usable {
			continue
		}
		v := vi.vecs[i*vi.dim : (i+1)*vi.dim]
		var n float64
		for k := range v {
			v[k] = math.Float32frombits(binary.LittleEndian.Uint32(blob[4*k:]))
			x := float64(v[k])
			n += x * x
		}
		vi.norms[i] = math.Sqrt(n)
		vi.quant[i] = quantize(v, vi.norms[i], vi.codes[i*stride:(i+1)*stride])
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read vectors: %w", err)
	}
	return nil
}

// roleOf is the index of role in vi.roleNames, added when new.
func (vi *vectorIndex) roleOf(role string) int32 {
	if i, ok := vi.roleIDs[role]; ok {
		return i
	}
	vi.roleIDs[role] = int32(len(vi.roleNames))
	vi.roleNames = append(vi.roleNames, role)
	return int32(len(vi.roleNames) - 1)
}

// internRole shares the strings of the contract's roles between slots.
func internRole(r string) string {
	switch r {
	case "user":
		return "user"
	case "assistant":
		return "assistant"
	case "tool":
		return "tool"
	}
	return r
}

// quantize writes x's codes (xᵢ/s rounded, s = max|xᵢ|/127, each in [−127, 127]) to c,
// zeroing c past len(x), and returns how they stand for x of norm n (n > 0). A vector with a
// component not finite gets resid +Inf: no bound holds for it, so it is always scored exactly.
func quantize[T float32 | float64](x []T, n float64, c []int8) quantized {
	clear(c)
	if n == 0 || math.IsInf(n, 0) || math.IsNaN(n) { // n is not finite when a component is not
		return quantized{resid: math.Inf(1)}
	}
	var m float64
	for _, f := range x {
		if a := math.Abs(float64(f)); a > m {
			m = a
		}
	}
	s, inv := m/127, 127/m
	var r2, a2 float64
	for i, f := range x {
		// Any rounding serves: the bound is measured from the codes written. RoundToEven is an
		// instruction on amd64; Round and a division per component made this a third of the
		// index's first load.
		k := math.RoundToEven(float64(f) * inv)
		if k > 127 {
			k = 127
		} else if k < -127 {
			k = -127
		}
		c[i] = int8(k)
		a := s * k
		d := float64(f) - a
		r2 += d * d
		a2 += a * a
	}
	return quantized{scale: s / n, resid: math.Sqrt(r2) / n, approx: math.Sqrt(a2) / n}
}

// exact is the brute force's cosine of q (norm qn) and slot i, computed the same way.
func (vi *vectorIndex) exact(q []float32, qn float64, i int) float64 {
	v := vi.vecs[i*vi.dim : (i+1)*vi.dim]
	var dot float64
	for k, f := range q {
		x := float64(v[k])
		dot += float64(f) * x
	}
	return dot / (qn * vi.norms[i])
}

// quantSlack bounds the float64 rounding of a first-pass bound and of the brute force's own
// cosine for dim components (each within a few dim·2⁻⁵³ of the real value; far below this).
func quantSlack(dim int) float64 { return float64(dim+16) * 0x1p-40 }

// nearest returns the k rows nearest to o.QueryVector by cosine among o.VectorModel's vectors
// of its dimension under the filters, best first (ties: higher seq first), and the cosine of
// each of them and of each row of also that is under the filters with such a vector. It ranks
// exactly as a brute-force float64 scan of every vector does.
func nearest(ctx context.Context, db conn, o SearchOptions, k int, also []int64) ([]int64, map[int64]float64, error) {
	q := o.QueryVector
	var qn float64
	for _, f := range q {
		qn += float64(f) * float64(f)
	}
	if qn == 0 || k <= 0 {
		return nil, nil, nil
	}
	qn = math.Sqrt(qn)
	// in_context changes after rows are stored, so it is read per search (only when asked for).
	var inContext map[int64]bool
	if o.InContext != nil {
		var err error
		if inContext, err = inContextSeqs(ctx, db, *o.InContext); err != nil {
			return nil, nil, fmt.Errorf("scan vectors: %w", err)
		}
	}
	vi, err := db.sr.vectorIndex(ctx, db, o.VectorModel, len(q))
	if err != nil {
		return nil, nil, fmt.Errorf("scan vectors: %w", err)
	}
	defer vi.mu.Unlock()
	vi.roleWant = slices.Grow(vi.roleWant[:0], len(vi.roleNames))[:len(vi.roleNames)]
	for j, r := range vi.roleNames {
		vi.roleWant[j] = len(o.Roles) == 0 || slices.Contains(o.Roles, r)
	}
	keep := func(i int) bool {
		return vi.norms[i] != 0 && vi.roleWant[vi.roles[i]] && (inContext == nil || inContext[vi.seqs[i]])
	}

	// The query's codes d (q ≈ q̃ = t·d). For a slot's x ≈ x̃ = s·c, q·x = t·s·(d·c) +
	// q·(x − x̃) + (q − q̃)·x̃, so by Cauchy–Schwarz its cosine is within
	// ‖x − x̃‖/‖x‖ + (‖q − q̃‖/‖q‖)·(‖x̃‖/‖x‖) of t·s·(d·c)/(‖q‖‖x‖); d·c is an exact integer.
	stride := codeStride(vi.dim)
	vi.qcodes = slices.Grow(vi.qcodes[:0], stride)[:stride]
	vi.qcodes8 = slices.Grow(vi.qcodes8[:0], stride)[:stride]
	qq := quantize(q, qn, vi.qcodes8)
	for j, c := range vi.qcodes8 {
		vi.qcodes[j] = int16(c)
	}
	t := qq.scale // t/‖q‖
	qres := qq.resid
	slack := quantSlack(vi.dim)

	// First pass: every kept row's bounds from its codes, and the k best lower bounds, in
	// parts run at once. scratch holds each row's upper bound (NaN: not kept).
	n := len(vi.seqs)
	vi.scratch = slices.Grow(vi.scratch[:0], n)[:n]
	upper := vi.scratch
	parts := min(runtime.GOMAXPROCS(0), max(n/4096, 1), 8)
	tops := make([][]float64, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := n*p/parts, n*(p+1)/parts
		wg.Go(func() {
			top := make([]float64, 0, k+1) // ascending
			for i := lo; i < hi; i++ {
				if !keep(i) {
					upper[i] = math.NaN()
					continue
				}
				qi := &vi.quant[i]
				a := t * qi.scale * float64(dot8(vi.qcodes, vi.codes[i*stride:(i+1)*stride]))
				b := qi.resid + qres*qi.approx + slack
				if math.IsNaN(b) { // a query or vector not finite: only the exact cosine says
					a, b = 0, math.Inf(1)
				}
				upper[i] = a + b
				if s := a - b; len(top) < k || s > top[0] {
					j, _ := slices.BinarySearch(top, s)
					top = slices.Insert(top, j, s)
					if len(top) > k {
						top = top[1:]
					}
				}
			}
			tops[p] = top
		})
	}
	wg.Wait()
	top := slices.Concat(tops...)
	slices.Sort(top)
	top = top[max(len(top)-k, 0):]
	// floor is the k-th best lower bound: k rows score at least it exactly, so a row whose
	// upper bound is below it has k rows strictly nearer and is not among the k nearest.
	floor := math.Inf(-1)
	if len(top) == k {
		floor = top[0]
	}
	type scored struct {
		seq int64
		sim float64
	}
	var cands []scored
	for i := range n {
		if upper[i] >= floor { // false for NaN

			cands = append(cands, scored{vi.seqs[i], vi.exact(q, qn, i)})
		}
	}
	// The brute force's order: higher cosine first, then higher seq.
	slices.SortFunc(cands, func(a, b scored) int {
		switch {
		case a.sim > b.sim:
			return -1
		case a.sim < b.sim:
			return 1
		}
		return cmp.Compare(b.seq, a.seq)
	})
	if len(cands) > k {
		cands = cands[:k]
	}
	out := make([]int64, len(cands))
	sims := make(map[int64]float64, len(cands)+len(also))
	for i, c := range cands {
		out[i] = c.seq
		sims[c.seq] = c.sim
	}
	for _, seq := range also {
		if i, ok := vi.slot[seq]; ok && keep(i) {
			sims[seq] = vi.exact(q, qn, i)
		}
	}
	return out, sims, nil
}
