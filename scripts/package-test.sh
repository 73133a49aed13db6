#!/usr/bin/env bash
# make test-package: the Debian package end to end on this machine, as root,
# inside `berthd with-postgres`. It packages the debug binaries `make test`
# built, installs the package with dpkg, checks what it installed, starts the
# installed berthd as the berth account with the packaged configuration
# against the throwaway database until /readyz answers, then removes and
# purges the package and checks what is left. Any failed step fails it.
set -euo pipefail
cd "$(dirname "$0")/.."

# A version of its own, so that an install this test did not make is never replaced.
version="0.0.0~pkgtest"
fail() { echo "package-test: FAILED: $*" >&2; exit 1; }
step() { echo "package-test: $*"; }

[ "$(id -u)" = 0 ] || fail "dpkg -i needs root"
command -v dpkg >/dev/null || fail "dpkg is missing: the test needs a Debian or Ubuntu machine"
[ -n "${BERTH_TEST_DATABASE_URL:-}" ] || fail "run it as make test-package does, under berthd with-postgres"
for bin in berthd berth; do
  [ -x "target/debug/$bin" ] || fail "build first: cargo build -p berthd -p berth-cli"
done
installed=$(dpkg-query -W -f='${db:Status-Status} ${Version}' berth 2>/dev/null || true)
case "$installed" in
  ""|not-installed*|config-files*) ;;
  *" $version") ;;
  *) fail "berth ${installed#* } is installed, not this test's: remove it first" ;;
esac
dpkg --purge berth >/dev/null 2>&1 || true

work=$(mktemp -d)
pid=
cleanup() {
  [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
  dpkg --purge berth >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

sh scripts/ensure-cargo-deb.sh
step "building the package"
# --profile dev: the debug binaries already built (cargo-deb warns that it is meant for releases).
cargo deb -p berthd --no-build --profile dev --fast --quiet --deb-version "$version" -o "$work/" \
  >"$work/cargo-deb.log" 2>&1 || { cat "$work/cargo-deb.log" >&2; fail "cargo deb"; }
deb=$(ls "$work"/berth_*.deb) || fail "cargo deb made no package"

step "installing $(basename "$deb")"
dpkg -i "$deb" || fail "dpkg -i"
for bin in berthd berth; do
  [ -x "/usr/bin/$bin" ] || fail "/usr/bin/$bin not installed"
  "/usr/bin/$bin" --version >/dev/null || fail "$bin --version"
done
getent passwd berth | grep -q ':/usr/sbin/nologin$' || fail "no berth system account with no login"
[ "$(id -u berth)" -lt 1000 ] || fail "berth is not a system account (uid $(id -u berth))"
dpkg-query -W -f='${Conffiles}\n' berth | grep -q '^ /etc/berth/berth.toml ' || fail "berth.toml is not a conffile"
[ "$(stat -c '%U:%G %a' /etc/berth/berth.toml)" = "root:berth 640" ] || fail "berth.toml is not root:berth 640"
unit=/usr/lib/systemd/system/berthd.service
[ -f "$unit" ] || fail "$unit not installed"
if command -v systemd-analyze >/dev/null; then
  # Warnings too (an unknown key, a wrong value): verify itself exits 0 on them.
  verified=$(systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $verified"
  [ -z "$verified" ] || fail "systemd-analyze verify: $verified"
  step "systemd-analyze verify: the unit is clean"
  if systemd-analyze --help | grep -q -- --offline; then
    # The hardening, as systemd rates it: 1.4 on its 0 to 10 scale when written.
    systemd-analyze security --offline=true --threshold=20 "$unit" >/dev/null \
      || fail "the unit's exposure rose above 2.0: systemd-analyze security --offline=true $unit"
  fi
else
  step "no systemd-analyze here: the unit is not verified"
fi

# setpriv and env exec: the process started is berthd itself, as berth, in /.
as_berth=(setpriv --reuid berth --regid berth --init-groups -- env -C /)
"${as_berth[@]}" /usr/bin/berthd check-config --config /etc/berth/berth.toml >/dev/null \
  || fail "berth cannot read or use /etc/berth/berth.toml"

step "starting the installed berthd as berth"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BERTH_DATABASE_URL="$BERTH_TEST_DATABASE_URL" BERTH_LISTEN="127.0.0.1:$port" \
  "${as_berth[@]}" /usr/bin/berthd serve --config /etc/berth/berth.toml 2>"$work/berthd.log" &
pid=$!
ready=
for _ in $(seq 120); do
  kill -0 "$pid" 2>/dev/null || { cat "$work/berthd.log" >&2; fail "berthd exited"; }
  if curl -sf "http://127.0.0.1:$port/readyz" | grep -q '"status":"ready"'; then ready=1; break; fi
  sleep 0.5
done
[ -n "$ready" ] || { cat "$work/berthd.log" >&2; fail "/readyz did not answer ready in 60 s"; }
user=$(ps -o user= -p "$pid")
[ "$user" = berth ] || fail "berthd runs as $user, not berth"
grep -q '"schema migrated"' "$work/berthd.log" || fail "the installed berthd did not migrate the empty database"
kill -TERM "$pid"
wait "$pid" || fail "berthd exited $? after SIGTERM"
pid=
step "berthd answered /readyz as berth and stopped on SIGTERM"

step "removing the package"
dpkg -r berth || fail "dpkg -r"
for gone in /usr/bin/berthd /usr/bin/berth "$unit"; do
  [ ! -e "$gone" ] || fail "$gone is left after dpkg -r"
done
[ -f /etc/berth/berth.toml ] || fail "dpkg -r took the configuration (only purge should)"
dpkg --purge berth || fail "dpkg --purge"
[ ! -e /etc/berth ] || fail "/etc/berth is left after purge"
[ ! -e /var/lib/berth ] || fail "/var/lib/berth is left after purge"
! dpkg-statoverride --list | grep -q ' /etc/berth' || fail "a statoverride is left after purge"
! dpkg-query -W berth >/dev/null 2>&1 || fail "dpkg still knows berth after purge"
# Debian leaves system accounts on purge; so does this package.
id berth >/dev/null || fail "the berth account went with the purge"
step "passed: installed, served as berth, removed and purged (the berth account stays)"
