#!/usr/bin/env bash
# A CycloneDX SBOM of the smarter-compact binary for one target OS (amd64, cgo), for goreleaser's
# sboms step: bash packaging/sbom.sh <goos> <output.cdx.json>. It runs from anywhere.
#
# cyclonedx-gomod (pinned in .ci/tools/go.mod) reads GOOS/GOARCH from its environment to pick
# the target's files, so the tool is built for this host first (`go tool -n`) and only then run
# with the target's environment: `GOOS=windows go tool cyclonedx-gomod` would build a Windows
# tool that cannot run here.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: bash packaging/sbom.sh <goos> <output.cdx.json>" >&2
  exit 2
fi
goos="$1" out="$(realpath -m "$2")"
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
tool="$(go tool -modfile=.ci/tools/go.mod -n cyclonedx-gomod)"
GOOS="$goos" GOARCH=amd64 CGO_ENABLED=1 "$tool" app -json -licenses -std -main . -output "$out" .
