// Package installertest holds the test helpers shared by the tests of installer and app: a
// fake systemctl for the systemd user-unit code paths, so neither needs a real user manager.
//
// It imports nothing of this module, and only tests may import it.
package installertest

import (
	"os"
	"path/filepath"
	"testing"
)

// SystemctlShim puts a fake systemctl first on PATH: it logs its arguments to the returned
// file, makes and removes the default.target.wants link on enable and disable like the
// real one, says "inactive" to is-active and succeeds at everything else. With
// SHIM_NO_MANAGER=1 it fails like a booted systemd without a user manager: everything but
// SYSTEMD_OFFLINE=1 calls. It sets HOME (to the returned home), XDG_CONFIG_HOME and PATH
// for the rest of t, so t may not be parallel.
func SystemctlShim(t *testing.T) (home, logFile string) {
	t.Helper()
	home = t.TempDir()
	bin := t.TempDir()
	logFile = filepath.Join(bin, "calls.log")
	script := `#!/bin/sh
echo "$*" >> "` + logFile + `"
args=""
for a in "$@"; do [ "$a" = --user ] || args="$args $a"; done
set -- $args
units="$HOME/.config/systemd/user"
if [ "$SHIM_NO_MANAGER" = 1 ] && [ "$SYSTEMD_OFFLINE" != 1 ]; then
  echo "Failed to connect to bus: No such file or directory" >&2
  exit 1
fi
case "$1" in
enable) mkdir -p "$units/default.target.wants" && ln -sf "$units/$2" "$units/default.target.wants/$2" ;;
disable) rm -f "$units/default.target.wants/$2" ;;
is-active) echo inactive; exit 3 ;;
esac
exit 0
`
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return home, logFile
}
