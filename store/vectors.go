package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// blankChars are the characters a row may consist of and still count as blank (no vector,
// never pending): SQLite's trim() with this set is the SQL side of strings.TrimSpace.
const blankChars = "char(32, 9, 10, 11, 12, 13)"

// nonBlank is the SQL condition for a messages row (aliased m) that is worth a vector. It
// reads the whole text; BlankText is the same test in Go, so a row is never pending to
// one side and blank to the other.
const nonBlank = "(trim(m.text, " + blankChars + ") != '')"

// BlankText reports whether t holds only the characters of blankChars: such a row gets no
// vector and is never pending (contract: Vectors).
func BlankText(t string) bool { return strings.Trim(t, " \t\n\v\f\r") == "" }

// encodeVector is the vectors.blob form: float32 little-endian.
func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// PutVectors stores one vector per seq for model in one BEGIN IMMEDIATE transaction on the
// session's writer connection, so it queues behind the proxy's writes instead of racing them
// (contract: Vectors). An empty vector stores dim = 0 with an empty blob: the row was given up
// on and nearest-neighbour search ignores it. An existing vector of the same model is replaced.
func (d *DB) PutVectors(model string, vecs map[int64][]float32) error {
	if model == "" {
		return errors.New("put vectors: empty model")
	}
	if len(vecs) == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.use(); err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := d.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("put vectors: begin: %w", err)
	}
	err := func() error {
		st, err := d.conn.PrepareContext(ctx, "INSERT OR REPLACE INTO vectors (message_seq, model, dim, blob) VALUES (?, ?, ?, ?)")
		if err != nil {
			return err
		}
		defer st.Close()
		for seq, v := range vecs {
			if _, err := st.ExecContext(ctx, seq, model, len(v), encodeVector(v)); err != nil {
				return err
			}
		}
		_, err = d.conn.ExecContext(ctx, "COMMIT")
		return err
	}()
	if err != nil {
		_, _ = d.conn.ExecContext(ctx, "ROLLBACK")
		return fmt.Errorf("put vectors: %w", err)
	}
	d.noteCommit() // an embedding backfill's pages count for the background checkpoint too
	return nil
}

// PendingVectors lists the seqs of the non-blank rows without a vector (or skip mark) for
// model, in the contract's embedding order (contract: Vectors): trimmed rows first, then
// newest first.
func (d *DB) PendingVectors(model string) ([]int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.use(); err != nil {
		return nil, err
	}
	rows, err := d.conn.QueryContext(context.Background(), "SELECT m.seq FROM messages m WHERE "+nonBlank+
		" AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.message_seq = m.seq AND v.model = ?) ORDER BY m.in_context, m.seq DESC", model)
	if err != nil {
		return nil, fmt.Errorf("list rows to embed: %w", err)
	}
	defer rows.Close()
	var seqs []int64
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("list rows to embed: %w", err)
		}
		seqs = append(seqs, s)
	}
	return seqs, rows.Err()
}

// VectorInputs reads the first maxChars characters (code points: SQLite's substr on TEXT) of
// each row in seqs, by seq. Rows that no longer exist are absent from the map.
func (d *DB) VectorInputs(seqs []int64, maxChars int) (map[int64]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.use(); err != nil {
		return nil, err
	}
	in, args := inList(seqs, nil)
	rows, err := d.conn.QueryContext(context.Background(), "SELECT seq, substr(text, 1, "+strconv.Itoa(maxChars)+
		") FROM messages WHERE seq IN "+in, args...)
	if err != nil {
		return nil, fmt.Errorf("read rows to embed: %w", err)
	}
	defer rows.Close()
	out := make(map[int64]string, len(seqs))
	for rows.Next() {
		var s int64
		var text string
		if err := rows.Scan(&s, &text); err != nil {
			return nil, fmt.Errorf("read rows to embed: %w", err)
		}
		out[s] = text
	}
	return out, rows.Err()
}

// VectorStatus is one session's embedding progress for Model (contract: Search, vectors).
type VectorStatus struct {
	Model   string // "" when no model is configured and the database has no vectors
	Filled  int    // rows with a vector (dim > 0)
	Pending int    // non-blank rows without a vector for Model
	Skipped int    // rows given up on (dim = 0)
}

// Vectors picks the model a hybrid search uses and reports its progress: configured when it
// has vectors in this database, else the model with the most vectors, else configured (whose
// rows are then all pending). With no configured model and no vectors, Model is "". An error
// reading the database is a *ReadError.
//
// The counts scan the whole vectors table (its blobs included: about 36 ms at 50,000 rows of
// 768 dimensions, each recall search pays it), so a pooled reader keeps the last status with
// the key it depends on (vectorStatusKey) and answers from it while the key is unchanged.
func (rd *Reader) Vectors(ctx context.Context, configured string) (_ VectorStatus, err error) {
	defer func() { err = readError(rd.path, err) }()
	db, err := rd.pool()
	if err != nil {
		return VectorStatus{}, err
	}
	key, kerr := vectorStatusKeyOf(ctx, db, configured)
	if kerr == nil && rd.sr != nil {
		rd.sr.vsmu.Lock()
		c := rd.sr.vstatus
		rd.sr.vsmu.Unlock()
		if c != nil && c.key == key {
			return c.st, nil
		}
	}
	st, err := vectorStatusOf(ctx, db, configured)
	if err == nil && kerr == nil && rd.sr != nil {
		rd.sr.vsmu.Lock()
		rd.sr.vstatus = &cachedVectorStatus{key: key, st: st}
		rd.sr.vsmu.Unlock()
	}
	return st, err
}

// vectorStatusKey is what a session's VectorStatus depends on. Rows are never deleted from
// messages, their text never changes, and every vector written (INSERT OR REPLACE, a replaced
// one included) gets a rowid above all the vectors table had (vectors_index.go): so the counts
// change only when messages gains a seq or vectors a higher rowid. The last row's model and
// dim are in the key too, so it would still follow a SQLite that reused the rowid of a
// replaced last row (a replace changes its dim if it changes a count). A DELETE from vectors
// is outside it: nothing here issues one, and the SQL tool is read-only.
type vectorStatusKey struct {
	configured string
	maxSeq     int64
	lastRowid  int64
	lastModel  string
	lastDim    int64
}

type cachedVectorStatus struct {
	key vectorStatusKey
	st  VectorStatus
}

// vectorStatusKeyOf reads the key: two lookups by primary key, not scans.
func vectorStatusKeyOf(ctx context.Context, db *sql.DB, configured string) (vectorStatusKey, error) {
	k := vectorStatusKey{configured: configured}
	if err := db.QueryRowContext(ctx, "SELECT coalesce(max(seq), 0) FROM messages").Scan(&k.maxSeq); err != nil {
		return k, err
	}
	err := db.QueryRowContext(ctx, "SELECT rowid, model, dim FROM vectors ORDER BY rowid DESC LIMIT 1").Scan(&k.lastRowid, &k.lastModel, &k.lastDim)
	if errors.Is(err, sql.ErrNoRows) {
		err = nil
	}
	return k, err
}

// vectorStatusOf counts the status of configured from the tables (Reader.Vectors).
func vectorStatusOf(ctx context.Context, db *sql.DB, configured string) (VectorStatus, error) {
	st := VectorStatus{Model: configured}
	rows, err := db.QueryContext(ctx, "SELECT model, count(*) FROM vectors WHERE dim > 0 GROUP BY model ORDER BY count(*) DESC, model")
	if err != nil {
		return st, fmt.Errorf("read vector models: %w", err)
	}
	best, bestN, configuredN := "", 0, 0
	for rows.Next() {
		var m string
		var n int
		if err := rows.Scan(&m, &n); err != nil {
			rows.Close()
			return st, fmt.Errorf("read vector models: %w", err)
		}
		if best == "" {
			best, bestN = m, n
		}
		if m == configured {
			configuredN = n
		}
	}
	if err := rows.Close(); err != nil {
		return st, err
	}
	switch {
	case configured != "" && configuredN > 0:
		st.Model, st.Filled = configured, configuredN
	case best != "":
		st.Model, st.Filled = best, bestN
	}
	if st.Model == "" {
		return st, nil
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM vectors WHERE model = ? AND dim = 0", st.Model).Scan(&st.Skipped); err != nil {
		return st, fmt.Errorf("count skipped vectors: %w", err)
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM messages m WHERE "+nonBlank+
		" AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.message_seq = m.seq AND v.model = ?)", st.Model).Scan(&st.Pending); err != nil {
		return st, fmt.Errorf("count pending vectors: %w", err)
	}
	return st, nil
}
