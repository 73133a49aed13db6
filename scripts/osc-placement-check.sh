#!/bin/sh
# Drives the real osc-placement client (from PyPI, in a venv) against a
# berthd in noauth mode: providers, inventory, usage, allocations, traits,
# resource classes. Run under `berthd with-postgres` (BERTH_PG_URL set);
# `make conformance` runs it. Prints "osc-placement: N passed, M failed".
set -eu
: "${BERTH_PG_URL:?run me under berthd with-postgres}"
cd "$(dirname "$0")/.."
berthd=${BERTHD:-target/release/berthd}
label=osc-placement
. scripts/client-checks.sh

db=berth_osc_$$
psql "$BERTH_PG_URL/postgres" -qAtc "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1
psql "$BERTH_PG_URL/postgres" -qAtc "CREATE DATABASE $db" >/dev/null
port=$(free_port)
log=$(mktemp)
BERTH_DATABASE_URL="$BERTH_PG_URL/$db" "$berthd" migrate >"$log" 2>&1
BERTH_DATABASE_URL="$BERTH_PG_URL/$db" BERTH_LISTEN="127.0.0.1:$port" BERTH_AUTH=noauth BERTH_LOG=warn \
  "$berthd" serve >>"$log" 2>&1 &
server=$!
cleanup() {
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  psql "$BERTH_PG_URL/postgres" -qAtc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -f "$log"
}
trap cleanup EXIT
wait_for_berthd "$port"

osc() {
  "$venv/bin/openstack" --os-auth-type admin_token --os-token admin \
    --os-endpoint "http://127.0.0.1:$port/placement" --os-placement-api-version 1.39 "$@"
}

rp=$(osc resource provider create osc-host-1 -f value -c uuid)
consumer=$(python3 -c 'import uuid; print(uuid.uuid4())')
check "resource provider create" "$rp" printf '%s' "$rp"
check "resource provider list" "osc-host-1" osc resource provider list -f value -c name
check "resource provider show" "osc-host-1" osc resource provider show "$rp" -f value -c name
check "inventory set" "VCPU" osc resource provider inventory set "$rp" --resource VCPU=8 --resource MEMORY_MB=4096 -f value
check "allocation set" "$rp" osc resource provider allocation set "$consumer" \
  --allocation "rp=$rp,VCPU=2,MEMORY_MB=512" --project-id osc-project --user-id osc-user --consumer-type INSTANCE -f value
check "allocation show" "512" osc resource provider allocation show "$consumer" -f value
check "usage show" "2" osc resource provider usage show "$rp" -f value
check "allocation unset" "" osc resource provider allocation unset "$consumer" --provider "$rp"
check "usage after unset" "0" osc resource provider usage show "$rp" -f value
# A refusal: osc-placement shows only the last line of the error's detail,
# which must be the reason (not just "Failed validating ...").
refused() { # refused NAME EXPECTED-SUBSTRING COMMAND...: fails, and says why
  name=$1 want=$2
  shift 2
  if out=$("$@" 2>&1); then
    failed=$((failed + 1))
    echo "$label: FAILED $name: it succeeded: $out" >&2
  else
    check "$name" "$want" printf '%s\n' "$out"
  fi
}
generation=$(osc resource provider show "$rp" -f value -c generation)
refused "bad aggregate" "JSON does not validate: 'abc' is not a 'uuid'" \
  osc resource provider aggregate set "$rp" --aggregate abc --generation "$generation"
refused "bad resource class" "JSON does not validate: 'fake_class' does not match" \
  osc resource class create fake_class
refused "bad inventory" "JSON does not validate: 0 is less than the minimum of 1" \
  osc resource provider inventory set "$rp" --resource VCPU=0
check "trait list" "MISC_SHARES_VIA_AGGREGATE" osc trait list -f value
check "resource class list" "MEMORY_MB" osc resource class list -f value
report
