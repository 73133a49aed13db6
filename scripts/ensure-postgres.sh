#!/bin/sh
# Makes sure the PostgreSQL server binaries are installed. On Debian or
# Ubuntu, as root, installs them; elsewhere says what to install.
set -eu
have() {
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && return 0
  done
  command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1
}
have && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "PostgreSQL server binaries missing: installing postgresql and postgresql-contrib" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql postgresql-contrib >/dev/null
  have && exit 0
fi
echo "PostgreSQL server binaries (initdb, pg_ctl, postgres) are missing." >&2
echo "Install them: Debian/Ubuntu: apt-get install postgresql postgresql-contrib;" >&2
echo "Fedora: dnf install postgresql-server postgresql-contrib; macOS: brew install postgresql@15" >&2
exit 1
