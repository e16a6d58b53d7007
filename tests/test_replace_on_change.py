"""Replacements said before they happen (issue 25, item 9): the render's `replaceOnChange` lists for
node pools and clusters agree with the provider's schema. The ForceNew flags come from the provider's
source (tests/schemas/provider_force_new.json, written by tools/provider_force_new.py: the installed
pulumi_gcp SDK does not carry them); the field names and nesting from the installed pulumi_gcp."""

from __future__ import annotations

import functools
import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pulumi_gcp.container import cluster as gcp_cluster
from pulumi_gcp.container import node_pool as gcp_node_pool

from tests.conftest import STANDARD_CLUSTER, render, stack_config, stack_render
from tests.test_gke_rewrites import POOL_KINDS, _node_pools
from tools.offline import stacks
from tools.plan import REPLACE_ON_CHANGE, diff

FORCE_NEW = json.loads((Path(__file__).parent / "schemas" / "provider_force_new.json").read_text())
ARGS = {
    "gcp:container/nodePool:NodePool": (gcp_node_pool, "NodePoolArgs"),
    "gcp:container/cluster:Cluster": (gcp_cluster, "ClusterArgs"),
}
_ARGS_CLASS = re.compile(r"ForwardRef\('(\w+Args)'\)")


def _fields(module: Any, class_name: str) -> dict[str, str | None]:
    """An SDK input type's fields (snake_case) -> the input type of a nested block, or None."""
    cls = getattr(module, class_name, None)
    if cls is None:
        from pulumi_gcp.container import _inputs

        cls = getattr(_inputs, class_name)
    fields: dict[str, str | None] = {}
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if name == "__self__":
            continue
        match = _ARGS_CLASS.search(repr(param.annotation))
        fields[name] = match.group(1) if match else None
    return fields


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@functools.cache
def pulumi_force_new(token: str) -> frozenset[str]:
    """The provider's ForceNew paths as the render names them (camelCase, the SDK's plural list
    names), each checked to exist in the installed pulumi_gcp's input types."""
    module, root = ARGS[token]
    result = set()
    for path in FORCE_NEW["forceNew"][token]:
        class_name: str | None = root
        parts = []
        for tf_name in path.split("."):
            assert class_name is not None, f"{path}: {'.'.join(parts)} is not a block in pulumi_gcp"
            fields = _fields(module, class_name)
            # The SDK names a list by its plural (guest_accelerator -> guest_accelerators).
            plurals = (tf_name, tf_name + "s", tf_name + "es", tf_name.removesuffix("y") + "ies")
            name = next((n for n in plurals if n in fields), None)
            assert name is not None, f"{path}: no field {tf_name} in pulumi_gcp's {class_name}"
            parts.append(_camel(name))
            class_name = fields[name]
        result.add(".".join(parts))
    return frozenset(result)


def _leaf_paths(value: Any, prefix: str = "") -> set[str]:
    if isinstance(value, dict) and value:
        return set().union(*(_leaf_paths(v, f"{prefix}.{k}" if prefix else k) for k, v in value.items()))
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return set().union(*(_leaf_paths(v, prefix) for v in value))
    return {prefix}


def _forcing(path: str, force_new: frozenset[str]) -> bool:
    parts = path.split(".")
    return any(".".join(parts[:i]) in force_new for i in range(1, len(parts) + 1))


def _covered(path: str, listed: tuple[str, ...]) -> bool:
    return any(path == f or path.startswith(f + ".") for f in listed)


def _ignored(path: str, ignored: tuple[str, ...]) -> bool:
    return any(path == i or path.startswith(i + ".") or path.startswith(i + "[") for i in ignored)


@pytest.mark.parametrize("token", sorted(ARGS))
def test_every_listed_field_replaces_the_resource_in_the_providers_schema(token: str) -> None:
    force_new = pulumi_force_new(token)
    assert force_new  # not a vacuous pass
    wrong = [f for f in REPLACE_ON_CHANGE[token] if not _forcing(f, force_new)]
    assert wrong == []


def _declared_resources() -> list[Any]:
    resources = [r for stack in stacks() for r in stack_render(stack).resources if r.type in ARGS]
    for pool in POOL_KINDS.values():
        result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[pool]))
        resources += _node_pools(result)
    return resources


def test_every_declared_field_that_replaces_the_resource_is_listed() -> None:
    missing = set()
    for resource in _declared_resources():
        force_new = pulumi_force_new(resource.type)
        for path in _leaf_paths(resource.inputs):
            if _ignored(path, resource.ignore_changes):
                continue  # never sent again after creation: it replaces nothing
            if _forcing(path, force_new) and not _covered(path, REPLACE_ON_CHANGE[resource.type]):
                missing.add(f"{resource.type} {path}")
    assert sorted(missing) == []


def test_the_render_diff_leaves_ignored_inputs_out() -> None:
    resource = {
        "urn": "urn:c",
        "type": "gcp:container/cluster:Cluster",
        "name": "c",
        "component": False,
        "replaceOnChange": list(REPLACE_ON_CHANGE["gcp:container/cluster:Cluster"]),
        "ignoreChanges": ["nodeConfig"],
    }
    old = {"resources": [{**resource, "inputs": {"nodeConfig": {"serviceAccount": "a"}, "name": "c"}}]}
    new = {"resources": [{**resource, "inputs": {"nodeConfig": {"serviceAccount": "b"}, "name": "c"}}]}
    assert diff(old, new) == []
