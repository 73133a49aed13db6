#!/usr/bin/env python3
"""A `virtual:floatingip` resource type for Berth, over the exec protocol.

Berth runs this program once per call with one JSON document on stdin:
    {"action": "...", "idempotency_key": "...", "payload": {...}}
and reads its answer, JSON, on stdout. Exit 0: done; exit 2: refused, do not
retry; exit 1: failed, try again later. See docs/plugins.md.

A reservation asks for `amount` floating IP addresses:
    {"resource_type": "virtual:floatingip", "amount": 2}

The addresses come from a pool this program keeps itself, not from Berth's
inventory, so `validate` answers {"kind": "nothing"}: Berth places nothing and
holds nothing for it. (Berth places slots on enrolled hosts; a pool of
addresses on a network is not a host.) It only refuses an amount the pool
could never give. At lease start the addresses are taken; at end they are
given back.

Environment:
    FLOATINGIP_STATE  the JSON state file (required); a lock file beside it
                      serialises concurrent calls
    FLOATINGIP_POOL   the addresses, FIRST-LAST (default 203.0.113.1-203.0.113.254)

Each hook is applied once per idempotency key: a repeated key (a retry after
a crash, a second daemon) answers what the first call answered and changes
nothing. The optional `state` action answers the state file's addresses and
effects, so that `berth plugin check` can see a repeated key change nothing.
"""

import fcntl
import ipaddress
import json
import os
import sys
import tempfile

DEFAULT_POOL = "203.0.113.1-203.0.113.254"

# The reservation's parameters; a key outside them is refused, since a
# misspelt one silently ignored is a reservation that does not do what its
# user meant. Berth may send back the keys it shows on a reservation.
PARAMETERS = {"amount"}
SHOWN = {"id", "lease_id", "resource_type", "resource_id", "status", "missing_resources",
         "resources_changed", "created_at", "updated_at", "allocations"}


def refuse(message):
    """A permanent failure: Berth will not retry (a bad reservation)."""
    print(json.dumps({"error": message}))
    sys.exit(2)


def fail(message):
    """A failure worth retrying."""
    print(json.dumps({"error": message}))
    sys.exit(1)


def pool():
    spec = os.environ.get("FLOATINGIP_POOL", DEFAULT_POOL)
    try:
        first, last = (ipaddress.ip_address(p.strip()) for p in spec.split("-", 1))
    except ValueError as e:
        refuse(f"FLOATINGIP_POOL {spec!r}: {e}")
    if int(last) < int(first):
        refuse(f"FLOATINGIP_POOL {spec!r}: the last address comes before the first")
    return [str(ipaddress.ip_address(i)) for i in range(int(first), int(last) + 1)]


def amount_of(reservation, size):
    amount = reservation.get("amount", (reservation.get("parameters") or {}).get("amount"))
    # bool is an int in Python; true is not an amount.
    if not isinstance(amount, int) or isinstance(amount, bool) or not 1 <= amount <= size:
        refuse(f"amount: must be a whole number from 1 to {size}, got {json.dumps(amount)}")
    return amount


class State:
    """The state file, locked for the whole call."""

    def __init__(self, path):
        self.path = path
        self.lock = open(path + ".lock", "a")
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        try:
            with open(path) as f:
                self.data = json.load(f)
        except FileNotFoundError:
            self.data = {}
        self.data.setdefault("allocations", {})  # reservation id -> addresses
        self.data.setdefault("applied", {})  # idempotency key -> answer
        self.data.setdefault("effects", [])  # what was done, once per key

    def save(self):
        d = os.path.dirname(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".floatingip-")
        with os.fdopen(fd, "w") as f:
            json.dump(self.data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


def allocate(state, reservation_id, amount, addresses):
    held = state.data["allocations"].get(reservation_id, [])
    if len(held) > amount:
        held = held[:amount]
    taken = {a for r, addrs in state.data["allocations"].items() if r != reservation_id for a in addrs}
    free = [a for a in addresses if a not in taken and a not in held]
    need = amount - len(held)
    if need > len(free):
        # Another lease may give addresses back at this very moment.
        fail(f"pool exhausted: {amount} addresses wanted, {len(held) + len(free)} available")
    held = held + free[:need]
    state.data["allocations"][reservation_id] = held
    return held


def main():
    try:
        call = json.load(sys.stdin)
        action = call["action"]
        key = call["idempotency_key"]
        payload = call["payload"]
    except (ValueError, KeyError, TypeError) as e:
        refuse(f"bad call: {e}")

    addresses = pool()
    if action == "state":
        path = os.environ.get("FLOATINGIP_STATE")
        if not path:
            refuse("FLOATINGIP_STATE is not set")
        state = State(path)
        print(json.dumps({"allocations": state.data["allocations"], "effects": state.data["effects"]}))
        return
    reservation = payload.get("reservation") if isinstance(payload, dict) else None
    if not isinstance(reservation, dict):
        refuse("the payload has no reservation object")

    if action == "validate":
        unknown = sorted(set(reservation) - PARAMETERS - SHOWN)
        if unknown:
            refuse(f"virtual:floatingip has no parameter {', '.join(map(repr, unknown))}; it takes amount")
        amount_of(reservation, len(addresses))
        print(json.dumps({"kind": "nothing"}))
        return

    if action not in ("on_start", "before_end", "on_end", "on_update"):
        refuse(f"unknown action {action!r}")
    reservation_id = reservation.get("id")
    if not isinstance(reservation_id, str) or not reservation_id:
        refuse("the reservation has no id")

    path = os.environ.get("FLOATINGIP_STATE")
    if not path:
        refuse("FLOATINGIP_STATE is not set")
    state = State(path)
    if key in state.data["applied"]:
        print(json.dumps(state.data["applied"][key]))
        return

    if action in ("on_start", "on_update"):
        held = allocate(state, reservation_id, amount_of(reservation, len(addresses)), addresses)
        answer = {"reservation_id": reservation_id, "addresses": held}
    elif action == "before_end":
        answer = {"reservation_id": reservation_id, "notified": state.data["allocations"].get(reservation_id, [])}
    else:
        answer = {"reservation_id": reservation_id, "released": state.data["allocations"].pop(reservation_id, [])}

    state.data["effects"].append({"action": action, "idempotency_key": key, "reservation_id": reservation_id})
    state.data["applied"][key] = answer
    state.save()
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
