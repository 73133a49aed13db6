#!/bin/sh
# Builds berthd of an earlier release, for the upgrade test:
#   old-berthd.sh REF FALLBACK_COMMIT
# REF (a tag) is resolved in this clone; a clone without tags uses
# FALLBACK_COMMIT. The release's sources (git archive) go under
# target/upgrade/<commit>, built there with a target directory of their own
# (debug), so this tree's builds are untouched. Prints the binary's path,
# target/upgrade/<commit>/berthd; a second run finds it there.
set -eu
ref="$1" fallback="$2"
commit=$(git rev-parse --verify -q "$ref^{commit}" || git rev-parse --verify -q "$fallback^{commit}") || {
  echo "neither $ref nor $fallback is in this clone (a shallow clone? fetch it)" >&2
  exit 1
}
top=$(pwd)/target/upgrade
src="$top/$commit"
bin="$src/berthd"
if [ ! -x "$bin" ]; then
  rm -rf "$src"
  mkdir -p "$src"
  git archive "$commit" | tar -x -C "$src"
  # build.rs names the commit from git: stop git finding this clone around
  # the sources (it would name this tree's commit); it says `unknown`.
  (cd "$src" && GIT_CEILING_DIRECTORIES="$top" CARGO_TARGET_DIR="$top/target" \
    cargo build --locked -p berthd >&2)
  cp "$top/target/debug/berthd" "$bin"
fi
echo "$bin"
