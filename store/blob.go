package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// BlobID returns the blob id of text: the first 16 lowercase hex digits of the SHA-256 of its
// UTF-8 bytes (contract: Location, blobs/<id>.txt).
func BlobID(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:8])
}

// ValidBlobID reports whether id has the blob id form: 16 lowercase hex (contract: blobs).
func ValidBlobID(id string) bool {
	if len(id) != 16 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (r *Root) blobPath(id string) string { return filepath.Join(r.dir, "blobs", id+".txt") }

// WriteBlob stores text as blobs/<id>.txt (id = BlobID(text)), mode 600, written atomically;
// an existing blob of the right size is not rewritten, only its mtime is set to now, so a
// concurrent retention sweep treats it as fresh (see Sweep).
func (r *Root) WriteBlob(text string) (id string, err error) {
	id = BlobID(text)
	path := r.blobPath(id)
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == int64(len(text)) {
		now := time.Now()
		_ = os.Chtimes(path, now, now)
		return id, nil
	}
	if err := writeFileAtomic(path, []byte(text)); err != nil {
		return "", r.noteWrite("", path, fmt.Errorf("write blob: %w", err))
	}
	return id, nil
}

// ReadBlob returns the text of blobs/<id>.txt. An id that is not 16 lowercase hex digits is an
// error; a missing blob gives an error wrapping fs.ErrNotExist.
func (r *Root) ReadBlob(id string) (string, error) {
	if !ValidBlobID(id) {
		return "", fmt.Errorf("read blob: invalid id %q: want 16 lowercase hex digits", id)
	}
	b, err := os.ReadFile(r.blobPath(id))
	if err != nil {
		return "", fmt.Errorf("read blob %s: %w", id, err)
	}
	return string(b), nil
}
