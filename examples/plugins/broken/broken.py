#!/usr/bin/env python3
"""A deliberately wrong exec plugin, for showing (and testing) that
`berth plugin check` fails on it, naming the check. Never enable it.

    broken.py MODE

MODE is one of:
    shape           validate answers {"kind": "slots"} without amount or resources
    not-idempotent  each call takes a new address, even for a key already seen
    hang            on_start never answers
    exit1           validate fails (exit 1) on every reservation, good ones too
    stray-output    hooks print "OK", which is not JSON, and exit 0
    none            nothing wrong: a plugin that keeps no state and acts on nothing

Everything else is as a correct plugin does it: unknown parameters and bad
amounts are refused with exit 2, the `state` action answers its state
(the not-idempotent mode keeps it in BROKEN_STATE).
"""

import json
import os
import sys
import time


def refuse(message):
    print(json.dumps({"error": message}))
    sys.exit(2)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "none"
    call = json.load(sys.stdin)
    action, payload = call["action"], call["payload"]
    state_path = os.environ.get("BROKEN_STATE")
    state = {"taken": 0}
    if state_path and os.path.exists(state_path):
        with open(state_path) as f:
            state = json.load(f)

    if action == "state":
        print(json.dumps(state))
        return
    reservation = payload.get("reservation") or {}
    if action == "validate":
        if mode == "exit1":
            print(json.dumps({"error": "could not reach the backend"}))
            sys.exit(1)
        if set(reservation) - {"amount"}:
            refuse("only amount is a parameter")
        if not isinstance(reservation.get("amount"), int) or isinstance(reservation.get("amount"), bool):
            refuse("amount: a whole number")
        print(json.dumps({"kind": "slots"} if mode == "shape" else {"kind": "nothing"}))
        return
    if action == "on_start" and mode == "hang":
        time.sleep(3600)
    if mode == "stray-output":
        print("OK")
        return
    if mode == "not-idempotent":
        # Wrong: the key is not remembered, so a retry takes another address.
        state["taken"] += 1
        if state_path:
            with open(state_path, "w") as f:
                json.dump(state, f)
        print(json.dumps({"address": f"192.0.2.{state['taken']}"}))
        return
    print(json.dumps({"action": action, "reservation_id": reservation.get("id")}))


if __name__ == "__main__":
    main()
