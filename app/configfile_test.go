package app

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy/config"
	"github.com/smarter-compact/smarter-compact/web"
)

// TestWriteConfigFileSymlink: a config.toml that is a symbolic link (kept in a dotfiles
// repository) stays one: the file it points to gets the new text, keeps its mode, and the
// temporary file is made next to it, not next to the link.
func TestWriteConfigFileSymlink(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need a privilege on Windows")
	}
	dotfiles, conf := t.TempDir(), t.TempDir()
	target := filepath.Join(dotfiles, "smarter-compact.toml")
	if err := os.WriteFile(target, []byte("[context_proxy.agents]\ncodex = true\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target, 0o640); err != nil { // past the umask
		t.Fatal(err)
	}
	link := filepath.Join(conf, "config.toml")
	rel, err := filepath.Rel(conf, target)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, link); err != nil { // relative, as dotfile managers make them
		t.Fatal(err)
	}
	// Through the state, as the dashboard saves.
	sys, _, _ := testSystem(t, env{})
	st, err := newState(stateOptions{Path: link, Sys: sys})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetAgent(config.AgentCodex, web.ModeOff); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(link)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("config.toml is no longer a symbolic link: %v %v", fi.Mode(), err)
	}
	if got := readText(t, target); got != "[context_proxy.agents]\ncodex = false\n" {
		t.Errorf("the link's target has %q", got)
	}
	if ti, _ := os.Stat(target); ti.Mode().Perm() != 0o640 {
		t.Errorf("the target's mode is %o, want its 640 kept", ti.Mode().Perm())
	}
	for _, dir := range []string{dotfiles, conf} {
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Errorf("%s holds %d entries, want 1 (no temporary file left)", dir, len(entries))
		}
	}
	// A link whose target does not exist yet: the target is created, the link kept.
	dangling := filepath.Join(conf, "new.toml")
	if err := os.Symlink(filepath.Join(dotfiles, "sub", "new.toml"), dangling); err != nil {
		t.Fatal(err)
	}
	if err := installer.ReplaceFile(dangling, []byte("x = 1\n")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(dangling); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Error("the dangling link was replaced")
	}
	if got := readText(t, filepath.Join(dotfiles, "sub", "new.toml")); got != "x = 1\n" {
		t.Errorf("the dangling link's target has %q", got)
	}
	// A loop is an error, not a hang.
	loop := filepath.Join(conf, "loop.toml")
	if err := os.Symlink("loop.toml", loop); err != nil {
		t.Fatal(err)
	}
	if err := installer.ReplaceFile(loop, []byte("x = 1\n")); err == nil {
		t.Error("a link to itself was written")
	}
}
