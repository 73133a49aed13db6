"""Drives the real `blazar` command line (python-blazarclient's shell) and
its library against berthd's /v1 for flavor:instance reservations: the
--reservation string passes through unchanged, the lease is shown back,
and a reservation no host can take is refused. BLAZAR_URL, BLAZAR_TOKEN
and BLAZAR_CLI say where, who and with what. Prints the lease's id last."""

import datetime
import json
import os
import subprocess
import sys

from blazarclient import client as blazar_client

url = os.environ["BLAZAR_URL"]
token = os.environ["BLAZAR_TOKEN"]
cli = [os.environ["BLAZAR_CLI"], "--os-auth-type", "admin_token", "--os-endpoint", url, "--os-token", token]
blazar = blazar_client.Client(1, blazar_url=url, auth_token=token)


def check(cond, what):
    if not cond:
        print("FAILED:", what, file=sys.stderr)
        sys.exit(1)
    print("ok:", what)


def run(*args):
    return subprocess.run(cli + list(args), capture_output=True, text=True, timeout=120)


def answer(done):
    """The JSON of a command's answer, after any line it prints before it."""
    out = done.stdout
    return json.loads(out[out.index("{"):])


end = (datetime.datetime.utcnow() + datetime.timedelta(days=2)).strftime("%Y-%m-%d %H:%M")
made = run("lease-create", "--start-date", "now", "--end-date", end,
           "--reservation", "resource_type=flavor:instance,flavor_id=1,amount=2,affinity=True",
           "fl-together", "-f", "json")
check(made.returncode == 0, "blazar lease-create with a flavor:instance reservation: " + made.stderr)
lease = answer(made)
check(lease["name"] == "fl-together", "the lease is answered")

shown = run("lease-show", lease["id"], "-f", "json")
check(shown.returncode == 0, "blazar lease-show: " + shown.stderr)
reservations = answer(shown)["reservations"]
if isinstance(reservations, str):
    reservations = json.loads(reservations)
r = reservations[0] if isinstance(reservations, list) else reservations
check(r["resource_type"] == "flavor:instance", "the reservation's type is shown")
check(r["flavor_id"] == "1" and r["amount"] == 2, "flavor_id and amount are shown as given")

again = blazar.lease.get(lease["id"])
check(again["reservations"][0]["resource_type"] == "flavor:instance", "the library shows it too")

# Two instances apart: only one host has the flavor's traits.
apart = run("lease-create", "--start-date", "now", "--end-date", end,
            "--reservation", "resource_type=flavor:instance,flavor_id=1,amount=2,affinity=False",
            "fl-apart")
check(apart.returncode != 0 and "not enough capacity" in apart.stderr + apart.stdout,
      "anti-affinity over one matching host is refused: " + apart.stderr)
print("python-blazarclient: flavor all good")
print("LEASE", lease["id"])
