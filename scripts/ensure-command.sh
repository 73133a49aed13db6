#!/bin/sh
# Makes sure a command is installed: ensure-command.sh COMMAND PACKAGE WHY.
# On Debian or Ubuntu, as root, installs PACKAGE; elsewhere says what to
# install and why it is needed.
set -eu
command="$1" package="$2" why="$3"
command -v "$command" >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "$command missing: installing $package" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null
  command -v "$command" >/dev/null 2>&1 && exit 0
fi
echo "$command is missing; $why. Install it: apt-get install $package (or dnf install $package)" >&2
exit 1
