package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Reading postings: FTS5's own numbers (row sizes, a word's rows and instances, the
// averages record), read once and followed as rows arrive (search_postings.go).

// tableStateColumns are read by one statement, so from one snapshot: the averages record
// (rows and tokens; parseAverages) and the highest seq of messages_fts.
const tableStateColumns = "(SELECT block FROM messages_fts_data WHERE id = 1), (SELECT max(id) FROM messages_fts_docsize)"

// readTableState reads tableStateColumns' values from one row being scanned: block and top.
func readTableState(block []byte, top sql.NullInt64) (tableState, error) {
	rows, tokens, err := parseAverages(block)
	return tableState{rows: rows, tokens: tokens, top: top.Int64}, err
}

// readSizes extends pi.sizes to row top, from messages_fts_docsize on db (any connection:
// the rows up to top never change). Every seq from 1 must have its row.
func (pi *postingIndex) readSizes(ctx context.Context, db *sql.DB, top int64) error {
	from := int64(len(pi.sizes))
	if top <= from {
		return nil
	}
	var n int64
	var sizeHex sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT count(*), group_concat(hex(sz), '') FROM (SELECT sz FROM messages_fts_docsize WHERE id > ? AND id <= ? ORDER BY id)",
		from, top).Scan(&n, &sizeHex); err != nil {
		return fmt.Errorf("read row sizes: %w", err)
	}
	if n != top-from {
		return fmt.Errorf("read row sizes: %d rows from seq %d to %d: %w", n, from+1, top, errNoPostings)
	}
	b, err := hex.DecodeString(sizeHex.String)
	if err != nil {
		return fmt.Errorf("read row sizes: %w", err)
	}
	sizes := slices.Grow(pi.sizes, int(n))
	for len(b) > 0 {
		v, used := fts5Varint(b)
		if used == 0 || v > math.MaxUint32 {
			return fmt.Errorf("read row sizes: a docsize record: %w", errNoPostings)
		}
		sizes = append(sizes, uint32(v))
		b = b[used:]
	}
	if int64(len(sizes)) != top { // one varint a row: messages_fts has one column
		return fmt.Errorf("read row sizes: %d sizes for %d rows: %w", int64(len(sizes))-from, n, errNoPostings)
	}
	pi.sizes = sizes
	return nil
}

// refresh adds to p the rows stored since it was last read, and returns how many. Their
// instances come from FTS5's bm25 of each (one statement reads them all, with the table's
// state it scored them at), solved for the count with the row's size: a score no count gives
// is errNoPostings. The line count follows the lines table the same way.
func (pi *postingIndex) refresh(ctx context.Context, db conn, p *postings, phrase string) (int, error) {
	var block []byte
	var top, lineTop sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT "+tableStateColumns+", (SELECT max(id) FROM lines)").Scan(&block, &top, &lineTop); err != nil {
		return 0, fmt.Errorf("read postings: %w", err)
	}
	now, err := readTableState(block, top)
	if err != nil {
		return 0, err
	}
	if p.linesRead && lineTop.Int64 > p.lineTop {
		if err := p.readLines(ctx, db, phrase, p.lineTop, math.MaxInt64); err != nil {
			return 0, err
		}
	}
	if now == p.state {
		return 0, nil
	}
	type newRow struct {
		seq   int64
		score float64
		role  string
	}
	var adds []newRow
	if now.top > p.state.top {
		rows, err := db.QueryContext(ctx, "SELECT messages_fts.rowid, bm25(messages_fts), "+tableStateColumns+
			", (SELECT role FROM messages WHERE seq = messages_fts.rowid) FROM messages_fts WHERE messages_fts MATCH ? AND messages_fts.rowid > ?", phrase, p.state.top)
		if err != nil {
			return 0, fmt.Errorf("read postings: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var a newRow
			if err := rows.Scan(&a.seq, &a.score, &block, &top, &a.role); err != nil {
				return 0, fmt.Errorf("read postings: %w", err)
			}
			adds = append(adds, a)
		}
		if err := rows.Err(); err != nil {
			return 0, fmt.Errorf("read postings: %w", err)
		}
		if len(adds) > 0 { // the state the scores were computed at
			if now, err = readTableState(block, top); err != nil {
				return 0, err
			}
		}
		if err := pi.readSizes(ctx, db.db, now.top); err != nil {
			return 0, err
		}
	}
	hits := int64(len(p.seqs) + len(adds))
	for _, a := range adds {
		f, ok := bm25Instances(now, hits, pi.sizes[a.seq-1], a.score)
		if !ok {
			return 0, fmt.Errorf("read postings: FTS5 scores row %d %v, which no instance count gives: %w", a.seq, a.score, errNoPostings)
		}
		p.seqs = append(p.seqs, a.seq)
		p.tf = append(p.tf, f)
		if p.roles != nil {
			i, ok := pi.roleIndex(a.role)
			if !ok {
				return 0, fmt.Errorf("read postings: %w", errNoPostings)
			}
			p.roles = append(p.roles, i)
		}
	}
	p.state, p.exact = now, nil
	return len(adds), nil
}

// readLines adds to p's line counts the lines past from and up to to holding the word, and
// moves lineTop to the highest line id then (to when lower): by role when p counts by role.
func (p *postings) readLines(ctx context.Context, db conn, phrase string, from, to int64) error {
	stmt := "SELECT '', count(*), (SELECT max(id) FROM lines) FROM lines_fts WHERE lines_fts MATCH ? AND lines_fts.rowid > ? AND lines_fts.rowid <= ?"
	if p.byRole != nil {
		stmt = "SELECT l.role, count(*), (SELECT max(id) FROM lines) FROM lines_fts JOIN lines l ON l.id = lines_fts.rowid " +
			"WHERE lines_fts MATCH ? AND lines_fts.rowid > ? AND lines_fts.rowid <= ? GROUP BY l.role"
	}
	rows, err := db.QueryContext(ctx, stmt, phrase, from, to)
	if err != nil {
		return fmt.Errorf("read postings' lines: %w", err)
	}
	defer rows.Close()
	top := to
	for rows.Next() {
		var role string
		var n int64
		var last sql.NullInt64
		if err := rows.Scan(&role, &n, &last); err != nil {
			return fmt.Errorf("read postings' lines: %w", err)
		}
		if p.byRole != nil {
			p.byRole[role] += n
		}
		p.lines += n
		top = min(top, last.Int64)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read postings' lines: %w", err)
	}
	if top == math.MaxInt64 { // no line holds the word: lineTop stays (a later look reads the lines past it again)
		return nil
	}
	p.lineTop = max(p.lineTop, top)
	return nil
}

// readAllLines counts p's lines, unless done already: a search counting them is the first to
// need them (a ranking does not).
func (p *postings) readAllLines(ctx context.Context, db conn, phrase string) error {
	if p.linesRead {
		return nil
	}
	if err := p.readLines(ctx, db, phrase, 0, math.MaxInt64); err != nil {
		return err
	}
	p.linesRead = true
	return nil
}

// readLineRoles counts p's lines by role, unless done already: a line's role never changes.
func (p *postings) readLineRoles(ctx context.Context, db conn, phrase string) error {
	if p.byRole != nil {
		return nil
	}
	lines := p.lines
	p.byRole, p.lines = map[string]int64{}, 0
	if err := p.readLines(ctx, db, phrase, 0, p.lineTop); err != nil {
		p.byRole, p.lines = nil, lines
		return err
	}
	if byRole := p.lines; byRole != lines {
		p.byRole, p.lines = nil, lines
		return fmt.Errorf("read postings' lines: %d lines by role, %d in all: %w", byRole, lines, errNoPostings)
	}
	return nil
}

// readRoles reads the roles of p's rows, unless read already: a row's role never changes.
func (pi *postingIndex) readRoles(ctx context.Context, db conn, p *postings, phrase string) error {
	if p.roles != nil || len(p.seqs) == 0 {
		return nil
	}
	var list sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT group_concat(m.role, char(10)) FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid "+
		"WHERE messages_fts MATCH ? AND messages_fts.rowid <= ?", phrase, p.state.top).Scan(&list); err != nil {
		return fmt.Errorf("read postings' roles: %w", err)
	}
	roles := make([]uint8, 0, len(p.seqs))
	for r := range strings.SplitSeq(list.String, "\n") {
		i, ok := pi.roleIndex(r)
		if !ok {
			return fmt.Errorf("read postings' roles: %w", errNoPostings)
		}
		roles = append(roles, i)
	}
	if len(roles) != len(p.seqs) { // a role holding a line feed
		return fmt.Errorf("read postings' roles: %d roles for %d rows: %w", len(roles), len(p.seqs), errNoPostings)
	}
	p.roles = roles
	return nil
}

// roleMask tells by role index whether a role is one of roles.
func (pi *postingIndex) roleMask(roles []string) []bool {
	mask := make([]bool, len(pi.roles))
	for i, r := range pi.roles {
		mask[i] = slices.Contains(roles, r)
	}
	return mask
}

// roleIndex returns role's index in pi.roles, added when new; ok is false past 256 roles (the
// contract has three).
func (pi *postingIndex) roleIndex(role string) (uint8, bool) {
	i := slices.Index(pi.roles, role)
	if i < 0 && len(pi.roles) < 256 {
		i = len(pi.roles)
		pi.roles = append(pi.roles, internRole(role))
	}
	return uint8(i), i >= 0
}

// build reads phrase's postings, token its FTS5 term, on a connection of its own in one read
// transaction: the table's state, the rows of the term with their instances (its doclist,
// readDoclist), the count of the term's rows and instances (an fts5vocab table in that
// connection's temp schema), which must be the postings', and FTS5's bm25 of some of the rows
// (by the phrase), which the formula must give. The
// rows' sizes are read on the pooled connection. errNoPostings: messages_fts is not the
// contract's, or its rows or scores are not the postings'.
func (pi *postingIndex) build(ctx context.Context, db conn, phrase, token string) (_ *postings, err error) {
	sr := db.sr
	params := "mode=ro&_busy_timeout=1000"
	if sr.immutable {
		params = "mode=ro&immutable=1"
	}
	sdb, err := sql.Open("sqlite3", sqliteURI(sr.path, params))
	if err != nil {
		return nil, fmt.Errorf("build postings: %w", err)
	}
	defer sdb.Close()
	c, err := sdb.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("build postings: %w", err)
	}
	defer c.Close()
	for _, s := range []string{"PRAGMA temp_store = MEMORY", "CREATE VIRTUAL TABLE temp.postings_vocab USING fts5vocab(main, messages_fts, instance)",
		"CREATE VIRTUAL TABLE temp.postings_terms USING fts5vocab(main, messages_fts, row)", "BEGIN"} {
		if _, err := c.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("build postings: %w", err)
		}
	}
	defer func() {
		if _, rerr := c.ExecContext(context.Background(), "ROLLBACK"); err == nil && rerr != nil {
			err = fmt.Errorf("build postings: %w", rerr)
		}
	}()

	var block []byte
	var top sql.NullInt64
	var create string
	if err := c.QueryRowContext(ctx, "SELECT "+tableStateColumns+", (SELECT sql FROM sqlite_master WHERE name = 'messages_fts')").
		Scan(&block, &top, &create); err != nil {
		return nil, fmt.Errorf("build postings: %w", err)
	}
	// The connection opened the file by its path: it must be the pooled reader's.
	if !sameFileAt(sr.path, sr.fi) {
		return nil, fmt.Errorf("build postings: %s is no longer the file the reader opened", sr.path)
	}
	// Terms are unicode61's and instances have positions only as the contract creates the
	// table: no tokenize or detail option.
	if lower := strings.ToLower(create); strings.Contains(lower, "tokenize") || strings.Contains(lower, "detail") {
		return nil, fmt.Errorf("build postings: messages_fts is %q: %w", create, errNoPostings)
	}
	p := &postings{}
	if p.state, err = readTableState(block, top); err != nil {
		return nil, err
	}
	if err := pi.readSizes(ctx, db.db, p.state.top); err != nil {
		return nil, err
	}

	if p.seqs, p.tf, err = readDoclist(ctx, c, token); errors.Is(err, errNoPostings) {
		pi.vocab++
		p.seqs, p.tf, err = readVocab(ctx, c, token)
	}
	if err != nil {
		return nil, err
	}
	if n := len(p.seqs); n > 0 && p.seqs[n-1] > p.state.top {
		return nil, fmt.Errorf("build postings: term %q holds row %d past the table's %d: %w", token, p.seqs[n-1], p.state.top, errNoPostings)
	}
	// FTS5's own counts of the term's rows and instances (an fts5vocab table, read by FTS5's
	// iterators) must be the postings'. That the phrase's rows are the term's, check shows:
	// FTS5 must score the rows it asks for, by an IDF of as many rows as the postings hold.
	var termRows, instances int64
	if err := c.QueryRowContext(ctx, "SELECT coalesce(sum(doc), 0), coalesce(sum(cnt), 0) FROM temp.postings_terms WHERE term = ?", token).
		Scan(&termRows, &instances); err != nil {
		return nil, fmt.Errorf("build postings: %w", err)
	}
	var sum int64
	for _, f := range p.tf {
		sum += int64(f)
	}
	if termRows != int64(len(p.seqs)) || instances != sum {
		return nil, fmt.Errorf("build postings: term %q is in %d rows with %d instances, the postings %d with %d: %w",
			token, termRows, instances, len(p.seqs), sum, errNoPostings)
	}
	if 2*int64(len(p.seqs)) >= p.state.rows { // an IDF FTS5 raises to 1e-6 whatever the count: count the phrase's rows
		var rows int
		if err := c.QueryRowContext(ctx, "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", phrase).Scan(&rows); err != nil {
			return nil, fmt.Errorf("build postings: %w", err)
		}
		if rows != len(p.seqs) {
			return nil, fmt.Errorf("build postings: %s matches %d rows, term %q is in %d: %w", phrase, rows, token, len(p.seqs), errNoPostings)
		}
	}
	if err := p.check(ctx, c, phrase, pi.sizes); err != nil {
		return nil, err
	}
	return p, nil
}

// readVocab returns token's rows and instances from the build's fts5vocab table, one row
// per instance: what readDoclist reads when the segments are not ones it knows.
func readVocab(ctx context.Context, c *sql.Conn, token string) (seqs []int64, tf []uint32, err error) {
	var docList sql.NullString
	if err := c.QueryRowContext(ctx, "SELECT group_concat(doc) FROM temp.postings_vocab WHERE term = ?", token).Scan(&docList); err != nil {
		return nil, nil, fmt.Errorf("build postings: %w", err)
	}
	docs, err := parseSeqs(docList.String) // one per instance, ascending
	if err != nil {
		return nil, nil, err
	}
	for i, d := range docs {
		if i == 0 || d != docs[i-1] {
			seqs = append(seqs, d)
			tf = append(tf, 0)
		}
		tf[len(tf)-1]++
	}
	return seqs, tf, nil
}

// postingChecks is how many rows of a word's postings, besides its best, are checked against
// FTS5's bm25 when they are built: those with the most instances, the largest and the
// smallest, and others spread over the session.
const postingChecks = 16

// check compares the formula's scores of some of p's rows with FTS5's bm25 of them, in the
// build's transaction, and keeps FTS5's as p's first exact scores.
func (p *postings) check(ctx context.Context, c *sql.Conn, phrase string, sizes []uint32) error {
	if len(p.seqs) == 0 {
		return nil
	}
	size := func(i int) uint32 { return sizes[p.seqs[i]-1] }
	pick := map[int]bool{}
	argmax := func(better func(i, j int) bool) {
		m := 0
		for i := range p.seqs {
			if better(i, m) {
				m = i
			}
		}
		pick[m] = true
	}
	argmax(func(i, j int) bool { return p.tf[i] > p.tf[j] })
	argmax(func(i, j int) bool { return size(i) > size(j) })
	argmax(func(i, j int) bool { return size(i) < size(j) })
	for i := 0; len(pick) < min(postingChecks, len(p.seqs)); i++ { // spread, then the first rows
		if i < postingChecks {
			pick[i*len(p.seqs)/postingChecks] = true
		} else {
			pick[i-postingChecks] = true
		}
	}
	// And the best rows, which a search without filters ranks first: their scores are kept.
	p.weigh(sizes)
	for _, b := range p.best(2*postingBlock, -1, int32(len(p.seqs)), nil, nil) {
		pick[int(b)] = true
	}
	want := map[int64]int{}
	var list []string
	for i := range pick {
		want[p.seqs[i]] = i
		list = append(list, strconv.FormatInt(p.seqs[i], 10))
	}
	// +rowid: matched while walking the phrase's rows, not one lookup (and IDF) per row.
	rows, err := c.QueryContext(ctx, "SELECT rowid, bm25(messages_fts) FROM messages_fts WHERE messages_fts MATCH ? AND +rowid IN ("+strings.Join(list, ", ")+")", phrase)
	if err != nil {
		return fmt.Errorf("build postings: %w", err)
	}
	defer rows.Close()
	idf, avgdl := bm25IDF(p.state.rows, int64(len(p.seqs))), p.state.avgdl()
	p.exact = make(map[int64]float64, len(want))
	for rows.Next() {
		var seq int64
		var s float64
		if err := rows.Scan(&seq, &s); err != nil {
			return fmt.Errorf("build postings: %w", err)
		}
		i, ok := want[seq]
		if !ok {
			return fmt.Errorf("build postings: FTS5 scored row %d, not asked for: %w", seq, errNoPostings)
		}
		if f := -idf * bm25Weight(p.tf[i], size(i), avgdl); !bm25Close(s, f) {
			return fmt.Errorf("build postings: FTS5 scores row %d %v, the formula %v: %w", seq, s, f, errNoPostings)
		}
		p.exact[seq] = s
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("build postings: %w", err)
	}
	if len(p.exact) != len(want) {
		return fmt.Errorf("build postings: FTS5 scored %d of %d rows: %w", len(p.exact), len(want), errNoPostings)
	}
	return nil
}

// parseAverages reads FTS5's averages record: the table's rows, then each column's tokens
// (messages_fts has one column).
func parseAverages(block []byte) (rows, tokens int64, err error) {
	r, n := fts5Varint(block)
	t, m := fts5Varint(block[n:])
	if n == 0 || m == 0 || r == 0 || r > math.MaxInt64 || t > math.MaxInt64 {
		return 0, 0, fmt.Errorf("read postings: FTS5 averages record %x: %w", block, errNoPostings)
	}
	return int64(r), int64(t), nil
}

// parseSeqs reads a group_concat of rowids (ascending, "" for none).
func parseSeqs(list string) ([]int64, error) {
	if list == "" {
		return nil, nil
	}
	seqs := make([]int64, 0, strings.Count(list, ",")+1)
	for part := range strings.SplitSeq(list, ",") {
		s, err := strconv.ParseInt(part, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("build postings: %w", err)
		}
		if s < 1 || len(seqs) > 0 && s < seqs[len(seqs)-1] {
			return nil, fmt.Errorf("build postings: rows out of order: %w", errNoPostings)
		}
		seqs = append(seqs, s)
	}
	return seqs, nil
}

// fts5Varint decodes the SQLite varint FTS5 writes (sqlite3Fts5GetVarint: big-endian groups
// of 7 bits, the ninth byte whole) and returns it with its length, 0 when b is cut short.
func fts5Varint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < 8; i++ {
		if i >= len(b) {
			return 0, 0
		}
		v = v<<7 | uint64(b[i]&0x7f)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	if len(b) < 9 {
		return 0, 0
	}
	return v<<8 | uint64(b[8]), 9
}
