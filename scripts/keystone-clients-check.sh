#!/bin/sh
# The unchanged OpenStack clients through Keystone sessions: a real Keystone
# (scripts/keystone/run.sh) with Berth in its catalog (service types
# placement and reservation), a berthd in keystone mode, and osc-placement
# and python-blazarclient's OSC plugin given only OS_AUTH_URL, OS_USERNAME,
# OS_PASSWORD and OS_PROJECT_NAME. Run under `berthd with-postgres`;
# `make conformance` runs it. Prints "keystone clients: N passed, M failed".
set -eu
: "${BERTH_PG_URL:?run me under berthd with-postgres}"
cd "$(dirname "$0")/.."
berthd=${BERTHD:-target/release/berthd}
ks=scripts/keystone/run.sh
label="keystone clients"
. scripts/client-checks.sh
"$venv/bin/python" -c 'import blazarclient' 2>/dev/null || "$venv/bin/pip" install -q python-blazarclient

ks_port=$(free_port)
port=$(free_port)
db=berth_ks_$$
log=$(mktemp)
server=
cleanup() {
  [ -n "$server" ] && { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; }
  "$ks" stop "$ks_port" >/dev/null 2>&1 || true
  psql "$BERTH_PG_URL/postgres" -qAtc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -f "$log"
}
trap cleanup EXIT
eval "$("$ks" start "$ks_port")"

psql "$BERTH_PG_URL/postgres" -qAtc "CREATE DATABASE $db" >/dev/null
BERTH_DATABASE_URL="$BERTH_PG_URL/$db" "$berthd" migrate >"$log" 2>&1
BERTH_DATABASE_URL="$BERTH_PG_URL/$db" BERTH_LISTEN="127.0.0.1:$port" BERTH_LOG=warn BERTH_AUTH=keystone \
  BERTH_KEYSTONE__AUTH_URL="$KEYSTONE_URL" BERTH_KEYSTONE__USERNAME="$KEYSTONE_SERVICE_USER" \
  BERTH_KEYSTONE__PASSWORD="$KEYSTONE_SERVICE_PASSWORD" BERTH_KEYSTONE__PROJECT_NAME="$KEYSTONE_SERVICE_PROJECT" \
  "$berthd" serve >>"$log" 2>&1 &
server=$!
wait_for_berthd "$port"
"$ks" catalog placement "http://127.0.0.1:$port/placement" "$ks_port" >/dev/null
"$ks" catalog reservation "http://127.0.0.1:$port/v1" "$ks_port" >/dev/null

# As a user of the test world: nothing but OS_* variables.
as() { # as USER PROJECT COMMAND...
  user=$1 project=$2
  shift 2
  env -u OS_TOKEN -u OS_CLOUD OS_AUTH_URL="$KEYSTONE_URL" OS_IDENTITY_API_VERSION=3 OS_USERNAME="$user" \
    OS_PASSWORD="$KEYSTONE_PASSWORD" OS_PROJECT_NAME="$project" OS_USER_DOMAIN_NAME=Default \
    OS_PROJECT_DOMAIN_NAME=Default OS_INTERFACE=public "$venv/bin/openstack" "$@"
}
refused() { # refused NAME COMMAND...: the command fails with a 403
  name=$1
  shift
  if out=$("$@" 2>&1); then
    failed=$((failed + 1)); echo "keystone clients: FAILED $name: it was allowed" >&2
  elif printf '%s\n' "$out" | grep -qi "403\|forbidden\|not allow"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); echo "keystone clients: FAILED $name: $out" >&2
  fi
}

rp=$(as admin admin resource provider create ks-host-1 -f value -c uuid)
check "resource provider create (admin)" "$rp" printf '%s' "$rp"
check "inventory set (admin)" "VCPU" as admin admin resource provider inventory set "$rp" \
  --resource VCPU=8 --resource MEMORY_MB=16384 --resource DISK_GB=100 -f value
check "resource provider list (admin)" "ks-host-1" as admin admin resource provider list -f value -c name
refused "resource provider list (member)" as alice p1 resource provider list
check "reservation host create (admin)" "ks-host-1" as admin admin reservation host create ks-host-1 -f value
check "reservation lease create (member)" "ks-lease" as alice p1 reservation lease create \
  --reservation resource_type=physical:host,min=1,max=1 \
  --start-date "2031-01-02 09:00" --end-date "2031-01-02 10:00" ks-lease -f value
check "reservation lease list (member)" "ks-lease" as alice p1 reservation lease list -f value
check "reservation lease show (reader)" "PENDING" as carol p1 reservation lease show ks-lease -f value
refused "reservation lease delete (reader)" as carol p1 reservation lease delete ks-lease
check "reservation lease list (other project)" "" as bob p2 reservation lease list -f value
check "reservation lease delete (member)" "" as alice p1 reservation lease delete ks-lease
report
