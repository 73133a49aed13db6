#!/usr/bin/env python3
"""A `virtual:segment` resource type for Berth, as a webhook (a small HTTP service).

Berth POSTs each call to this service, one JSON document as the body:
    {"action": "...", "idempotency_key": "...", "payload": {...}}
and reads the answer, JSON, from the response. 2xx: done; 4xx: refused, do not
retry; 5xx: failed, try again later. See docs/plugins.md.

A reservation asks for `amount` network segments (VLAN ids) from a range
this service keeps itself:
    {"resource_type": "virtual:segment", "amount": 2}

Like the floatingip example, `validate` answers {"kind": "nothing"}: Berth
holds nothing for it in its inventory. At lease start the segments are taken,
on update resized, before the end reported, at the end given back. Each key
is applied once: a repeated key answers what the first call answered and
changes nothing. The optional `state` action answers what is taken and what
was done, for `berth plugin check`.

Usage:
    segment.py [--port PORT] [--secret SECRET] [--first 100] [--last 199] [--state FILE]

It prints `listening on http://127.0.0.1:PORT/` once it is ready (port 0: any
free port). With --secret (or SEGMENT_SECRET), a call whose X-Berth-Signature
is not the body's HMAC-SHA256 under the secret is refused with 401. Standard
library only.
"""

import argparse
import hashlib
import hmac
import json
import os
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PARAMETERS = {"amount"}
# The keys Berth may send back on a reservation it shows; not parameters.
SHOWN = {"id", "lease_id", "resource_type", "resource_id", "status", "missing_resources",
         "resources_changed", "created_at", "updated_at", "allocations"}


class Refused(Exception):
    """A bad call: 4xx, Berth does not retry."""


class Busy(Exception):
    """A passing failure: 503, Berth retries with the same key."""


class Segments:
    """The service's state, one lock for all of it: calls come in parallel."""

    def __init__(self, first, last, path):
        self.ids = list(range(first, last + 1))
        self.path = path
        self.lock = threading.Lock()
        self.data = {"allocations": {}, "applied": {}, "effects": []}
        if path and os.path.exists(path):
            with open(path) as f:
                self.data.update(json.load(f))

    def save(self):
        if not self.path:
            return
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(self.path)), prefix=".segment-")
        with os.fdopen(fd, "w") as f:
            json.dump(self.data, f, sort_keys=True)
        os.replace(tmp, self.path)

    def amount(self, reservation):
        amount = reservation.get("amount")
        if not isinstance(amount, int) or isinstance(amount, bool) or not 1 <= amount <= len(self.ids):
            raise Refused(f"amount: must be a whole number from 1 to {len(self.ids)}, got {json.dumps(amount)}")
        return amount

    def validate(self, reservation):
        unknown = sorted(set(reservation) - PARAMETERS - SHOWN)
        if unknown:
            raise Refused(f"virtual:segment has no parameter {', '.join(map(repr, unknown))}; it takes amount")
        self.amount(reservation)
        return {"kind": "nothing"}

    def take(self, rid, amount):
        held = self.data["allocations"].get(rid, [])[:amount]
        taken = {s for r, ids in self.data["allocations"].items() if r != rid for s in ids}
        free = [s for s in self.ids if s not in taken and s not in held]
        if amount - len(held) > len(free):
            raise Busy(f"no segments left: {amount} wanted, {len(held) + len(free)} free")
        held = held + free[: amount - len(held)]
        self.data["allocations"][rid] = held
        return held

    def hook(self, action, key, reservation):
        rid = reservation.get("id")
        if not isinstance(rid, str) or not rid:
            raise Refused("the reservation has no id")
        with self.lock:
            if key in self.data["applied"]:
                return self.data["applied"][key]
            if action in ("on_start", "on_update"):
                answer = {"reservation_id": rid, "segments": self.take(rid, self.amount(reservation))}
            elif action == "before_end":
                answer = {"reservation_id": rid, "notified": self.data["allocations"].get(rid, [])}
            else:
                answer = {"reservation_id": rid, "released": self.data["allocations"].pop(rid, [])}
            self.data["effects"].append({"action": action, "idempotency_key": key, "reservation_id": rid})
            self.data["applied"][key] = answer
            self.save()
            return answer

    def call(self, envelope):
        try:
            action, key, payload = envelope["action"], envelope["idempotency_key"], envelope["payload"]
        except (KeyError, TypeError) as e:
            raise Refused(f"bad call: {e}")
        if action == "state":
            with self.lock:
                return {"allocations": self.data["allocations"], "effects": self.data["effects"]}
        reservation = payload.get("reservation") if isinstance(payload, dict) else None
        if not isinstance(reservation, dict):
            raise Refused("the payload has no reservation object")
        if action == "validate":
            return self.validate(reservation)
        if action in ("on_start", "before_end", "on_end", "on_update"):
            return self.hook(action, key, reservation)
        raise Refused(f"unknown action {action!r}")


def handler(segments, secret):
    class Handler(BaseHTTPRequestHandler):
        def answer(self, status, document):
            body = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if secret is not None:
                # Over the raw bytes, before any parsing; in constant time.
                mac = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
                if not hmac.compare_digest(mac, self.headers.get("X-Berth-Signature", "")):
                    return self.answer(401, {"error": "bad or missing X-Berth-Signature"})
            try:
                return self.answer(200, segments.call(json.loads(body)))
            except ValueError as e:
                return self.answer(400, {"error": f"the body is not JSON: {e}"})
            except Refused as e:
                return self.answer(422, {"error": str(e)})
            except Busy as e:
                return self.answer(503, {"error": str(e)})

        def log_message(self, format, *args):
            sys.stderr.write("segment: " + format % args + "\n")

    return Handler


def main():
    p = argparse.ArgumentParser(description="virtual:segment, a Berth plugin served as a webhook")
    p.add_argument("--port", type=int, default=8790, help="0: any free port")
    p.add_argument("--secret", default=os.environ.get("SEGMENT_SECRET"))
    p.add_argument("--first", type=int, default=100)
    p.add_argument("--last", type=int, default=199)
    p.add_argument("--state", help="keep the state in this file across restarts")
    args = p.parse_args()
    segments = Segments(args.first, args.last, args.state)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(segments, args.secret))
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
