package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"slices"
)

// Reading a word's rows and instances from FTS5's own doclist (search_postings.go): the leaf
// pages of messages_fts's segments that hold the term, read from messages_fts_data and decoded
// here, as FTS5 does (SQLite's ext/fts5/fts5_index.c: the structure record, fts5SegIterSeekInit,
// fts5LeafSeek, fts5SegIterNext and fts5ChunkIterate). An fts5vocab table gives the same rows
// one instance a row, which at 1M rows took about 25 ms for a word in 84,000 of them; the pages
// hold about 500 KB and decode in a few. Only what the contract's table can hold is read (one
// column, detail=full, no deletes, no tombstones); anything else is errNoPostings and the
// caller reads the fts5vocab table. The caller checks the result against FTS5's counts.

// FTS5's record layout (fts5_index.c).
const (
	fts5StructureRowid = 10         // the structure record's id in %_data
	fts5PageBits       = 31 + 5 + 1 // a segment's pages: id = segid<<37 + pgno
	fts5MainPrefix     = '0'        // the main index's terms start with it
)

// fts5Segment is one segment of the structure record: its id and leaf pages.
type fts5Segment struct {
	id, first, last int64
}

// parseStructure reads FTS5's structure record: the segments of every level. errNoPostings
// when it is not one this reader knows, or a segment has tombstones (secure-delete).
func parseStructure(b []byte) ([]fts5Segment, error) {
	bad := fmt.Errorf("read doclist: FTS5 structure record: %w", errNoPostings)
	if len(b) < 4 {
		return nil, bad
	}
	i := 4 // the configuration cookie
	v2 := len(b) >= 8 && string(b[4:8]) == "\xff\x00\x00\x01"
	if v2 {
		i += 4
	}
	next := func() int64 {
		if i >= len(b) {
			i = len(b) + 1
			return -1
		}
		v, n := fts5Varint(b[i:])
		if n == 0 || v > 1<<62 {
			i = len(b) + 1
			return -1
		}
		i += n
		return int64(v)
	}
	levels, total := next(), next()
	next() // the write counter
	if levels < 0 || total < 0 || levels > 1<<16 || total > 1<<16 {
		return nil, bad
	}
	var segs []fts5Segment
	for range levels {
		next() // segments in an ongoing merge: their consumed pages are gone, first moved on
		n := next()
		if n < 0 || n > total {
			return nil, bad
		}
		for range n {
			s := fts5Segment{id: next(), first: next(), last: next()}
			if v2 {
				next() // origin counters
				next()
				if tomb := next(); tomb != 0 {
					return nil, fmt.Errorf("read doclist: segment %d has tombstones: %w", s.id, errNoPostings)
				}
				next() // tombstone entries, entries
				next()
			}
			if i > len(b) || s.id <= 0 || s.id >= 1<<16 || s.first < 1 || s.last < s.first || s.last > 0x7FFFFF00 {
				return nil, bad
			}
			segs = append(segs, s)
		}
	}
	if i > len(b) || int64(len(segs)) != total {
		return nil, bad
	}
	return segs, nil
}

// readDoclist returns the rows holding token (FTS5's term, lowercased ASCII) and the term's
// instances in each, ascending by seq, from messages_fts's segments on c (in the caller's read
// transaction, so from one snapshot).
func readDoclist(ctx context.Context, c *sql.Conn, token string) (seqs []int64, tf []uint32, err error) {
	var block []byte
	if err := c.QueryRowContext(ctx, "SELECT block FROM messages_fts_data WHERE id = ?", fts5StructureRowid).Scan(&block); err != nil {
		return nil, nil, fmt.Errorf("read doclist: %w", err)
	}
	segs, err := parseStructure(block)
	if err != nil {
		return nil, nil, err
	}
	term := append([]byte{fts5MainPrefix}, token...)
	type run struct{ from, to int } // one segment's rows in seqs, ascending
	var runs []run
	for _, s := range segs {
		n := len(seqs)
		if seqs, tf, err = readSegmentDoclist(ctx, c, s, term, seqs, tf); err != nil {
			return nil, nil, err
		}
		if len(seqs) > n {
			runs = append(runs, run{n, len(seqs)})
		}
	}
	// The segments of a table whose rows are only appended hold disjoint ranges of rows (a
	// write's rows, or a merge of adjacent ones), in no particular order: put them in order.
	// Ranges that overlap hold a row twice (a delete or an update): not the contract's rows.
	slices.SortFunc(runs, func(a, b run) int { return cmp.Compare(seqs[a.from], seqs[b.from]) })
	for i := 1; i < len(runs); i++ {
		if seqs[runs[i].from] <= seqs[runs[i-1].to-1] {
			return nil, nil, fmt.Errorf("read doclist: segments overlap at row %d: %w", seqs[runs[i].from], errNoPostings)
		}
	}
	if !slices.IsSortedFunc(runs, func(a, b run) int { return cmp.Compare(a.from, b.from) }) {
		s2, t2 := make([]int64, 0, len(seqs)), make([]uint32, 0, len(tf))
		for _, r := range runs {
			s2 = append(s2, seqs[r.from:r.to]...)
			t2 = append(t2, tf[r.from:r.to]...)
		}
		seqs, tf = s2, t2
	}
	return seqs, tf, nil
}

// readSegmentDoclist appends the rows and instances of term (with its index prefix) in segment
// s to seqs and tf: the leaf page FTS5's %_idx names for it, and the pages after it while the
// doclist goes on, read in one statement.
func readSegmentDoclist(ctx context.Context, c *sql.Conn, s fts5Segment, term []byte, seqs []int64, tf []uint32) ([]int64, []uint32, error) {
	var pg sql.NullInt64
	if err := c.QueryRowContext(ctx, "SELECT pgno FROM messages_fts_idx WHERE segid = ? AND term <= ? ORDER BY term DESC LIMIT 1", s.id, term).Scan(&pg); err != nil && err != sql.ErrNoRows {
		return nil, nil, fmt.Errorf("read doclist: %w", err)
	}
	first := max(pg.Int64>>1, s.first)
	base := s.id << fts5PageBits
	rows, err := c.QueryContext(ctx, "SELECT id, block FROM messages_fts_data WHERE id >= ? AND id <= ? ORDER BY id", base+first, base+s.last)
	if err != nil {
		return nil, nil, fmt.Errorf("read doclist: %w", err)
	}
	defer rows.Close()
	d := doclistDecoder{seqs: seqs, tf: tf, from: len(seqs)}
	want := base + first
	for rows.Next() {
		var id int64
		var page sql.RawBytes
		if err := rows.Scan(&id, &page); err != nil {
			return nil, nil, fmt.Errorf("read doclist: %w", err)
		}
		if id != want {
			return nil, nil, fmt.Errorf("read doclist: segment %d lacks page %d: %w", s.id, want-base, errNoPostings)
		}
		want++
		more, err := d.page(page, term)
		if err != nil {
			return nil, nil, err
		}
		if !more {
			return d.seqs, d.tf, rows.Close()
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read doclist: %w", err)
	}
	if want != base+s.last+1 {
		return nil, nil, fmt.Errorf("read doclist: segment %d ends at page %d, not %d: %w", s.id, want-1-base, s.last, errNoPostings)
	}
	if d.state == inPoslist || d.state == afterTerm {
		return nil, nil, fmt.Errorf("read doclist: segment %d ends inside a doclist: %w", s.id, errNoPostings)
	}
	return d.seqs, d.tf, nil
}

// doclistDecoder follows one term's doclist over a segment's leaf pages.
type doclistDecoder struct {
	seqs  []int64
	tf    []uint32
	from  int // the segment's first entry in seqs
	state int
	rowid int64
	rem   int  // poslist bytes still to come (inPoslist)
	start bool // at the start of a varint of the poslist
}

// The decoder's states between pages.
const (
	seekTerm  = iota // the term not found yet: this page is the one %_idx names
	inPoslist        // a poslist goes on at offset 4 of the next page
	atRowid          // the next entry's rowid is the next page's first rowid (or a term: the end)
	afterTerm        // the term ended its page: its first rowid is at offset 4 of the next page
)

func corrupt(at int) error {
	return fmt.Errorf("read doclist: a leaf page FTS5 would call corrupt (%d): %w", at, errNoPostings)
}

// page decodes one leaf page; more is false once the term's doclist ended (or it is not in
// the segment).
func (d *doclistDecoder) page(a []byte, term []byte) (more bool, err error) {
	nn := len(a)
	if nn < 4 {
		return false, corrupt(1)
	}
	szLeaf := int(binary.BigEndian.Uint16(a[2:4]))
	if szLeaf < 4 || szLeaf > nn {
		return false, corrupt(2)
	}
	// varint reads a varint at off, bounded by end; ok false when cut short.
	varint := func(off, end int) (uint64, int, bool) {
		if off >= end {
			return 0, off, false
		}
		v, n := fts5Varint(a[off:end])
		return v, off + n, n > 0
	}
	// endOfDoclist is where the first term of the page starts (nn+1 when it has none).
	endOfDoclist := nn + 1
	if szLeaf < nn {
		v, _, ok := varint(szLeaf, nn)
		if !ok || v < 4 || int(v) >= szLeaf {
			return false, corrupt(3)
		}
		endOfDoclist = int(v)
	}

	var off int
	switch d.state {
	case seekTerm:
		if szLeaf >= nn { // no term on the page %_idx named
			return false, corrupt(4)
		}
		var found bool
		if off, endOfDoclist, found, err = leafSeek(a, szLeaf, term); err != nil || !found {
			return false, err
		}
		if off >= szLeaf {
			d.state = afterTerm
			return true, nil
		}
		v, o, ok := varint(off, szLeaf)
		if !ok {
			return false, corrupt(5)
		}
		d.rowid, off = int64(v), o
	case afterTerm:
		v, o, ok := varint(4, szLeaf)
		if !ok {
			return false, corrupt(6)
		}
		d.rowid, off = int64(v), o
	case inPoslist:
		off = 4
		n := min(d.rem, szLeaf-4)
		if err := d.count(a[off : off+n]); err != nil {
			return false, err
		}
		d.rem -= n
		if off += n; d.rem > 0 {
			return true, nil
		}
		if off >= szLeaf {
			d.state = atRowid
			return true, nil
		}
		if first := int(binary.BigEndian.Uint16(a[0:2])); off >= endOfDoclist {
			return false, nil // the next term
		} else if first != off {
			return false, corrupt(7)
		}
		v, o, ok := varint(off, szLeaf) // a page's first rowid is whole, not a delta
		if !ok {
			return false, corrupt(8)
		}
		d.rowid, off = int64(v), o
	case atRowid:
		first := int(binary.BigEndian.Uint16(a[0:2]))
		switch {
		case first != 0 && first < szLeaf:
			v, o, ok := varint(first, szLeaf)
			if !ok {
				return false, corrupt(9)
			}
			d.rowid, off = int64(v), o
		case szLeaf < nn:
			return false, nil // the page starts with the next term
		default:
			return true, nil // a page of poslist bytes only: not for this term's doclist
		}
	}
	// Entries: a poslist size, the poslist, and the next rowid's delta, until the page or the
	// doclist ends.
	for {
		if d.rowid < 1 || len(d.seqs) > d.from && d.rowid <= d.seqs[len(d.seqs)-1] {
			return false, corrupt(10)
		}
		sz, o, ok := varint(off, szLeaf)
		if !ok {
			return false, corrupt(11)
		}
		if sz&1 != 0 {
			return false, fmt.Errorf("read doclist: a delete entry: %w", errNoPostings)
		}
		off = o
		d.seqs = append(d.seqs, d.rowid)
		d.tf = append(d.tf, 0)
		d.rem, d.start = int(sz>>1), true
		if d.rem == 0 {
			return false, corrupt(12) // detail=full: every entry has a position
		}
		n := min(d.rem, szLeaf-off)
		if err := d.count(a[off : off+n]); err != nil {
			return false, err
		}
		d.rem -= n
		off += n
		if d.rem > 0 {
			d.state = inPoslist
			return true, nil
		}
		if off >= szLeaf {
			d.state = atRowid
			return true, nil
		}
		if off >= endOfDoclist {
			return false, nil
		}
		v, o, ok := varint(off, szLeaf)
		if !ok || v == 0 {
			return false, corrupt(13)
		}
		d.rowid, off = d.rowid+int64(v), o
	}
}

// count adds the positions in b, part of a poslist, to the row's instances: one per varint
// (each ends with a byte below 0x80). A varint of 0 or 1 (a column marker) is not one the
// contract's one-column table holds.
func (d *doclistDecoder) count(b []byte) error {
	n := uint32(0)
	for _, c := range b {
		if d.start && c <= 1 {
			return fmt.Errorf("read doclist: a poslist of more than one column: %w", errNoPostings)
		}
		if d.start = c < 0x80; d.start {
			n++
		}
	}
	d.tf[len(d.tf)-1] += n
	return nil
}

// leafSeek finds term on leaf page a as fts5LeafSeek does (an exact search): off is where its
// doclist starts (its first rowid), end where the next term starts (len(a)+1: none on the page).
func leafSeek(a []byte, szLeaf int, term []byte) (off, end int, found bool, err error) {
	n := len(a)
	varint := func(at int) (int, int, bool) {
		if at >= n {
			return 0, at, false
		}
		v, k := fts5Varint(a[at:])
		return int(v), at + k, k > 0 && v <= 1<<31
	}
	pgidx := szLeaf
	termOff, pgidx, ok := varint(pgidx)
	if !ok || termOff > n {
		return 0, 0, false, corrupt(14)
	}
	off = termOff
	nMatch, nKeep, nNew := 0, 0, 0
	for {
		if nNew, off, ok = varint(off); !ok {
			return 0, 0, false, corrupt(15)
		}
		if nKeep < nMatch {
			return 0, 0, false, nil
		}
		if off+nNew > n {
			return 0, 0, false, corrupt(16)
		}
		if nKeep == nMatch {
			nCmp := min(nNew, len(term)-nMatch)
			i := 0
			for i < nCmp && a[off+i] == term[nMatch+i] {
				i++
			}
			nMatch += i
			if nMatch == len(term) {
				if i == nNew {
					break // found
				}
				return 0, 0, false, nil
			}
			if i < nNew && a[off+i] > term[nMatch] {
				return 0, 0, false, nil
			}
		}
		if pgidx >= n {
			return 0, 0, false, nil // past the page's last term: not in the segment
		}
		var delta int
		if delta, pgidx, ok = varint(pgidx); !ok {
			return 0, 0, false, corrupt(17)
		}
		termOff += delta
		off = termOff
		if off >= n {
			return 0, 0, false, corrupt(18)
		}
		if nKeep, off, ok = varint(off); !ok {
			return 0, 0, false, corrupt(19)
		}
	}
	off += nNew
	end = n + 1
	if pgidx < n {
		delta, _, ok := varint(pgidx)
		if !ok {
			return 0, 0, false, corrupt(20)
		}
		end = termOff + delta
	}
	return off, end, true, nil
}
