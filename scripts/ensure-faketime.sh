#!/bin/sh
# Makes sure libfaketime is installed: the clock tests run berthd with its
# wall clock shifted (LD_PRELOAD) to check that nothing decides on it. On
# Debian or Ubuntu, as root, installs it; elsewhere says what to install.
set -eu
have() {
  for d in /usr/lib/*-linux-gnu/faketime /usr/lib64/faketime /usr/lib/faketime; do
    [ -e "$d/libfaketime.so.1" ] && return 0
  done
  return 1
}
have && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "libfaketime missing: installing faketime" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime >/dev/null
  have && exit 0
fi
echo "libfaketime (libfaketime.so.1) is missing; the clock tests need it." >&2
echo "Install it: Debian/Ubuntu: apt-get install faketime; Fedora: dnf install libfaketime" >&2
exit 1
