#!/bin/sh
# Makes sure headless Chromium is installed, and Playwright for Python in
# target/console-venv to drive it: the console's browser tests
# (tests/console) need both, and skip loudly without them.
# On Debian or Ubuntu, as root, installs the distribution's chromium;
# elsewhere says what to install. (Recommends are skipped: a font is all the
# pages need beyond the browser.)
set -eu
found() {
  for b in chromium chromium-browser; do command -v "$b" >/dev/null 2>&1 && return 0; done
  return 1
}
if ! found; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "chromium missing: installing it" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null
  fi
fi
if ! found; then
  echo "chromium is missing; the console's browser tests will skip. Install it: apt-get install chromium" >&2
  exit 0
fi
if ! sh "$(dirname "$0")/console-venv.sh"; then
  echo "*** Playwright for Python could not be installed into target/console-venv: the console's browser tests will skip ***" >&2
fi
