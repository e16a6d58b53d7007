"""What GKE sets on a GPU node pool on its own, in one place, each with its source.

A preview converges only when what the program declares equals what GKE holds after `pulumi up`
(as the provider reads it back), or when the field is left to GKE and ignored. Each row below is one
such value: the NodePool input it lands on, the pools it applies to, what GKE holds, and how the program
keeps the preview clean:

* ``declared``: the program declares exactly what GKE holds;
* ``ignored``: the program leaves the field to GKE and lists it in the pool's ``ignore_changes``
  (`ignored_paths`), because the provider cannot express GKE's value or the value is not documented;
* ``provider-filtered``: the provider itself drops GKE's addition when it reads the pool back.

A new rewrite found on a cluster is one more row. `tests/test_gke_rewrites.py` applies every row to
what each example stack and each kind of pool declares and checks that the next preview shows no
change, with the provider's own read rules (`PROVIDER_DEFAULTS`, `PROVIDER_FILTERED`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from ..core.catalog import load_catalog
from ..core.common import GPU_TAINT_KEY, GPU_TAINT_VALUE
from .placement_rules import FLEX_START_MIN_VERSION

__all__ = [
    "GKE_REWRITES",
    "PROVIDER_DEFAULTS",
    "PROVIDER_FILTERED",
    "GkeRewrite",
    "PoolKind",
    "bundles_local_ssds",
    "declared_labels",
    "ignored_paths",
    "pulumi_path",
]

# terraform-provider-google(-beta) at 93c65b2d (2026-08-21), the provider pulumi-gcp bridges:
_TFP = "hashicorp/terraform-provider-google-beta@93c65b2d google-beta/services/container/"


class PoolKind(NamedTuple):
    """Which ways of getting nodes a pool uses: what decides the rewrites that apply to it."""

    gpu: bool = True
    flex_start: bool = False
    queued_provisioning: bool = False
    # Its machine type comes with Local SSDs (A2 Ultra, A3, A4, A4X, A4X Max: the catalog's
    # bundledLocalSsds), whose count the machine type fixes.
    bundled_local_ssds: bool = False

    @property
    def dws(self) -> bool:
        """Capacity from Dynamic Workload Scheduler: flex-start VMs, queued provisioning or both."""
        return self.flex_start or self.queued_provisioning

    @classmethod
    def of_inputs(cls, inputs: dict[str, Any]) -> PoolKind:
        """The kind of a NodePool as its declared (camelCase) inputs show it."""
        node_config = inputs.get("nodeConfig") or {}
        queued = inputs.get("queuedProvisioning") or {}
        return cls(
            gpu=bool(node_config.get("guestAccelerators")),
            flex_start=node_config.get("flexStart") is True,
            queued_provisioning=queued.get("enabled") is True,
            bundled_local_ssds=bundles_local_ssds(node_config.get("machineType")),
        )


class GkeRewrite(NamedTuple):
    path: tuple[str, ...]
    """The NodePool input (camelCase), one element per level; a map key is one element."""
    applies: Callable[[PoolKind], bool]
    pools: str
    """The pools it applies to, in words."""
    held: Any
    """What GKE holds there after apply (a dict: the keys GKE sets inside the block)."""
    handling: Literal["declared", "ignored", "provider-filtered"]
    source: str


GKE_REWRITES: tuple[GkeRewrite, ...] = (
    GkeRewrite(
        path=("upgradeSettings",),
        applies=lambda kind: kind.dws,
        pools="flex-start or queued provisioning",
        # maxUnavailable under SHORT_LIVED is not documented; the block is ignored whole.
        held={"strategy": "SHORT_LIVED", "maxSurge": 0},
        handling="ignored",
        source=(
            f"GKE 'Node upgrade strategies': nodes that use flex-start VMs get short-lived upgrades "
            f"(GKE {FLEX_START_MIN_VERSION}+); API NodePoolUpdateStrategy SHORT_LIVED 'the dedicated "
            "upgrade strategy for QueuedProvisioning and flex start node pools'; the provider's "
            f"upgrade_settings.strategy takes only SURGE or BLUE_GREEN and defaults to SURGE ({_TFP}"
            "resource_container_node_pool.go), so SHORT_LIVED cannot be declared; the loop this causes: "
            "crossplane-contrib/provider-upjet-gcp#1028"
        ),
    ),
    GkeRewrite(
        path=("nodeConfig", "labels", "cloud.google.com/gke-queued"),
        applies=lambda kind: kind.queued_provisioning,
        pools="queued provisioning",
        held="true",
        handling="declared",
        source=(
            "GKE labels and taints queued-provisioning nodes cloud.google.com/gke-queued=true; "
            "cluster-toolkit modules/compute/gke-node-pool/main.tf declares the label on those pools"
        ),
    ),
    GkeRewrite(
        path=("nodeConfig", "labels", "cloud.google.com/gke-flex-start"),
        applies=lambda kind: kind.flex_start,
        pools="flex-start",
        held="true",
        # Whether GKE writes it into the pool's own config.labels is UNVERIFIED: ignored either way.
        handling="ignored",
        source=(
            "GKE 'About flex-start VMs': flex-start nodes carry cloud.google.com/gke-flex-start=true "
            "(UNVERIFIED: whether the pool's nodeConfig.labels shows it)"
        ),
    ),
    GkeRewrite(
        path=("nodeConfig", "taints", "cloud.google.com/gke-queued"),
        applies=lambda kind: kind.queued_provisioning,
        pools="queued provisioning",
        held={"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NO_SCHEDULE"},
        handling="provider-filtered",
        source=(
            "GKE taints queued-provisioning nodes cloud.google.com/gke-queued=true:NoSchedule; the provider "
            f"keeps only the declared taint keys in `taint` (flattenTaints, {_TFP}node_config.go)"
        ),
    ),
    GkeRewrite(
        path=("nodeConfig", "taints", GPU_TAINT_KEY),
        applies=lambda kind: kind.gpu,
        pools="every GPU pool",
        held={"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": "NO_SCHEDULE"},
        handling="declared",
        source=(
            "GKE 'Run GPUs in Standard node pools': GKE taints GPU nodes nvidia.com/gpu=present:NoSchedule"
        ),
    ),
    GkeRewrite(
        path=("nodeConfig", "ephemeralStorageLocalSsdConfig"),
        applies=lambda kind: kind.bundled_local_ssds,
        pools="machine types that come with Local SSDs (A2 Ultra, A3, A4, A4X, A4X Max)",
        # What GKE reads back for a fixed-count machine is UNVERIFIED: the count declared, or 0.
        held={"localSsdCount": "the machine type's count, or 0"},
        handling="ignored",
        source=(
            "GKE API NodeConfig.ephemeralStorageLocalSsdConfig.localSsdCount: 'For Gen3 machines which "
            "dictate a specific number of local ssds, zero (or unset) means to use the default number of "
            "local ssds that goes with that machine type'; the field is ForceNew, so a count GKE echoes "
            "differently would replace the pool; cluster-toolkit@1047080375 modules/compute/gke-node-pool/"
            "main.tf:309-315 ignores the block on every pool ('tied to machine types')"
        ),
    ),
    GkeRewrite(
        path=("management", "autoUpgrade"),
        applies=lambda kind: True,
        pools="every pool (the cluster is on a release channel)",
        held=True,
        handling="declared",
        source="GKE 'Auto-upgrading nodes': node auto-upgrade cannot be turned off on a release channel",
    ),
)

# What the provider fills in when a block is declared without the field (`{block: {field: value}}`).
PROVIDER_DEFAULTS: dict[tuple[str, ...], dict[str, Any]] = {
    ("upgradeSettings",): {"strategy": "SURGE"},  # resource_container_node_pool.go, Default: "SURGE"
}
# Lists of the provider that keep only the entries whose `key` the program declared (flattenTaints).
PROVIDER_FILTERED: tuple[tuple[str, ...], ...] = (("nodeConfig", "taints"),)


def bundles_local_ssds(machine_type: object) -> bool:
    """The machine type comes with a fixed number of Local SSDs (the catalog's bundledLocalSsds)."""
    if not isinstance(machine_type, str):
        return False
    return any(
        m.bundled_local_ssds
        for a in load_catalog().accelerators.values()
        for name, m in a.machine_types.items()
        if name == machine_type
    )


def pulumi_path(path: tuple[str, ...]) -> str:
    """A path as Pulumi's ignoreChanges takes it: `a.b` or `a.b["key/with.dots"]`."""
    text = ""
    for part in path:
        plain = part.replace("_", "a").isalnum() and part[0].isalpha()
        text += (f".{part}" if text else part) if plain else f'["{part}"]'
    return text


def ignored_paths(kind: PoolKind) -> list[str]:
    """The NodePool inputs GKE owns on a pool of this kind, for its `ignore_changes`."""
    return [pulumi_path(r.path) for r in GKE_REWRITES if r.handling == "ignored" and r.applies(kind)]


def declared_labels(kind: PoolKind) -> dict[str, str]:
    """The node labels GKE sets on a pool of this kind that the program declares as GKE holds them."""
    return {
        r.path[2]: r.held
        for r in GKE_REWRITES
        if r.path[:2] == ("nodeConfig", "labels") and r.handling == "declared" and r.applies(kind)
    }
