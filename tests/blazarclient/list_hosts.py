"""Lists every host through python-blazarclient's library and its `blazar
host-list` command, neither of which follows next links. Prints the count
each saw and how long it took. BLAZAR_URL, BLAZAR_TOKEN and BLAZAR_CLI say
where, who and with what; HOSTS how many hosts there are."""

import os
import subprocess
import sys
import time

from blazarclient import client as blazar_client

url = os.environ["BLAZAR_URL"]
token = os.environ["BLAZAR_TOKEN"]
want = int(os.environ["HOSTS"])
blazar = blazar_client.Client(1, blazar_url=url, auth_token=token)


def check(cond, what):
    if not cond:
        print("FAILED:", what, file=sys.stderr)
        sys.exit(1)
    print("ok:", what)


began = time.monotonic()
hosts = blazar.host.list()
print(f"library: {len(hosts)} hosts in {time.monotonic() - began:.2f} s")
check(len(hosts) == want, f"the library sees all {want} hosts")
check(len({h["id"] for h in hosts}) == want, "each once")
names = [h["hypervisor_hostname"] for h in hosts]
check(names == sorted(names), "by name")

cli = [os.environ["BLAZAR_CLI"], "--os-auth-type", "admin_token", "--os-endpoint", url, "--os-token", token]
began = time.monotonic()
done = subprocess.run(cli + ["host-list", "-f", "value", "-c", "id"], capture_output=True, text=True, timeout=300)
print(f"blazar host-list: {len(done.stdout.split())} hosts in {time.monotonic() - began:.2f} s")
check(done.returncode == 0, f"blazar host-list runs: {done.stderr[-2000:]}")
check(sorted(done.stdout.split()) == sorted(h["id"] for h in hosts), f"blazar host-list shows all {want} hosts")
print("python-blazarclient: all hosts listed")
