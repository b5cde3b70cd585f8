#!/usr/bin/env bash
# Build Smarter Compact.app for macOS on a Mac: a universal (arm64 + amd64) cgo binary,
# the bundle, its icon, a Developer ID signature with the hardened runtime, notarization
# and stapling, then dist/smarter-compact_<version>_darwin_universal.zip (and .dmg) and a
# Homebrew cask rendered for that zip. packaging/README.md, "macOS", says how to run it.
#
#   bash packaging/macos/build.sh                 # on a Mac, from the repository root
#   bash packaging/macos/build.sh --plist VERSION # any host: print the bundle's Info.plist
#
# Environment (all optional):
#   VERSION             semantic version; default: bash packaging/version.sh
#   DIST                output folder; default: dist
#   FORMATS             "zip dmg" (default), "zip" or "dmg"
#   CODESIGN_IDENTITY   e.g. "Developer ID Application: Jane Doe (TEAMID1234)"; empty: an
#                       ad-hoc signature (runs on this Mac only; no notarization)
#   NOTARY_PROFILE      a keychain profile from `xcrun notarytool store-credentials`, or
#   APPLE_ID, APPLE_TEAM_ID, APPLE_APP_PASSWORD  (an app-specific password) instead
#   SKIP_NOTARIZE=1     sign but do not notarize (a local test build)
#   RELEASE_URL         the cask's download folder; default: the GitHub release of v<version>
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
app_name="Smarter Compact"
exe=smarter-compact
min_macos=12.0 # Go 1.25+ needs macOS 12; keep in step with Info.plist.in and the cask

die() {
  echo "packaging/macos/build.sh: $*" >&2
  exit 1
}

# numeric_version X.Y.Z-anything+meta -> X.Y.Z (Apple wants up to three integers).
numeric_version() {
  local v=${1#v}
  v=${v%%[-+]*}
  [[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || v=0.0.0
  echo "$v"
}

render_plist() {
  local version=$1 numeric
  numeric=$(numeric_version "$version")
  # The version goes into XML: refuse what would need escaping rather than escape it.
  [[ $version =~ ^[0-9A-Za-z.+-]+$ ]] || die "version \"$version\": use letters, digits, '.', '+' and '-'"
  sed -e "s/@VERSION@/$version/g" -e "s/@BUNDLE_VERSION@/$numeric/g" "$here/Info.plist.in"
}

if [[ ${1:-} == --plist ]]; then
  [[ $# -eq 2 ]] || die "usage: build.sh --plist VERSION"
  render_plist "$2"
  exit 0
fi
[[ $# -eq 0 ]] || die "usage: build.sh (on a Mac) or build.sh --plist VERSION"

if [[ $(uname -s) != Darwin ]]; then
  die "this builds the macOS app and must run on a Mac with Xcode's command line tools (this is $(uname -s)); see packaging/README.md, \"macOS\". On any host, --plist VERSION prints the Info.plist."
fi
for tool in go xcrun lipo codesign iconutil sips ditto hdiutil plutil shasum; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is missing: install Xcode's command line tools (xcode-select --install) and Go 1.26"
done

cd "$root"
VERSION=${VERSION:-$(bash packaging/version.sh)}
DIST=${DIST:-dist}
FORMATS=${FORMATS:-zip dmg}
mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "version $VERSION, into $DIST"

# 1. One cgo build per architecture, then a universal binary.
for arch in arm64 amd64; do
  echo "-- go build darwin/$arch"
  GOOS=darwin GOARCH=$arch CGO_ENABLED=1 CC=clang MACOSX_DEPLOYMENT_TARGET=$min_macos \
    go build -trimpath -tags sqlite_fts5 \
    -ldflags "-s -w -X github.com/smarter-compact/smarter-compact/app.version=$VERSION" \
    -o "$work/$exe-$arch" .
done
lipo -create -output "$work/$exe" "$work/$exe-arm64" "$work/$exe-amd64"
archs=$(lipo -archs "$work/$exe")
[[ $archs == *arm64* && $archs == *x86_64* ]] || die "lipo made a binary for \"$archs\", not arm64 and x86_64"
echo "universal binary: $archs"

# 2. The bundle.
app="$work/$app_name.app"
mkdir -p "$app/Contents/MacOS" "$app/Contents/Resources"
cp "$work/$exe" "$app/Contents/MacOS/$exe"
render_plist "$VERSION" >"$app/Contents/Info.plist"
plutil -lint "$app/Contents/Info.plist"

# 3. The icon: the SVG rendered at 1024 px (rsvg-convert from Homebrew's librsvg, else
#    Quick Look), every iconset size with sips, then iconutil.
svg="$root/packaging/icons/smarter-compact.svg"
[[ -f $svg ]] || die "$svg is missing"
png="$work/icon-1024.png"
if command -v rsvg-convert >/dev/null 2>&1; then
  rsvg-convert -w 1024 -h 1024 -o "$png" "$svg"
else
  qlmanage -t -s 1024 -o "$work" "$svg" >/dev/null
  mv "$work/$(basename "$svg").png" "$png"
fi
iconset="$work/$exe.iconset"
mkdir -p "$iconset"
for size in 16 32 128 256 512; do
  sips -z "$size" "$size" "$png" --out "$iconset/icon_${size}x${size}.png" >/dev/null
  sips -z $((size * 2)) $((size * 2)) "$png" --out "$iconset/icon_${size}x${size}@2x.png" >/dev/null
done
iconutil -c icns -o "$app/Contents/Resources/$exe.icns" "$iconset"

# 4. Sign: the executable, then the bundle; the hardened runtime (--options=runtime) and a
#    secure timestamp, which notarization requires.
identity=${CODESIGN_IDENTITY:-}
if [[ -n $identity ]]; then
  sign=(codesign --force --options=runtime --timestamp --sign "$identity")
else
  echo "CODESIGN_IDENTITY is not set: ad-hoc signature, no notarization (this Mac only)"
  sign=(codesign --force --options=runtime --timestamp=none --sign -)
fi
"${sign[@]}" "$app/Contents/MacOS/$exe"
"${sign[@]}" "$app"
codesign --verify --deep --strict --verbose=2 "$app"

notarize() { # notarize FILE: submit, wait, fail on anything but Accepted
  local auth
  if [[ -n ${NOTARY_PROFILE:-} ]]; then
    auth=(--keychain-profile "$NOTARY_PROFILE")
  elif [[ -n ${APPLE_ID:-} && -n ${APPLE_TEAM_ID:-} && -n ${APPLE_APP_PASSWORD:-} ]]; then
    auth=(--apple-id "$APPLE_ID" --team-id "$APPLE_TEAM_ID" --password "$APPLE_APP_PASSWORD")
  else
    die "notarization needs NOTARY_PROFILE, or APPLE_ID, APPLE_TEAM_ID and APPLE_APP_PASSWORD (or SKIP_NOTARIZE=1)"
  fi
  echo "-- notarytool submit $(basename "$1") (waits for Apple)"
  xcrun notarytool submit "$1" "${auth[@]}" --wait --timeout 30m | tee "$work/notary.log"
  grep -q "status: Accepted" "$work/notary.log" || die "notarization of $1 was not accepted (see above; \`xcrun notarytool log <submission id>\` with the same credentials says why)"
}
notarized=false
if [[ -n $identity && ${SKIP_NOTARIZE:-} != 1 ]]; then
  notarized=true
fi

base="smarter-compact_${VERSION}_darwin_universal"
zip="$DIST/$base.zip"
# 5. The zip (ditto keeps the bundle's metadata and signature), notarized, the ticket
#    stapled to the app, and the zip made again around the stapled app.
if [[ " $FORMATS " == *" zip "* || $notarized == true ]]; then
  ditto -c -k --keepParent "$app" "$zip"
  if $notarized; then
    notarize "$zip"
    xcrun stapler staple "$app"
    xcrun stapler validate "$app"
    rm -f "$zip"
    ditto -c -k --keepParent "$app" "$zip"
    spctl --assess --type execute --verbose=2 "$app"
  fi
fi
# 6. The DMG: the app and an /Applications link, signed, notarized and stapled itself.
if [[ " $FORMATS " == *" dmg "* ]]; then
  stage="$work/dmg"
  mkdir -p "$stage"
  ditto "$app" "$stage/$app_name.app"
  ln -s /Applications "$stage/Applications"
  dmg="$DIST/$base.dmg"
  rm -f "$dmg"
  hdiutil create -volname "$app_name" -srcfolder "$stage" -fs HFS+ -format UDZO -ov "$dmg"
  if [[ -n $identity ]]; then
    codesign --force --timestamp --sign "$identity" "$dmg"
  fi
  if $notarized; then
    notarize "$dmg"
    xcrun stapler staple "$dmg"
  fi
fi
[[ " $FORMATS " == *" zip "* ]] || rm -f "$zip"

# 7. The Homebrew cask for the zip (dist/smarter-compact.rb), when the zip was made.
if [[ -f $zip ]]; then
  sha=$(shasum -a 256 "$zip" | cut -d' ' -f1)
  url=${RELEASE_URL:-https://github.com/smarter-compact/smarter-compact/releases/download/v$VERSION}
  sed -e "s|@VERSION@|$VERSION|g" -e "s|@SHA256@|$sha|g" -e "s|@URL@|$url|g" \
    "$here/smarter-compact.rb.tmpl" >"$DIST/smarter-compact.rb"
  if command -v brew >/dev/null 2>&1; then
    echo "cask: brew style --cask $DIST/smarter-compact.rb (brew audit needs the published release)"
    brew style --cask "$DIST/smarter-compact.rb" || echo "brew style found problems (above)" >&2
  fi
fi

echo "-- built"
(cd "$DIST" && ls -l "$base".* smarter-compact.rb 2>/dev/null && shasum -a 256 "$base".*)
$notarized || echo "not notarized: Gatekeeper blocks these on other Macs (set CODESIGN_IDENTITY and NOTARY_PROFILE)"
