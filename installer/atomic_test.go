package installer

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestWriteFileAtomicLinks decides the one symlink rule of WriteFileAtomic: a link stays a
// link and its target is written; a link whose target does not exist yet creates the target
// (where the user keeps the file), it is not replaced by a file; a loop is an error.
func TestWriteFileAtomicLinks(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need a privilege on Windows")
	}
	dotfiles, conf := t.TempDir(), t.TempDir()
	target := filepath.Join(dotfiles, "settings.json")
	if err := os.WriteFile(target, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(conf, "settings.json")
	if err := os.Symlink("../"+filepath.Base(dotfiles)+"/settings.json", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(link, []byte("{\"a\": 1}\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	isLink := func(p string) bool {
		fi, err := os.Lstat(p)
		return err == nil && fi.Mode()&fs.ModeSymlink != 0
	}
	if !isLink(link) {
		t.Error("the link was replaced by a file")
	}
	if b, _ := os.ReadFile(target); string(b) != "{\"a\": 1}\n" {
		t.Errorf("the target has %q", b)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o640 {
		t.Errorf("the target's mode is %o, want 640", fi.Mode().Perm())
	}

	dangling := filepath.Join(conf, "new.toml")
	if err := os.Symlink(filepath.Join(dotfiles, "sub", "new.toml"), dangling); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(dangling, []byte("x = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !isLink(dangling) {
		t.Error("the link to a missing file was replaced by a file")
	}
	if b, _ := os.ReadFile(filepath.Join(dotfiles, "sub", "new.toml")); string(b) != "x = 1\n" {
		t.Errorf("the missing target was not created: %q", b)
	}
	if err := removeFile(dangling); err != nil {
		t.Fatal(err)
	}
	if !isLink(dangling) {
		t.Error("removeFile removed the link, not its target")
	}
	if _, err := os.Stat(filepath.Join(dotfiles, "sub", "new.toml")); !os.IsNotExist(err) {
		t.Errorf("removeFile left the target: %v", err)
	}

	loop := filepath.Join(conf, "loop.toml")
	if err := os.Symlink("loop.toml", loop); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(loop, []byte("x = 1\n"), 0o600); err == nil {
		t.Error("a link to itself was written")
	}
	for _, dir := range []string{dotfiles, conf} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if filepath.Ext(e.Name()) != ".json" && filepath.Ext(e.Name()) != ".toml" && e.Name() != "sub" {
				t.Errorf("%s: left behind %s", dir, e.Name())
			}
		}
	}
}
