package store

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestQueryValueLimit: a statement cannot build a value far past what a cell returns. Before,
// printf built a 20 MB (and up to 64 MB) cell that was copied into Go and then cut to 2,000
// characters. A stored row over the limit still reads through the same pool afterwards: the
// limit is set back when the statement ends.
func TestQueryValueLimit(t *testing.T) {
	t.Parallel()
	r := newRoot(t)
	big := strings.Repeat("y", queryMaxValueLength+1)
	d := mustSession(t, r, "s")
	if _, err := d.SyncRows([]RowWrite{{Fingerprint: strings.Repeat("a", 32), Thread: "t", Role: "user", Kind: "text", Text: big, InContext: true}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	rd := mustReader(t, r, "s")
	ctx := context.Background()

	_, err := rd.Query(ctx, "SELECT printf('%.*c', 20000000, 'x') AS c", 0)
	if err == nil || !strings.Contains(err.Error(), "over 8 MB") {
		t.Fatalf("a 20 MB cell: %v, want the value-limit error", err)
	}
	res, err := rd.Query(ctx, "SELECT length(printf('%.*c', 100000, 'x')) AS n, substr(printf('%.*c', 100000, 'x'), 1, 3) AS head", 0)
	if err != nil || len(res.Rows) != 1 || res.Rows[0][0] != int64(100000) || res.Rows[0][1] != "xxx" {
		t.Fatalf("a 100 kB value: %+v, %v", res, err)
	}
	// the row over the SQL limit is still whole for the rest of the reader
	for range 3 { // every pooled connection the queries may have used
		rows, _, err := r.Rows(ctx, "s", 0, 1, len(big))
		if err != nil || len(rows) != 1 || len(rows[0].Text) != len(big) {
			t.Fatalf("Rows after the limited query: %d rows, %v", len(rows), err)
		}
	}
}
