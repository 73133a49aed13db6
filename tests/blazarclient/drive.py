"""Drives python-blazarclient against berthd's /v1: host create, lease
create, list, show, update (prolong_for, reduce_by), allocation list,
delete. Exits non-zero on the first thing that is not as Blazar's client
expects. BLAZAR_URL and BLAZAR_TOKEN say where and who."""

import datetime
import os
import sys

from blazarclient import client as blazar_client
from blazarclient import exception

url = os.environ["BLAZAR_URL"]
token = os.environ.get("BLAZAR_TOKEN", "admin")
blazar = blazar_client.Client(1, blazar_url=url, auth_token=token)


def check(cond, what):
    if not cond:
        print("FAILED:", what, file=sys.stderr)
        sys.exit(1)
    print("ok:", what)


host = blazar.host.create(name="bc-host-1", vcpus=8, memory_mb=16384, local_gb=100, gpu="true")
check(host["hypervisor_hostname"] == "bc-host-1", "host create answers the host")
check(host["gpu"] == "true", "extra capability kept")
check(any(h["id"] == host["id"] for h in blazar.host.list()), "host list shows it")
check(blazar.host.get(host["id"])["vcpus"] == 8, "host show")
blazar.host.update(host["id"], {"rack": "r1"})
check(blazar.host.get(host["id"])["rack"] == "r1", "host update")

fmt = "%Y-%m-%d %H:%M"
start = (datetime.datetime.utcnow() + datetime.timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
end = start + datetime.timedelta(hours=2)
reservations = [{
    "resource_type": "physical:host", "min": 1, "max": 1,
    "hypervisor_properties": "[\">=\", \"$vcpus\", \"4\"]",
    "resource_properties": "[\"==\", \"$gpu\", \"true\"]",
}]
lease = blazar.lease.create("bc-lease", start.strftime(fmt), end.strftime(fmt), reservations, [])
check(lease["name"] == "bc-lease" and lease["status"] == "PENDING", "lease create")
check(lease["start_date"] == start.strftime("%Y-%m-%dT%H:%M:%S.%f"), "dates in Blazar's format")
check(any(l["id"] == lease["id"] for l in blazar.lease.list()), "lease list")
shown = blazar.lease.get(lease["id"])
check(len(shown["reservations"]) == 1 and len(shown["events"]) == 3, "lease show")

try:
    blazar.lease.create("bc-overlap", start.strftime(fmt), end.strftime(fmt), reservations, [])
    check(False, "an overlapping lease on the only host is refused")
except exception.BlazarClientException as e:
    check(e.kwargs.get("code") == 409, "an overlapping lease on the only host is a 409")

longer = blazar.lease.update(lease["id"], prolong_for="1h")
check(longer["end_date"] == (end + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%f"), "prolong_for")
shorter = blazar.lease.update(lease["id"], reduce_by="30m")
check(shorter["end_date"] == (end + datetime.timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%S.%f"), "reduce_by")

allocations = blazar.allocation.list("os-hosts")
mine = [a for a in allocations if a["resource_id"] == host["id"]]
check(len(mine) == 1 and mine[0]["reservations"][0]["lease_id"] == lease["id"], "allocation list")
one = blazar.allocation.get("os-hosts", host["id"])
check(one["reservations"][0]["id"] == shown["reservations"][0]["id"], "allocation show")

blazar.lease.delete(lease["id"])
check(all(l["id"] != lease["id"] for l in blazar.lease.list()), "lease delete")
blazar.host.delete(host["id"])
check(all(h["id"] != host["id"] for h in blazar.host.list()), "host delete")
print("python-blazarclient: all good")
