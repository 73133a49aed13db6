#!/usr/bin/env python3
"""Placement's own secure-RBAC tests (`*-secure-rbac.yaml`) against Berth,
with their own expectations: Placement's secure defaults with scope
enforced are Berth's defaults, so the files run as written. The callers
are noauth's (`X-Roles`, `X-Project-Id`, `OpenStack-System-Scope`).

Takes the conformance runner's arguments (--server, --setup, --pg,
--prefix, --gabbits) and runs its machinery on these files alone, with
their fixture made the runner's plain one: Berth has one policy, the
secure one. Prints one line per file and 'N passed, M failed'.
"""
import os
import sys

shared = os.environ.get("BERTH_SHARED_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "shared")
sys.path.insert(0, os.path.join(shared, "conformance", "placement"))

import fixtures  # noqa: E402
import run  # noqa: E402


class SecureRBACPolicyFixture(fixtures.APIFixture):
    """Placement's secure defaults, scope enforced: Berth's defaults."""


fixtures.SecureRBACPolicyFixture = SecureRBACPolicyFixture
run.SUPPORTED = {"SecureRBACPolicyFixture"}

if __name__ == "__main__":
    args = sys.argv[1:]
    gabbits = args[args.index("--gabbits") + 1]
    files = sorted(f for f in os.listdir(gabbits) if f.endswith("-secure-rbac.yaml"))
    if not files:
        sys.exit("placement-rbac: no secure-RBAC test files in " + gabbits)
    sys.argv = [sys.argv[0]] + args + ["--only", ",".join(files)]
    sys.exit(run.main())
