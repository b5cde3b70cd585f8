package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"

	"github.com/mattn/go-sqlite3"
)

// queryMaxValueLength caps a string or blob one smart_compact_sql statement may build or read
// (SQLITE_LIMIT_LENGTH on its connection while it runs): a cell is cut to 2,000 characters on
// the wire anyway, but SQLite built the whole value first, and the driver copied it into Go
// (one call built a 63 MB cell, about 1 GB of memory with many at once). Rows are blocks of
// one model request, and tool results over the compression threshold are stored compressed,
// so a row this large is rare; a statement that reads one gets an error saying what to use.
const queryMaxValueLength = 8 << 20

// withQueryLimit runs fn on one connection of db with SQLITE_LIMIT_LENGTH lowered to
// queryMaxValueLength, and sets it back before the connection returns to the pool (search
// and the dashboard read whole rows on the same pool).
func withQueryLimit(ctx context.Context, db *sql.DB, fn func(*sql.Conn) error) error {
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	old := -1
	set := func(n int) error {
		return c.Raw(func(dc any) error {
			sc, ok := dc.(*sqlite3.SQLiteConn)
			if !ok {
				return fmt.Errorf("sql connection is %T", dc)
			}
			prev := sc.SetLimit(sqlite3.SQLITE_LIMIT_LENGTH, n)
			if old < 0 {
				old = prev
			}
			return nil
		})
	}
	if err := set(queryMaxValueLength); err != nil {
		return err
	}
	defer func() {
		if err := set(old); err != nil {
			_ = c.Raw(func(any) error { return driver.ErrBadConn }) // do not reuse a connection left limited
		}
	}()
	err = fn(c)
	if err != nil && strings.Contains(err.Error(), "string or blob too big") {
		return fmt.Errorf("the statement builds or reads a value over %d MB, which smart_compact_sql does not build (its cells are cut at %d characters): leave the long value out (a WHERE that skips the row, fewer columns), and read long rows with smart_compact_search: %w",
			queryMaxValueLength>>20, QueryMaxCellChars, err)
	}
	return err
}
