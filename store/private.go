package store

import (
	"fmt"
	"io/fs"
	"path/filepath"
)

// OpenToOthers walks the context root dir and returns the entries whose mode gives group or
// others any permission (the store is private to its user: folders 0700, files 0600), each
// as "<path> (<octal mode>)", in walk order; an entry that cannot be read is listed as
// "<path> (<error>)". Symbolic links are not followed or listed. On Windows modes carry no
// such bits, so the answer says nothing there. `doctor` reports the list.
func OpenToOthers(dir string) []string {
	var loose []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			loose = append(loose, fmt.Sprintf("%s (%v)", p, err))
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if info, err := d.Info(); err == nil && info.Mode().Perm()&0o077 != 0 {
			loose = append(loose, fmt.Sprintf("%s (%o)", p, info.Mode().Perm()))
		}
		return nil
	})
	return loose
}
