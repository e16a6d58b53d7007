"""The least predefined roles that grant a set of permissions, from Google's own role definitions
(vendored in components/data/iam_roles.json with their source).

The candidates are listed here, each for what it is meant to grant: for `pulumi up` the narrowest
role of the service that holds the resource's permissions, for `pulumi preview` a read-only one.
"Least" was judged over every predefined role of the dataset (docs/preflight.md, "How the roles were
chosen"); the tests hold every candidate to its vendored definition."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import NamedTuple

from ..core.data import DATA_DIR

ROLES_PATH = DATA_DIR / "iam_roles.json"

# Candidates for `pulumi up`, in the order a tie is broken.
UP_ROLES: tuple[str, ...] = (
    "roles/container.admin",
    "roles/compute.networkAdmin",
    "roles/compute.securityAdmin",
    # The smallest role with compute.resourcePolicies.* (a workload policy); compute.instanceAdmin.v1
    # holds them too, with every instance permission.
    "roles/compute.storageAdmin",
    "roles/iam.serviceAccountAdmin",
    "roles/iam.serviceAccountUser",
    "roles/resourcemanager.projectIamAdmin",
    "roles/monitoring.editor",
    "roles/artifactregistry.admin",
    # On the model bucket only: the smallest predefined role with storage.buckets.setIamPolicy
    # (roles/storage.admin has it too, with every object and bucket permission).
    "roles/storage.legacyBucketOwner",
    "roles/serviceusage.serviceUsageAdmin",
    # A cluster registered in a fleet (gkehub.memberships.*): Fleet Editor is the narrower of the two
    # Fleet roles that hold them (Fleet Admin adds the fleet's own settings).
    "roles/gkehub.editor",
)
# Candidates for `pulumi preview`: read-only roles (no create, update, delete or set permission).
PREVIEW_ROLES: tuple[str, ...] = (
    "roles/container.viewer",
    "roles/compute.networkViewer",
    "roles/compute.viewer",
    "roles/iam.serviceAccountViewer",
    "roles/browser",
    "roles/monitoring.viewer",
    "roles/artifactregistry.viewer",
    # The only read-only predefined role with storage.buckets.getIamPolicy found (it reads every IAM
    # policy of the project).
    "roles/iam.securityReviewer",
    "roles/serviceusage.serviceUsageViewer",
    "roles/gkehub.viewer",
)


def bucket_grantable(role: str) -> bool:
    """A role a bucket's own IAM policy takes (Cloud Storage's roles); any other is granted on the
    project, where it covers the bucket too."""
    return role.startswith("roles/storage.")


class Role(NamedTuple):
    name: str
    title: str
    permissions: frozenset[str]


@functools.cache
def predefined_roles() -> dict[str, Role]:
    """The vendored role definitions, by role name."""
    data = json.loads(ROLES_PATH.read_text(encoding="utf-8"))
    return {
        name: Role(name, entry["title"], frozenset(entry["includedPermissions"]))
        for name, entry in data["roles"].items()
    }


class RoleGrant(NamedTuple):
    role: str
    title: str
    permissions: tuple[str, ...]
    """The needed permissions it is chosen for."""


def least_roles(needed: Iterable[str], candidates: tuple[str, ...]) -> tuple[list[RoleGrant], list[str]]:
    """A small set of `candidates` that together grant every `needed` permission (greedy: the role with
    the fewest permissions per needed one it grants, then roles whose grants the others cover are
    dropped), and the permissions no candidate grants."""
    roles = predefined_roles()
    left = set(needed)
    chosen: list[str] = []
    while left:
        useful = [r for r in candidates if roles[r].permissions & left]
        if not useful:
            break
        # Weighted set cover: the fewest permissions granted per needed one, so a narrow role wins
        # over a broad one that happens to hold a little more of what is left.
        best = min(
            useful,
            key=lambda r: (len(roles[r].permissions) / len(roles[r].permissions & left), candidates.index(r)),
        )
        chosen.append(best)
        left -= roles[best].permissions
    wanted = set(needed) - left
    for role in list(chosen):
        others = set().union(*(roles[r].permissions for r in chosen if r != role))
        if wanted <= others:
            chosen.remove(role)
    grants = []
    covered: set[str] = set()
    for role in sorted(chosen, key=candidates.index):
        mine = sorted((roles[role].permissions & wanted) - covered)
        covered.update(mine)
        grants.append(RoleGrant(role, roles[role].title, tuple(mine)))
    return grants, sorted(left)
