#!/usr/bin/env bash
# Builds the Windows artifacts into $DIST (packaging/dist.sh runs it from `make dist`):
#
#   smarter-compact_<VERSION>_windows_amd64.zip   smarter-compact.exe (console CLI),
#                                                 smarter-compact-gui.exe (-H windowsgui: the
#                                                 Run value, the Start menu, double-clicks),
#                                                 LICENSE, README.md
#   smarter-compact_<VERSION>_windows_amd64.msi   per-user MSI (smarter-compact.wxs, wixl)
#
# Env: VERSION, the semantic version (default: bash packaging/version.sh); DIST, the output
# folder (default: dist/ at the repository root). Both exes are cross-built with cgo through
# mingw-w64 (SQLite), -trimpath, stripped, with the version linked in. The .ico for the MSI
# and its shortcut is rendered from packaging/icons/smarter-compact.svg with ImageMagick.
# Needs: go, x86_64-w64-mingw32-gcc (gcc-mingw-w64-x86-64), zip, wixl (wixl), convert
# (imagemagick). Run from anywhere: bash packaging/windows/build.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"

die() { echo "packaging/windows/build.sh: $*" >&2; exit 1; }

for tool in go x86_64-w64-mingw32-gcc zip wixl convert; do
  command -v "$tool" >/dev/null 2>&1 ||
    die "$tool is missing (Debian: apt-get install golang gcc-mingw-w64-x86-64 zip wixl imagemagick)"
done

if [ -z "${VERSION:-}" ]; then
  [ -f packaging/version.sh ] || die "VERSION is not set and packaging/version.sh is missing: run it as VERSION=X.Y.Z bash packaging/windows/build.sh"
  VERSION="$(bash packaging/version.sh)"
fi
DIST="${DIST:-$repo/dist}"
mkdir -p "$DIST"
DIST="$(cd "$DIST" && pwd)"

# The MSI's ProductVersion is numeric: major.minor.build, at most 255.255.65535. It is the
# X.Y.Z at the front of the semantic version; a dev build (0.0.0-dev+<commit>) gives 0.0.0.
# A pre-release X.Y.Z-rc.1 gives X.Y.Z too, so its MSI and the final release's share a
# version: MajorUpgrade still replaces one with the other (every build has a new ProductCode).
if [[ ! "$VERSION" =~ ^v?([0-9]+)\.([0-9]+)\.([0-9]+)([-+].*)?$ ]]; then
  die "VERSION=$VERSION is not a semantic version X.Y.Z[-pre][+build]: fix packaging/version.sh or the tag"
fi
major="${BASH_REMATCH[1]}" minor="${BASH_REMATCH[2]}" patch="${BASH_REMATCH[3]}"
if ((10#$major > 255 || 10#$minor > 255 || 10#$patch > 65535)); then
  die "VERSION=$VERSION cannot be an MSI version (major and minor at most 255, patch at most 65535)"
fi
msi_version="$((10#$major)).$((10#$minor)).$((10#$patch))"

for f in LICENSE README.md packaging/icons/smarter-compact.svg; do
  [ -f "$f" ] || die "$f is missing (the zip and the MSI ship it)"
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
bin="$work/bin"
mkdir -p "$bin"

ldflags="-s -w -X github.com/smarter-compact/smarter-compact/app.version=$VERSION"
# The GUI exe: no console (-H windowsgui), and app.subsystem tells it so (app/gui_windows.go:
# no arguments runs serve, output without a handle goes to the log file). GUI_LDFLAGS adds more.
gui_ldflags="$ldflags -H windowsgui -X github.com/smarter-compact/smarter-compact/app.subsystem=windowsgui ${GUI_LDFLAGS:-}"
export GOOS=windows GOARCH=amd64 CGO_ENABLED=1 CC=x86_64-w64-mingw32-gcc
echo "windows/amd64 $VERSION: smarter-compact.exe"
go build -tags sqlite_fts5 -trimpath -ldflags "$ldflags" -o "$bin/smarter-compact.exe" .
echo "windows/amd64 $VERSION: smarter-compact-gui.exe (-H windowsgui)"
go build -tags sqlite_fts5 -trimpath -ldflags "$gui_ldflags" -o "$bin/smarter-compact-gui.exe" .
unset GOOS GOARCH CC

cp LICENSE README.md "$bin/"
# Every size the Start menu, the taskbar and Add/Remove Programs ask for.
convert -background none -density 768 packaging/icons/smarter-compact.svg \
  -define icon:auto-resize=256,64,48,32,16 "$work/smarter-compact.ico"

name="smarter-compact_${VERSION}_windows_amd64"
rm -f "$DIST/$name.zip" "$DIST/$name.msi"
# -X: no extra file attributes (uid/gid), -j: flat, so the zip is the same on every machine
# apart from the times.
(cd "$bin" && zip -q -X -j "$DIST/$name.zip" smarter-compact.exe smarter-compact-gui.exe LICENSE README.md)
echo "wrote $DIST/$name.zip"

# wixl warns about Package/@InstallPrivileges and RemoveFolder attributes it does not know;
# those warnings are expected (packaging/README.md).
# wixl takes source paths relative to where it runs (absolute ones are not found).
(cd "$work" && wixl -a x64 -D Version="$msi_version" -D BinDir=bin -D Icon=smarter-compact.ico \
  -o "$DIST/$name.msi" "$here/smarter-compact.wxs")
[ -s "$DIST/$name.msi" ] || die "wixl wrote no $DIST/$name.msi"
echo "wrote $DIST/$name.msi (MSI version $msi_version)"
