#!/bin/sh
# Playwright for Python (pinned in console-requirements.txt) in a venv
# under target/, reinstalled when that file changes. Several test processes
# may ask at once: one installs, the others wait. Playwright's own browser
# download is never used: the tests point it at the installed Chromium.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
venv=$target/console-venv
reqs=$root/scripts/console-requirements.txt
mkdir -p "$target"
exec 9>"$target/.console-venv.lock"
flock -w 600 9
if ! cmp -s "$reqs" "$venv/requirements.txt" 2>/dev/null; then
  ${BERTH_PYTHON:-python3} -m venv --clear "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$reqs"
  cp "$reqs" "$venv/requirements.txt"
fi
