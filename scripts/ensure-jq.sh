#!/bin/sh
# Makes sure jq is installed: the README's tour pipes answers through it,
# and a test runs the tour command by command. On Debian or Ubuntu, as
# root, installs it; elsewhere says what to install.
set -eu
command -v jq >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "jq missing: installing it" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null
  command -v jq >/dev/null 2>&1 && exit 0
fi
echo "jq is missing; the README tour test needs it. Install it: apt-get install jq (or dnf install jq)" >&2
exit 1
