#!/usr/bin/env bash
# `make bench-pack`: packs what `berth-bench` needs on another x86-64 Linux
# machine that has neither PostgreSQL nor Rust (to see how Berth grows with
# cores): the PostgreSQL server binaries, pgbench and psql, wrk, the libraries
# they load (their rpath set to /opt/berthpkg/libs), and Berth's release
# binaries. Writes .bigger-machine/berthpkg.tar.xz in the project root (about
# 30 MB; ignored by git). On the other machine, as root, from where the tarball is:
#   tar -xJf berthpkg.tar.xz -C /opt && /opt/berthpkg/unpack.sh
#   cd /tmp && /opt/berthpkg/bin/berthd with-postgres -- /opt/berthpkg/bin/berth-bench --seconds 10
set -eu
root=$(git rev-parse --show-toplevel)
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1); pgver=$(basename "$(dirname "$pgbin")")
command -v patchelf >/dev/null || apt-get install -y -qq patchelf >/dev/null
w=$(mktemp -d); p=$w/berthpkg; mkdir -p "$p/bin" "$p/libs" "$p/pglib"
for b in postgres initdb pg_ctl pgbench psql pg_isready; do cp -L "$pgbin/$b" "$p/bin/"; done
# The HTTP load generator of the wrk-claims scenario, when this machine has it.
if command -v wrk >/dev/null; then cp -L "$(command -v wrk)" "$p/bin/"; fi
for b in berthd berth-bench berth; do [ -x "$root/target/release/$b" ] && cp "$root/target/release/$b" "$p/bin/"; done
for s in plpgsql dict_snowball btree_gist pgoutput libpqwalreceiver; do cp "/usr/lib/postgresql/$pgver/lib/$s.so" "$p/pglib/"; done
cp -r "/usr/share/postgresql/$pgver" "$p/share"
for f in "$p"/bin/* "$p"/pglib/*.so; do ldd "$f" 2>/dev/null | awk '/=>/ {print $3}'; done | sort -u \
  | grep -vE 'libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|ld-linux|libgcc_s' | while read -r l; do cp -L "$l" "$p/libs/"; done
cp -L /usr/lib/x86_64-linux-gnu/libicudata.so.* "$p/libs/" 2>/dev/null || true
for f in "$p"/bin/postgres "$p"/bin/initdb "$p"/bin/pg_ctl "$p"/bin/pgbench "$p"/bin/psql "$p"/bin/pg_isready \
  "$p"/bin/wrk "$p"/pglib/*.so "$p"/libs/*; do
  [ -e "$f" ] || continue
  patchelf --force-rpath --set-rpath /opt/berthpkg/libs "$f" 2>/dev/null || true
done
strip "$p"/bin/berthd "$p"/bin/berth-bench 2>/dev/null || true
echo "$pgver" >"$p/PGVERSION"
cp "$(dirname "$0")/bench-unpack.sh" "$p/unpack.sh"
mkdir -p "$root/.bigger-machine"; tar -cJf "$root/.bigger-machine/berthpkg.tar.xz" -C "$w" berthpkg; rm -rf "$w"
ls -la "$root/.bigger-machine/berthpkg.tar.xz"
