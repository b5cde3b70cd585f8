package store

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDir(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "SMARTER_COMPACT_STATE_DIR" {
				return v
			}
			return ""
		}
	}
	type fs struct{ newDir, legacyDir, legacyFile bool }
	cases := []struct {
		name    string
		env     string
		goos    string
		appData string
		fs      fs
		wantRel string // relative to home when want is ""
		want    string
	}{
		{name: "default", goos: "linux", wantRel: ".local/share/smarter-compact/context"},
		{name: "darwin uses the same default", goos: "darwin", wantRel: ".local/share/smarter-compact/context"},
		{name: "legacy used when only it exists", goos: "linux", fs: fs{legacyDir: true}, wantRel: ".local/share/openmem/context"},
		{name: "new default wins when both exist", goos: "linux", fs: fs{newDir: true, legacyDir: true}, wantRel: ".local/share/smarter-compact/context"},
		{name: "legacy that is a file is ignored", goos: "linux", fs: fs{legacyFile: true}, wantRel: ".local/share/smarter-compact/context"},
		{name: "env var", env: "/srv/state", goos: "linux", want: "/srv/state/context"},
		{name: "env var beats legacy", env: "/srv/state", goos: "linux", fs: fs{legacyDir: true}, want: "/srv/state/context"},
		{name: "env var ASCII whitespace trimmed", env: " \t\n\v\f\r/srv/state \t\n\v\f\r", goos: "linux", want: "/srv/state/context"},
		{name: "env var other whitespace kept", env: "\u00a0/srv", goos: "linux", want: "\u00a0/srv/context"},
		{name: "env var only whitespace means default", env: " \t\n ", goos: "linux", wantRel: ".local/share/smarter-compact/context"},
		{name: "windows LOCALAPPDATA", goos: "windows", appData: `C:\Users\u\AppData\Local`, want: `C:\Users\u\AppData\Local\smarter-compact\context`},
		{name: "windows without LOCALAPPDATA", goos: "windows", want: "HOME" + `\AppData\Local\smarter-compact\context`},
		{name: "windows ignores the legacy dir", goos: "windows", appData: `C:\L`, fs: fs{legacyDir: true}, want: `C:\L\smarter-compact\context`},
		{name: "windows env var", env: `D:\state`, goos: "windows", appData: `C:\L`, want: `D:\state\context`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			if c.fs.newDir {
				if err := os.MkdirAll(filepath.Join(home, ".local/share/smarter-compact/context"), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if c.fs.legacyDir {
				if err := os.MkdirAll(filepath.Join(home, ".local/share/openmem/context"), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if c.fs.legacyFile {
				if err := os.MkdirAll(filepath.Join(home, ".local/share/openmem"), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(home, ".local/share/openmem/context"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			want := c.want
			if c.goos != "windows" {
				want = filepath.FromSlash(want) // a Linux or macOS case run on a Windows host joins with '\'
			}
			if want == "" {
				want = filepath.Join(home, c.wantRel)
			}
			if c.goos == "windows" && c.appData == "" && c.env == "" {
				want = home + want[len("HOME"):]
			}
			if got := Dir(env(c.env), home, c.goos, c.appData); got != want {
				t.Errorf("Dir = %q, want %q", got, want)
			}
		})
	}
}
