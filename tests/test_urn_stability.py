"""Restructuring must not replace anything in an existing stack: every resource of the three example
stacks keeps the URN it had in the last release (0.8.0, tests/golden/release-urns/), either as is or
through the aliases the engine applies.

0.9.0 renamed every component's type token to `gke-gpu:index:<Class>` (the multi-language provider
knows only the module `index`). Each component aliases its old token, and the engine applies a
parent's aliases to its children, so a child's old URN is its name under its parent's old URN. This
test recomputes each resource's old URN from the aliases the program actually registered (recorded
by tools/offline.py from the RegisterResource requests) and compares the set with the release's.
"""

import json
from pathlib import Path

import pytest

from gke_gpu.core.package import LEGACY_TYPES, component_type
from tests.conftest import stack_render
from tools.offline import Resource, RunResult

RELEASE_URNS = Path(__file__).parent / "golden" / "release-urns"
# Resources added since the release (a new resource changes nothing of the old ones), by name, each
# with why: an addition must be listed here, a removal or rename never passes.
ADDED_SINCE_RELEASE = {
    # Image streaming needs Service Usage Consumer on a custom node account (issue 36).
    "gke-nodes-serviceusage.serviceUsageConsumer",
}


def _old_urns(result: RunResult) -> dict[str, str]:
    """Each resource's URN as the release knew it: its gke-gpu alias type, under the parent's old URN."""
    by_urn = {r.urn: r for r in result.resources}
    memo: dict[str, str] = {}

    def old(resource: Resource) -> str:
        if resource.urn not in memo:
            # Only our own aliases: pulumi-kubernetes adds its API-version aliases to every object.
            ours = [t for t in resource.alias_types if t.startswith("gke-gpu:")]
            type_ = ours[0] if ours else resource.type
            prefix, _, _ = resource.urn.rpartition("::")
            head = prefix.rsplit("::", 1)[0]  # urn:pulumi:<stack>::<project>
            parent = by_urn.get(resource.parent or "")
            if parent is not None and parent.type != "pulumi:pulumi:Stack":
                parent_chain = old(parent).split("::")[2]
                type_ = f"{parent_chain}${type_}"
            memo[resource.urn] = f"{head}::{type_}::{resource.name}"
        return memo[resource.urn]

    return {r.urn: old(r) for r in result.resources}


@pytest.mark.parametrize("stack", ["dev", "prod", "onprem"])
def test_every_resource_keeps_its_release_urn(stack):
    release = json.loads((RELEASE_URNS / f"{stack}.json").read_text())
    result = stack_render(stack)
    assert result.error is None, result.error
    now = _old_urns(result)
    assert len(set(now.values())) == len(now), "two resources map to one old URN"
    missing = sorted(set(release["urns"]) - set(now.values()))
    added = sorted(
        urn
        for urn in set(now.values()) - set(release["urns"])
        if urn.rsplit("::", 1)[-1] not in ADDED_SINCE_RELEASE
    )
    assert not missing and not added, f"replaced or removed: {missing}\nnew: {added}"


def test_every_renamed_component_registers_its_old_type_as_an_alias():
    result = stack_render("prod")
    components = [r for r in result.resources if r.type.startswith("gke-gpu:")]
    assert components
    for component in components:
        class_name = component.type.rpartition(":")[2]
        assert component.type == component_type(class_name)
        ours = tuple(t for t in component.alias_types if t.startswith("gke-gpu:"))
        assert ours == (LEGACY_TYPES[class_name],), component.urn
