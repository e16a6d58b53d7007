"""Previews that converge (issue 25, item 1): what every node pool declares, once GKE has applied its own
rewrites (gpu/gke_rewrites.py) and the provider has read the pool back, shows no change on the next
preview. A model of the round trip: the declared inputs, the provider's defaults for a declared block,
GKE's documented values, the provider's read filters, then the provider's diff minus `ignore_changes`.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gke_gpu.gpu.gke_rewrites import (
    GKE_REWRITES,
    PROVIDER_DEFAULTS,
    PROVIDER_FILTERED,
    PoolKind,
    ignored_paths,
    pulumi_path,
)
from tests.conftest import L4_POOL, STANDARD_CLUSTER, render, stack_config, stack_render
from tools.offline import stacks

NODE_POOL = "gcp:container/nodePool:NodePool"
# Maps of the provider compared key by key (an empty map is no map: the provider keeps GKE's).
MAPS = {("nodeConfig", "labels"), ("nodeConfig", "metadata"), ("nodeConfig", "resourceLabels")}

A3_MEGA = {
    "name": "mega",
    "accelerator": "nvidia-h100-mega-80gb",
    "gpusPerNode": 8,
    "maxNodes": 2,
    "zones": ["us-central1-a"],
}
POOL_KINDS = {
    "on-demand": L4_POOL,
    "spot": {**L4_POOL, "spot": True},
    "flex-start": {**L4_POOL, "flexStart": True, "maxRunDuration": "24h"},
    "queued-provisioning": {**A3_MEGA, "queuedProvisioning": True},
    "queued-provisioning-without-flex-start": {**A3_MEGA, "queuedProvisioning": True, "flexStart": False},
    "reservation-block": {
        **A3_MEGA,
        "reservation": {"type": "SPECIFIC", "name": "mega-res/reservationBlocks/b1"},
    },
    "reservation": {**A3_MEGA, "reservation": {"type": "SPECIFIC", "name": "mega-res"}},
    "labels-and-taints": {
        **L4_POOL,
        "labels": {"team": "research"},
        "taints": [{"key": "dedicated", "value": "research"}],
    },
}


def _with_defaults(declared: dict[str, Any]) -> dict[str, Any]:
    """The config as the provider plans it: each declared block with the provider's defaults."""
    config = copy.deepcopy(declared)
    for path, defaults in PROVIDER_DEFAULTS.items():
        block = _get(config, path)
        if isinstance(block, dict):
            for key, value in defaults.items():
                block.setdefault(key, value)
    return config


def _get(value: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def gke_holds(declared: dict[str, Any]) -> dict[str, Any]:
    """The pool as the provider reads it back after `pulumi up`: the declared inputs with the
    provider's defaults, GKE's rewrites applied, then the provider's read filters."""
    kind = PoolKind.of_inputs(declared)
    state = _with_defaults(declared)
    for rewrite in GKE_REWRITES:
        if not rewrite.applies(kind):
            continue
        *parents, last = rewrite.path
        if tuple(parents) in PROVIDER_FILTERED:
            # A list keyed by `key` (taints): GKE adds or replaces the entry.
            *parents, last = parents
        container: Any = state
        for part in parents:
            container = container.setdefault(part, {})
        if tuple((*parents, last)) in PROVIDER_FILTERED:
            entries = [t for t in container.get(last) or [] if t["key"] != rewrite.held["key"]]
            container[last] = [*entries, rewrite.held]
        elif isinstance(rewrite.held, dict):
            container[last] = {**(container.get(last) or {}), **rewrite.held}
        else:
            container[last] = rewrite.held
    for path in PROVIDER_FILTERED:
        *parents, last = path
        held, wanted = _get(state, path), _get(declared, path) or []
        if held is not None:
            keys = {t["key"] for t in wanted}
            _get(state, tuple(parents))[last] = [t for t in held if t["key"] in keys]
    return state


def next_preview(declared: dict[str, Any], state: dict[str, Any], ignored: list[str]) -> list[str]:
    """The paths the provider's diff of `declared` against `state` would show, minus `ignored`."""
    changes: list[str] = []

    def is_ignored(path: tuple[str, ...]) -> bool:
        text = pulumi_path(path)
        return any(text == i or text.startswith(i + ".") or text.startswith(i + "[") for i in ignored)

    def walk(config: Any, held: Any, path: tuple[str, ...]) -> None:
        text = pulumi_path(path) if path else ""
        if path and is_ignored(path):
            return
        if config is None or (path in MAPS and config == {}):
            return  # not declared: Optional+Computed, the provider keeps what GKE holds
        if path in PROVIDER_FILTERED:
            config, held = ({t["key"]: t for t in v or []} for v in (config, held))
        if isinstance(config, dict) and isinstance(held, dict):
            keys = set(config) | (set(held) if (path in MAPS or path in PROVIDER_FILTERED) else set())
            for key in sorted(keys):
                if key not in config:
                    if not is_ignored((*path, key)):
                        changes.append(pulumi_path((*path, key)))
                else:
                    walk(config[key], held.get(key), (*path, key))
        elif config != held:
            changes.append(text)

    walk(_with_defaults(declared), state, ())
    return changes


def _node_pools(result: Any) -> list[Any]:
    return list(result.of_type(NODE_POOL))


@pytest.mark.parametrize("stack", stacks())
def test_every_pool_of_every_example_stack_previews_clean_after_gke_rewrites(stack: str) -> None:
    for pool in _node_pools(stack_render(stack)):
        state = gke_holds(pool.inputs)
        assert next_preview(pool.inputs, state, list(pool.ignore_changes)) == [], pool.name


@pytest.mark.parametrize("kind", sorted(POOL_KINDS))
def test_every_kind_of_gpu_pool_previews_clean_after_gke_rewrites(kind: str) -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[POOL_KINDS[kind]]))
    pools = [p for p in _node_pools(result) if p.name != "gke-system"]
    assert pools
    for pool in pools:
        state = gke_holds(pool.inputs)
        assert next_preview(pool.inputs, state, list(pool.ignore_changes)) == [], pool.name


def test_the_model_sees_the_loop_of_a_declared_surge_strategy_on_a_dws_pool() -> None:
    declared = {
        "nodeConfig": {"flexStart": True},
        "upgradeSettings": {"maxSurge": 0, "maxUnavailable": 1},
    }
    state = gke_holds(declared)
    assert state["upgradeSettings"]["strategy"] == "SHORT_LIVED"
    assert next_preview(declared, state, []) == ["upgradeSettings.strategy"]
    assert next_preview(declared, state, ["upgradeSettings"]) == []


def test_gke_owned_fields_are_left_out_and_ignored_on_dws_pools_only() -> None:
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[{**L4_POOL, "flexStart": True}, {**L4_POOL, "name": "plain"}],
        )
    )
    flex = result.one(NODE_POOL, "gpu-l4-pool")
    plain = result.one(NODE_POOL, "gpu-plain-pool")
    assert "upgradeSettings" not in flex.inputs
    assert set(flex.ignore_changes) == {
        "initialNodeCount",
        "upgradeSettings",
        'nodeConfig.labels["cloud.google.com/gke-flex-start"]',
    }
    assert plain.inputs["upgradeSettings"] == {"maxSurge": 0, "maxUnavailable": 1}
    assert plain.ignore_changes == ("initialNodeCount",)


def test_each_rewrite_names_its_source_and_a_known_handling() -> None:
    assert ignored_paths(PoolKind()) == []
    for rewrite in GKE_REWRITES:
        assert rewrite.source and rewrite.pools
        assert rewrite.handling in ("declared", "ignored", "provider-filtered")


def test_pulumi_paths_quote_map_keys() -> None:
    assert pulumi_path(("upgradeSettings",)) == "upgradeSettings"
    assert pulumi_path(("nodeConfig", "labels", "cloud.google.com/gke-queued")) == (
        'nodeConfig.labels["cloud.google.com/gke-queued"]'
    )
