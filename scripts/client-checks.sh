# Shared by the checks that drive the real OpenStack clients against a
# berthd (osc-placement-check.sh, keystone-clients-check.sh): sourced, not
# run. Set `label` before sourcing; it prefixes every line printed.

cache=${BERTH_OSC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/berth-osc}
venv=$cache/venv
if [ ! -x "$venv/bin/openstack" ]; then
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q osc-placement python-openstackclient
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# wait_for_berthd PORT: until its Placement root answers (30 s at most).
wait_for_berthd() {
  python3 - "$1" <<'PY'
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/placement/"
for _ in range(150):
    try:
        urllib.request.urlopen(url, timeout=1)
        sys.exit(0)
    except Exception:
        time.sleep(0.2)
sys.exit("berthd did not answer")
PY
}

passed=0
failed=0
check() { # check NAME EXPECTED-SUBSTRING COMMAND...
  name=$1 want=$2
  shift 2
  if out=$("$@" 2>&1) && { [ -z "$want" ] || printf '%s\n' "$out" | grep -q -- "$want"; }; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "$label: FAILED $name: wanted '$want', got:" >&2
    printf '%s\n' "$out" | tail -5 >&2
  fi
}

# report: the summary line; fails when any check did.
report() {
  echo "$label: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
