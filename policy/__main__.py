"""Entry point of the policy pack, run by the Pulumi CLI: `pulumi preview --policy-pack policy`.

Only builds the pack: `PolicyPack(...)` serves gRPC and never returns, so nothing may import this
file (tests and tools import `policy.gke_gpu_policies.rules`). The CLI runs it with this directory
first on sys.path, so the rules are the top-level package `gke_gpu_policies` here.
"""

from gke_gpu_policies.rules import PACK_NAME, POLICIES
from pulumi_policy import EnforcementLevel, PolicyPack

PolicyPack(
    name=PACK_NAME,
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=POLICIES,
)
