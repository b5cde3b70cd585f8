package store

import (
	"context"
	"fmt"
)

// Texts returns the stored text of the rows with these fingerprints, by fingerprint; a
// fingerprint not stored is absent from the map. The proxy reads the cut turn's user text
// back this way for recall on trim once its rows gave their text to the store.
func (d *DB) Texts(fps []string) (map[string]string, error) {
	out := map[string]string{}
	if len(fps) == 0 {
		return out, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.use(); err != nil {
		return nil, err
	}
	in, args := inList(fps, nil)
	rows, err := d.conn.QueryContext(context.Background(), "SELECT fingerprint, text FROM messages WHERE fingerprint IN "+in, args...)
	if err != nil {
		return nil, fmt.Errorf("read row texts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var fp, text string
		if err := rows.Scan(&fp, &text); err != nil {
			return nil, fmt.Errorf("read row texts: %w", err)
		}
		out[fp] = text
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read row texts: %w", err)
	}
	return out, nil
}
