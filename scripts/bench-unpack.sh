#!/usr/bin/env bash
# On the other machine (see bench-pack.sh), as root:
#   tar -xJf berthpkg.tar.xz -C /opt && /opt/berthpkg/unpack.sh
# Puts PostgreSQL where Berth's launcher looks (/usr/lib/postgresql/N/bin, its
# share files in /usr/share/postgresql/N) and wrk on PATH. Then, for example:
#   cd /tmp && /opt/berthpkg/bin/berthd with-postgres -- /opt/berthpkg/bin/berth-bench --seconds 10
set -eu
p=/opt/berthpkg; v=$(cat $p/PGVERSION)
mkdir -p /usr/lib/postgresql/$v/bin /usr/lib/postgresql/$v/lib /usr/share/postgresql
cp $p/bin/postgres $p/bin/initdb $p/bin/pg_ctl $p/bin/pgbench $p/bin/psql $p/bin/pg_isready /usr/lib/postgresql/$v/bin/
cp $p/pglib/*.so /usr/lib/postgresql/$v/lib/
rm -rf /usr/share/postgresql/$v; cp -r $p/share /usr/share/postgresql/$v
if [ -x $p/bin/wrk ] && ! command -v wrk >/dev/null; then cp $p/bin/wrk /usr/local/bin/; fi
/usr/lib/postgresql/$v/bin/postgres -V
