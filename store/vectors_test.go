package store

import (
	"context"
	"database/sql"
	"hash/fnv"
	"path/filepath"
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
	return readWith(t, r, sid, func(rd *Reader) (VectorStatus, error) { return rd.Vectors(context.Background(), model) })
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

// TestVectorStatusCacheFollowsEveryChange: Reader.Vectors answers from the pooled reader's
// cache while its key holds, so every change that moves a count must move the key: a new
// message, a new vector, and the last vectors row replaced (the embedder giving up on a row it
// had filled). Each status is checked against the counts read on a fresh, unpooled connection.
func TestVectorStatusCacheFollowsEveryChange(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	syncTestRows(t, d, []testRow{
		{thread: "a", role: "user", text: "one"},
		{thread: "a", role: "user", text: "two"},
	})
	path := filepath.Join(r.Dir(), "sessions", "s.db")
	check := func(step string) {
		t.Helper()
		got := vectorStatus(t, r, "s", "m")
		db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		want, err := vectorStatusOf(context.Background(), db, "m")
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: status %+v, the tables say %+v", step, got, want)
		}
	}
	check("nothing embedded")
	vectorStatus(t, r, "s", "m") // a second call answers from the cache
	check("again")
	if err := d.PutVectors("m", map[int64][]float32{1: {1, 0}}); err != nil {
		t.Fatal(err)
	}
	check("one vector")
	if err := d.PutVectors("m", map[int64][]float32{2: {0, 1}}); err != nil {
		t.Fatal(err)
	}
	check("two vectors")
	if err := d.PutVectors("m", map[int64][]float32{2: nil}); err != nil { // the last row, given up on
		t.Fatal(err)
	}
	check("the last vector replaced in place")
	syncTestRows(t, d, []testRow{
		{thread: "a", role: "user", text: "one"},
		{thread: "a", role: "user", text: "two"},
		{thread: "a", role: "user", text: "three"},
	})
	check("a new message")
}

// TestVectorRowidsOnlyGrow pins the SQLite behaviour the vector status key and the vector
// index rely on (vectors_index.go): a vector written again, the last row's included, gets a
// rowid above every rowid the table had, so the highest rowid grows with every vector stored.
func TestVectorRowidsOnlyGrow(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "s")
	syncTestRows(t, d, []testRow{{thread: "a", role: "user", text: "one"}, {thread: "a", role: "user", text: "two"}})
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(r.Dir(), "sessions", "s.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rowids := func() map[int64]int64 { // seq → rowid
		t.Helper()
		rows, err := db.Query("SELECT message_seq, rowid FROM vectors")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[int64]int64{}
		for rows.Next() {
			var seq, rowid int64
			if err := rows.Scan(&seq, &rowid); err != nil {
				t.Fatal(err)
			}
			m[seq] = rowid
		}
		return m
	}
	top := int64(0)
	for i, put := range []struct {
		what string
		seq  int64
		vec  []float32
	}{
		{"first vector", 1, []float32{1, 0}},
		{"second vector", 2, []float32{0, 1}},
		{"the last row replaced", 2, nil},
		{"the last row replaced again", 2, []float32{1, 1}},
		{"a row below the last replaced", 1, nil},
	} {
		if err := d.PutVectors("m", map[int64][]float32{put.seq: put.vec}); err != nil {
			t.Fatal(err)
		}
		got := rowids()
		if got[put.seq] <= top {
			t.Fatalf("step %d, %s: seq %d got rowid %d, not above the highest before, %d (rowids %v)", i, put.what, put.seq, got[put.seq], top, got)
		}
		top = got[put.seq]
	}
}
