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

	"gonum.org/v1/gonum/blas/blas32"
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
// The ranking is exactly the brute force's: a first pass scores every row in float32 (fast,
// within a proven error bound of the exact float64 cosine), the rows that can still be among
// the k nearest are scored again exactly as before, and only those exact scores rank.

// vectorIndex is a pooled reader's decoded vectors of one (model, dim). Guarded by mu.
type vectorIndex struct {
	mu        sync.Mutex
	model     string
	dim       int
	lastRowid int64           // highest vectors rowid read; 0 before the first load
	slot      map[int64]int   // seq → slot
	seqs      []int64         // per slot; the slot of a vector no longer usable keeps its seq but norm 0
	roles     []string        // per slot: the message's role
	norms     []float64       // per slot: sqrt of Σ x², as the brute force computes it; 0 = skip
	vecs      []float32       // dim values per slot
	scratch   []float64       // per slot: the float32 pass's cosine
	roleIndex map[string]bool // reused filter set
	mem       memEntry        // its place in the search memory budget (search_memory.go)
}

// vectorSlotBytes is what a slot takes besides its vector: seq, role header, norm, scratch
// and its entry in slot, about.
const vectorSlotBytes = 8 + 16 + 8 + 8 + 40

// vectorIndex returns the reader's vector index for (model, dim), refreshed from the vectors
// table, and accounted in the search memory budget: an index past the whole budget serves
// this search and is let go. The caller holds the returned index's mu.

func (sr *sharedReader) vectorIndex(ctx context.Context, db conn, model string, dim int) (*vectorIndex, error) {
	sr.vimu.Lock()
	vi, old := sr.vectors, (*vectorIndex)(nil)
	if vi == nil || vi.model != model || vi.dim != dim {
		old, vi = vi, &vectorIndex{model: model, dim: dim, slot: map[int64]int{}}
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
	if !searchMem.use(&vi.mem, int64(4*len(vi.vecs)+vectorSlotBytes*len(vi.seqs)), drop) {
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
			vi.roles = append(vi.roles, "")
			vi.norms = append(vi.norms, 0)
			vi.vecs = slices.Grow(vi.vecs, vi.dim)[:len(vi.vecs)+vi.dim]
		}
		vi.roles[i] = internRole(role)
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
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read vectors: %w", err)
	}
	return nil
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

// dot32 is q·v in float32 by gonum's BLAS (SSE on amd64; no summation order is promised,
// errBound covers any).
func dot32(q, v []float32) float32 {
	return blas32.Dot(blas32.Vector{N: len(q), Inc: 1, Data: q}, blas32.Vector{N: len(q), Inc: 1, Data: v})
}

// errBound bounds |fast − exact| for a cosine of dim-component vectors: a float32 sum of dim
// products in any order is within γ(dim+1) · Σ|qᵢxᵢ| ≤ γ · ‖q‖‖x‖ of the true dot product
// (γ(n) = nu/(1−nu), u = 2⁻²⁴; Cauchy–Schwarz), the float64 one within far less, and both
// are divided by the same norms; doubled for the norms' and the division's own rounding.
func errBound(dim int) float64 {
	nu := float64(dim+2) * 0x1p-24
	return 2*nu/(1-nu) + 1e-12
}

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
	if vi.roleIndex == nil {
		vi.roleIndex = map[string]bool{}
	}
	clear(vi.roleIndex)
	for _, r := range o.Roles {
		vi.roleIndex[r] = true
	}
	keep := func(i int) bool {
		return vi.norms[i] != 0 && (len(o.Roles) == 0 || vi.roleIndex[vi.roles[i]]) && (inContext == nil || inContext[vi.seqs[i]])
	}

	// Fast pass: every kept row's float32 cosine, and the k best of them, in parts run at once
	// (the pass is bound by memory bandwidth, which one core does not fill).
	n := len(vi.seqs)
	vi.scratch = slices.Grow(vi.scratch[:0], n)[:n]
	fast := vi.scratch
	parts := min(runtime.GOMAXPROCS(0), max(n/4096, 1), 8)
	tops := make([][]float64, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := n*p/parts, n*(p+1)/parts
		wg.Go(func() {
			top := make([]float64, 0, k+1) // ascending
			for i := lo; i < hi; i++ {
				if !keep(i) {
					fast[i] = math.Inf(-1)
					continue
				}
				s := float64(dot32(q, vi.vecs[i*vi.dim:(i+1)*vi.dim])) / (qn * vi.norms[i])
				fast[i] = s
				if len(top) < k || s > top[0] {
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
	// A row among the exact k nearest scores within 2·errBound of the k-th best fast score:
	// the k best fast rows' exact scores are all above it less one bound.
	floor := math.Inf(-1)
	if len(top) == k {
		floor = top[0] - 2*errBound(vi.dim)
	}
	type scored struct {
		seq int64
		sim float64
	}
	var cands []scored
	for i := range n {
		if fast[i] >= floor && !math.IsInf(fast[i], -1) {
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
