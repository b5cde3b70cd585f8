#!/usr/bin/env bash
# `make dist`: every release artifact this machine can build, into dist/ (emptied first),
# named smarter-compact_<version>_<os>_<arch>.<ext>:
#   …_linux_amd64.tar.gz  the hardened, stripped binary with LICENSE, README.md and the man page
#   …_linux_amd64.deb     /usr/bin/smarter-compact, .desktop entry, icons, man page, DEP-5 copyright
#   …_linux_amd64.rpm     the same files (license and README in rpm's places)
#   the Windows zip and MSI, from packaging/windows/build.sh when it exists
#   …_checksums.txt       sha256sum lines over every other file in dist/
# VERSION from the environment (the Makefile passes its own), else packaging/version.sh.
# Needs: go, gcc, help2man, ImageMagick's convert with its SVG coder, tar, gzip, sha256sum;
# nfpm comes from the pinned tools module (.ci/tools/go.mod).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS

VERSION=${VERSION:-$(bash packaging/version.sh)}
if ! [[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$ ]]; then
  echo "packaging/dist.sh: VERSION=$VERSION is not a semantic version (X.Y.Z[-pre][+build]); unset it to use packaging/version.sh" >&2
  exit 1
fi
export VERSION
# The one maintainer line of the packages (nfpm.yaml) and of the Debian changelog.
export MAINTAINER="The Smarter Compact authors <maintainers@users.noreply.a-seed-32753d14.example>"

missing=()
for tool in go gcc help2man convert tar gzip sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "packaging/dist.sh: missing ${missing[*]}; on Debian/Ubuntu: apt-get install golang gcc help2man imagemagick libmagickcore-6.q16-6-extra" >&2
  exit 1
fi

# Every timestamp inside the artifacts is the commit's, so two builds of one commit match.
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
export SOURCE_DATE_EPOCH

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
rm -rf dist
mkdir -p dist
dist=$root/dist
base=smarter-compact_${VERSION}_linux_amd64
echo "dist: version $VERSION"

# The Linux binary, hardened the way Debian builds C (FORTIFY, stack protector, full RELRO,
# BIND_NOW, PIE) for the cgo part (SQLite), stripped (-s -w), without build paths (-trimpath).
echo "dist: building linux/amd64 (hardened, stripped)"
GOOS=linux GOARCH=amd64 CGO_ENABLED=1 \
  CGO_CFLAGS='-O2 -g -D_FORTIFY_SOURCE=2 -fstack-protector-strong' \
  CGO_LDFLAGS='-Wl,-z,relro,-z,now' \
  go build -tags sqlite_fts5 -trimpath -buildmode=pie \
  -ldflags "-s -w -X github.com/smarter-compact/smarter-compact/app.version=$VERSION" \
  -o "$stage/smarter-compact" .

# The man page is generated from the binary's own help text (app/cli.go's usage), so the
# command list is written once. NAME is the help's first line up to its colon.
name=$("$stage/smarter-compact" help | sed -n '1{s/^smarter-compact //;s/:$//;p}')
LC_ALL=C.UTF-8 help2man --locale=C.UTF-8 --no-info --help-option=help --version-string="$VERSION" \
  --name="$name" --section=1 --source="smarter-compact $VERSION" --manual="User Commands" \
  --output="$stage/smarter-compact.1" "$stage/smarter-compact"
gzip -9n -c "$stage/smarter-compact.1" >"$stage/smarter-compact.1.gz"

# The 256 px icon from the one SVG source.
convert -background none -density 768 packaging/icons/smarter-compact.svg -resize 256x256 \
  -strip "png32:$stage/smarter-compact.png"

# Debian's copyright file (DEP-5): the header and the license texts from the files they live in.
license_paragraph() { # name, file: a DEP-5 stand-alone License paragraph from the text after "Permission"
  echo
  echo "License: $1"
  sed -n '/^Permission/,$p' "$2" | sed 's/^$/./; s/^/ /'
}
{
  cat packaging/linux/copyright.in
  license_paragraph MIT LICENSE
  license_paragraph 0BSD assets/web/htmx-LICENSE.txt
} >"$stage/copyright"

# Debian's changelog: one entry for this version. Debian's version of X.Y.Z-pre+build is
# X.Y.Z~pre+build (a pre-release sorts before its release), with the package release -1.
debver=$VERSION
if [[ "$debver" =~ ^([0-9.]+)-([^+]+)(.*)$ ]]; then
  debver="${BASH_REMATCH[1]}~${BASH_REMATCH[2]}${BASH_REMATCH[3]}"
fi
{
  echo "smarter-compact (${debver}-1) unstable; urgency=medium"
  echo
  echo "  * Release $VERSION."
  echo "    The project's git history lists the changes."
  echo
  echo " -- $MAINTAINER  $(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$stage/changelog.Debian.gz"

# The tar.gz: one folder named like the archive.
echo "dist: $base.tar.gz"
mkdir -p "$stage/tar/$base"
cp "$stage/smarter-compact" LICENSE README.md "$stage/smarter-compact.1" "$stage/tar/$base/"
chmod 0755 "$stage/tar/$base/smarter-compact"
chmod 0644 "$stage/tar/$base/LICENSE" "$stage/tar/$base/README.md" "$stage/tar/$base/smarter-compact.1"
tar -C "$stage/tar" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
  -cf - "$base" | gzip -9n >"dist/$base.tar.gz"

export STAGE=$stage
for packager in deb rpm; do
  echo "dist: $base.$packager"
  go tool -modfile=.ci/tools/go.mod nfpm package --config packaging/linux/nfpm.yaml \
    --packager "$packager" --target "dist/$base.$packager" >/dev/null
done

if [ -f packaging/windows/build.sh ]; then
  echo "dist: Windows artifacts (packaging/windows/build.sh)"
  VERSION=$VERSION DIST=$dist bash packaging/windows/build.sh
else
  echo "dist: no packaging/windows/build.sh in this checkout, so no Windows artifacts"
fi

sums=smarter-compact_${VERSION}_checksums.txt
(cd dist && find . -maxdepth 1 -type f ! -name "$sums" -printf '%f\n' | LC_ALL=C sort | xargs -r sha256sum >"$sums")
echo "dist: $sums ($(wc -l <"dist/$sums") files)"
echo "dist: done in $((SECONDS - start)) s"
ls -l dist
