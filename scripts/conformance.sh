#!/bin/sh
# Placement conformance: runs Placement's own API test files against a
# release berthd (one fresh database and server per file), then drives the
# osc-placement client against one, and osc-placement and python-blazarclient
# through Keystone sessions against one in keystone mode. Run under `berthd with-postgres`, which
# sets BERTH_PG_URL and BERTH_PG_BIN. Extra arguments go to the runner
# (e.g. --only inventory.yaml).
set -eu
: "${BERTH_PG_URL:?run me under berthd with-postgres}"
cd "$(dirname "$0")/.."
[ -n "${BERTH_PG_BIN:-}" ] && PATH="$BERTH_PG_BIN:$PATH" && export PATH
shared=${BERTH_SHARED_DIR:-../shared}
berthd=${BERTHD:-target/release/berthd}
status=0
# The client check first, so the runner's "N passed, M failed" ends the output.
if [ -z "${BERTH_SKIP_OSC:-}" ] && [ $# -eq 0 ] && [ -f scripts/osc-placement-check.sh ]; then
  sh scripts/osc-placement-check.sh || status=1
  sh scripts/keystone-clients-check.sh || status=1
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
server="BERTH_DATABASE_URL={dburl} BERTH_LISTEN=127.0.0.1:{port} BERTH_AUTH=noauth BERTH_LOG=warn $berthd serve"
setup="BERTH_DATABASE_URL={dburl} $berthd migrate"
# Placement's secure-RBAC files, with their own expectations (the runner
# skips them: their fixture is not one it knows).
if [ $# -eq 0 ]; then
  cache=${BERTH_CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/berth-conformance}
  "$shared/conformance/placement/run.sh" --help >/dev/null
  BERTH_SHARED_DIR="$shared" "$cache/venv/bin/python" scripts/placement-rbac.py --gabbits "$cache/gabbits" \
    --pg "$BERTH_PG_URL" --prefix /placement --setup "$setup" --server "$server" | sed 's/^/secure-rbac: /' | tee "$out"
  grep -q '^secure-rbac: [0-9]* passed, 0 failed$' "$out" || status=1
fi
"$shared/conformance/placement/run.sh" --pg "$BERTH_PG_URL" --prefix /placement \
  --setup "$setup" --server "$server" "$@" | tee "$out"
if [ $# -eq 0 ]; then
  # The whole suite: one test (a malformed Content-Length the HTTP client
  # itself refuses to send) cannot pass against any server.
  passed=$(sed -n 's/^\([0-9]*\) passed, [0-9]* failed$/\1/p' "$out" | tail -1)
  if [ "${passed:-0}" -lt "${BERTH_CONFORMANCE_MIN:-639}" ]; then
    echo "conformance: ${passed:-0} passed, below ${BERTH_CONFORMANCE_MIN:-639}" >&2
    status=1
  fi
elif ! grep -q '^[0-9]* passed, 0 failed$' "$out"; then
  status=1
fi
exit $status
