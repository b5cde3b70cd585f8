package installer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with b (DESIGN.md §8): a temporary file in the same
// directory, given mode, synced, then renamed over path, and the directory synced, so a
// reader sees the old bytes or the new ones and never a torn file, and no moment passes
// without a file. Missing directories are made 0700.
//
// A symbolic link at path (a dotfiles manager's link to settings.json or config.toml) stays
// a link: the file it points to is written, in that file's directory. A link whose target
// does not exist yet creates the target, since that is where the user keeps the file; a
// link loop is an error (FollowLink). The errors are the operating system's, unwrapped.
func WriteFileAtomic(path string, b []byte, mode os.FileMode) error {
	_, _, err := writeAtomic(path, b, mode)
	return err
}

// writeFileAtomic is WriteFileAtomic with the error naming the step: "make <dir>: …" or
// "write <path>: …", path being the link's target.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	target, mkdir, err := writeAtomic(path, b, mode)
	switch {
	case err == nil:
		return nil
	case mkdir:
		return fmt.Errorf("make %s: %w", filepath.Dir(target), err)
	default:
		return fmt.Errorf("write %s: %w", target, err)
	}
}

// writeAtomic is WriteFileAtomic; it returns the path written (the link's target) and
// whether the error came from making its directory.
func writeAtomic(path string, b []byte, mode os.FileMode) (target string, mkdir bool, err error) {
	path, err = FollowLink(path)
	if err != nil {
		return path, false, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return path, true, err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return path, false, err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(b); err != nil {
		return path, false, err
	}
	if err := f.Chmod(mode.Perm()); err != nil {
		return path, false, err
	}
	if err := f.Sync(); err != nil {
		return path, false, err
	}
	if err := f.Close(); err != nil {
		return path, false, err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return path, false, err
	}
	syncDir(dir)
	return path, false, nil
}

// removeFile deletes path (a symlink's target, like writeFileAtomic); absent is fine.
func removeFile(path string) error {
	path, err := FollowLink(path)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// readFile reads path; an absent file is (nil, false, nil).
func readFile(path string) ([]byte, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// fileMode is path's permission bits, or def when it does not exist.
func fileMode(path string, def os.FileMode) os.FileMode {
	if fi, err := os.Stat(path); err == nil {
		return fi.Mode().Perm()
	}
	return def
}

// maxLinks bounds the symbolic links FollowLink follows (Linux's own limit is 40).
const maxLinks = 40

// FollowLink returns the file path names after following symbolic links in its last
// element, one by one, so that a link whose target does not exist yet gives the path to
// create (the rule of WriteFileAtomic). The directories on the way need no resolving: a
// rename through them lands in the target. A loop is an error.
func FollowLink(path string) (string, error) {
	for range maxLinks {
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return path, nil // a file, a folder, or nothing yet: written as is
		}
		target, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", path)
}

// syncDir makes a rename in dir durable where the OS allows it (not on Windows, which cannot
// open a directory for syncing).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // best effort: the rename itself already happened
		d.Close()
	}
}
