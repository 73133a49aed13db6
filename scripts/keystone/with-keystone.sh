#!/usr/bin/env bash
# with-keystone.sh [--while 'CMD'] COMMAND...: start a throwaway Keystone
# (run.sh, beside this file) on a free port, run COMMAND with its KEYSTONE_*
# variables exported, stop it, and exit with COMMAND's status. One Keystone
# for a whole test run, as `berthd with-postgres` gives one PostgreSQL; tests
# that must stop or age a Keystone start a private one through run.sh
# themselves. With --while, CMD (a build) runs while Keystone starts, and
# COMMAND only if CMD succeeds: Keystone's start (ten seconds on two cores)
# then waits on nothing.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WHILE=
if [ "${1:-}" = "--while" ]; then
  WHILE=${2:?--while needs a command}
  shift 2
fi
PORT=${KEYSTONE_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
export BERTH_KEYSTONE_SCRIPT="$HERE/run.sh"
ENV_FILE=$(mktemp)
"$HERE/run.sh" start "$PORT" > "$ENV_FILE" &
STARTING=$!
# Whatever ends this script, a start under way is let finish, then stopped.
trap 'wait "$STARTING" 2>/dev/null; "$HERE/run.sh" stop "$PORT" >/dev/null 2>&1 || true; rm -f "$ENV_FILE"' EXIT
if [ -n "$WHILE" ]; then
  sh -c "$WHILE" || exit   # with its status; the trap stops Keystone
fi
wait "$STARTING"
set -a
eval "$(cat "$ENV_FILE")"
set +a
set +e
"$@"
rc=$?
exit $rc
