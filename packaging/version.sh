#!/usr/bin/env bash
# Prints the semantic version (https://semver.org) of the checkout it runs in, from its git tags.
# The Makefile's VERSION and packaging/dist.sh use it; the binary gets it with
# -X github.com/smarter-compact/smarter-compact/app.version=… and `smarter-compact version`
# prints it. Release tags are vX.Y.Z or vX.Y.Z-PRE (e.g. v1.2.0-rc.1).
#
#   HEAD is tag v1.2.3, clean         1.2.3
#   3 commits after v1.2.3            1.2.4-dev.3+<short commit>   (after 1.2.3, before 1.2.4)
#   3 commits after v1.2.0-rc.1       1.2.0-rc.1.dev.3+<short commit>
#   no release tag reachable          0.0.0-dev+<short commit>
#   uncommitted changes to tracked    any of the above with .dirty added to the build part,
#   files                             e.g. 1.2.3+<short commit>.dirty, 0.0.0-dev+<short>.dirty
#   not a git checkout                0.0.0-dev+unknown
#
# The short commit is 7 hex digits (more when git needs them to be unique). Untracked and
# git-ignored files (dist/, bin/) do not make a tree dirty.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! commit=$(git rev-parse --short=7 HEAD 2>/dev/null); then
  echo "0.0.0-dev+unknown"
  exit 0
fi
dirty=""
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  dirty=".dirty"
fi

# The nearest release tag and how many commits HEAD is past it.
tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*.[0-9]*.[0-9]*' 2>/dev/null || true)
if [ -z "$tag" ]; then
  echo "0.0.0-dev+${commit}${dirty}"
  exit 0
fi
ahead=$(git rev-list --count "${tag}..HEAD")
v=${tag#v}
if ! [[ "$v" =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "packaging/version.sh: tag $tag is not vX.Y.Z or vX.Y.Z-PRE; delete it or tag a semantic version" >&2
  exit 1
fi
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]} patch=${BASH_REMATCH[3]} pre=${BASH_REMATCH[4]}

if [ "$ahead" = 0 ]; then
  if [ -n "$dirty" ]; then
    echo "${v}+${commit}${dirty}"
  else
    echo "$v"
  fi
elif [ -n "$pre" ]; then
  echo "${v}.dev.${ahead}+${commit}${dirty}"
else
  echo "${major}.${minor}.$((patch + 1))-dev.${ahead}+${commit}${dirty}"
fi
