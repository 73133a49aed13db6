#!/bin/sh
# Makes sure wrk is installed: `make bench` drives Placement claims over
# HTTP with it, as an outside load generator. On Debian or Ubuntu, as
# root, installs it; elsewhere says what to install.
set -eu
command -v wrk >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "wrk missing: installing it" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
  command -v wrk >/dev/null 2>&1 && exit 0
fi
echo "wrk is missing; make bench drives HTTP claims with it. Install it: apt-get install wrk (or dnf install wrk)" >&2
exit 1
