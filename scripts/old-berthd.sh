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
resolve() { git rev-parse --verify -q "$ref^{commit}" || git rev-parse --verify -q "$fallback^{commit}"; }
# A shallow clone (CI's may be) lacks the release: fetch the history once.
if ! resolve >/dev/null && [ "$(git rev-parse --is-shallow-repository)" = true ]; then
  git fetch -q --unshallow --tags >&2 || true
fi
commit=$(resolve) || {
  echo "neither $ref nor $fallback is in this clone, nor could its history be fetched" >&2
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
