#!/usr/bin/env bash
# with-keystone.sh COMMAND...: start a throwaway Keystone (run.sh, beside this
# file) on a free port, run COMMAND with its KEYSTONE_* variables exported,
# stop it, and exit with COMMAND's status. One Keystone for a whole test run,
# as `berthd with-postgres` gives one PostgreSQL; tests that must stop or
# age a Keystone start a private one through run.sh themselves.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PORT=${KEYSTONE_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
export BERTH_KEYSTONE_SCRIPT="$HERE/run.sh"
set -a
eval "$("$HERE/run.sh" start "$PORT")"
set +a
trap '"$HERE/run.sh" stop "$PORT" >/dev/null 2>&1 || true' EXIT
set +e
"$@"
rc=$?
exit $rc
