package store

import (
	"context"
	"hash/fnv"
	"slices"
	"strings"
	"testing"
)

// fakeVector is a bag-of-words embedding: each lower-cased word adds 1 to one of 16 dims, so
// texts sharing words are near by cosine.
func fakeVector(text string) []float32 {
	v := make([]float32, 16)
	for _, w := range strings.Fields(strings.ToLower(text)) {
		h := fnv.New32a()
		h.Write([]byte(strings.Trim(w, ".,;:!?\"'")))
		v[h.Sum32()%16]++
	}
	v[15] += 0.01 // never the zero vector
	return v
}

func vectorStatus(t testing.TB, r *Root, sid, model string) VectorStatus {
	t.Helper()
	rd, err := r.OpenReader(sid)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	st, err := rd.Vectors(context.Background(), model)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestPutVectorsAndStatus(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	syncTestRows(t, d, []testRow{
		{thread: "a", role: "user", text: "one"},
		{thread: "a", role: "user", text: " \n\t "}, // blank: never pending
		{thread: "a", role: "user", text: "three"},
		{thread: "a", role: "user", text: "four"},
	})
	if st := vectorStatus(t, r, "s", ""); st != (VectorStatus{}) {
		t.Errorf("no model, no vectors: %+v", st)
	}
	if st := vectorStatus(t, r, "s", "m"); st != (VectorStatus{Model: "m", Pending: 3}) {
		t.Errorf("configured, nothing embedded: %+v", st)
	}
	if err := d.PutVectors("m", map[int64][]float32{1: {1, 0}, 3: nil}); err != nil {
		t.Fatal(err)
	}
	if err := d.PutVectors("other", map[int64][]float32{1: {1, 0}, 3: {0, 1}, 4: {1, 1}}); err != nil {
		t.Fatal(err)
	}
	if st := vectorStatus(t, r, "s", "m"); st != (VectorStatus{Model: "m", Filled: 1, Pending: 1, Skipped: 1}) {
		t.Errorf("configured model with vectors wins: %+v", st)
	}
	if st := vectorStatus(t, r, "s", "absent"); st != (VectorStatus{Model: "other", Filled: 3}) {
		t.Errorf("most vectors wins when configured has none: %+v", st)
	}
	seqs, err := d.PendingVectors("m")
	if err != nil || !slices.Equal(seqs, []int64{4}) {
		t.Errorf("pending %v %v", seqs, err)
	}
	// The writer still writes after vectors went in through its connection.
	syncTestRows(t, d, []testRow{{thread: "a", role: "user", text: "one"}, {thread: "a", role: "user", text: "five"}})
}
