package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Limits of one smart_compact_sql result (contract: SQL step 3).
const (
	QueryMaxRows      = 200
	QueryMaxCellChars = 2000
	QueryMaxChars     = 30000
	QueryTimeout      = 2 * time.Second
)

// QueryResult is at most 200 rows of one statement (contract: SQL step 3).
type QueryResult struct {
	Columns []string `json:"columns"`
	// Rows hold int64, float64, string or nil. Text over 2,000 characters is cut and ends in
	// "…"; a blob is its text when valid UTF-8, else "<blob N bytes>"; a non-finite float is
	// "Inf" or "-Inf".
	Rows      [][]any `json:"rows"`
	Truncated bool    `json:"truncated"` // more rows existed, or cells or the whole result were cut
}

// Query runs one statement that passes CheckSelect on a connection with the read-only
// authorizer, interrupted after timeout (QueryTimeout when 0). At most QueryMaxRows rows are
// kept; the latter half of the rows is dropped until the JSON of columns and rows fits
// QueryMaxChars characters. A statement stopped by the timeout returns an error saying so.
func (rd *Reader) Query(ctx context.Context, statement string, timeout time.Duration) (QueryResult, error) {
	run, err := checkSelect(statement)
	if err != nil {
		return QueryResult{}, err
	}
	db, err := rd.pool()
	if err != nil {
		return QueryResult{}, err
	}
	if timeout <= 0 {
		timeout = QueryTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var res QueryResult
	err = withQueryLimit(ctx, db, func(c *sql.Conn) (err error) {
		res, err = runQuery(ctx, c, run)
		return err
	})
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return QueryResult{}, fmt.Errorf("the statement was stopped after %v; narrow it (a WHERE clause, a LIMIT, fewer joins)", timeout)
		}
		return QueryResult{}, err
	}
	fitResult(&res)
	return res, nil
}

func runQuery(ctx context.Context, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string) (QueryResult, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return QueryResult{}, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return QueryResult{}, err
	}
	res := QueryResult{Columns: cols, Rows: [][]any{}}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if len(res.Rows) == QueryMaxRows {
			res.Truncated = true
			break
		}
		if err := rows.Scan(ptrs...); err != nil {
			return QueryResult{}, err
		}
		row := make([]any, len(cols))
		for i, v := range vals {
			var cut bool
			row[i], cut = cell(v)
			res.Truncated = res.Truncated || cut
		}
		res.Rows = append(res.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return QueryResult{}, err
	}
	// Close now so an interrupted statement reports its error here, not after the result.
	if err := rows.Close(); err != nil {
		return QueryResult{}, err
	}
	return res, ctx.Err()
}

// cell converts one scanned value to its JSON-ready form; cut reports a shortened text.
func cell(v any) (any, bool) {
	switch v := v.(type) {
	case []byte:
		if !utf8.Valid(v) {
			return fmt.Sprintf("<blob %d bytes>", len(v)), false
		}
		return cutText(string(v), QueryMaxCellChars)
	case string:
		return cutText(v, QueryMaxCellChars)
	case float64:
		switch {
		case math.IsInf(v, 1):
			return "Inf", false
		case math.IsInf(v, -1):
			return "-Inf", false
		case math.IsNaN(v):
			return nil, false
		}
		return v, false
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano), false
	default:
		return v, false
	}
}

// cutText keeps the first n characters of s, then "…".
func cutText(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	i, k := 0, 0
	for i < len(s) && k < n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		k++
	}
	if i == len(s) {
		return s, false
	}
	return s[:i] + "…", true
}

// resultChars is the length in characters of the result's JSON (columns and rows).
func resultChars(res *QueryResult) int {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		Columns []string `json:"columns"`
		Rows    [][]any  `json:"rows"`
	}{res.Columns, res.Rows}); err != nil {
		return math.MaxInt
	}
	return utf8.RuneCount(bytes.TrimRight(buf.Bytes(), "\n"))
}

// fitResult drops the latter half of the rows until the JSON fits QueryMaxChars.
func fitResult(res *QueryResult) {
	for len(res.Rows) > 0 && resultChars(res) > QueryMaxChars {
		res.Rows = res.Rows[:len(res.Rows)/2]
		res.Truncated = true
	}
}
