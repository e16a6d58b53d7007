"""Per GPU machine series, what the program leaves out or leaves to GKE (issue 36, item 4):

* Local SSDs: a machine type that comes with Local SSDs (A2 Ultra, A3, A4, A4X, A4X Max) has a count
  its type fixes; the pool declares it but ignores it after creation (`ignoreChanges`), as
  cluster-toolkit's gke-node-pool does, so a count GKE echoes otherwise never replaces the pool
  (the block is ForceNew). Other machines get no block unless the pool asks for SSDs.
* Shielded GKE Nodes: off only on a cluster of bare-metal nodes (A4X Max), labelled for the policy
  pack, as cluster-toolkit's examples/gke-a4x-max-bm; every other cluster keeps it on. Pools keep
  Shielded VM's secure boot and integrity monitoring everywhere (cluster-toolkit sends them there too).
"""

from __future__ import annotations

from typing import Any

import pytest

from gke_gpu.cluster.gke_cluster import BARE_METAL_LABEL
from gke_gpu.core.catalog import load_catalog
from gke_gpu.gpu.bare_metal import is_bare_metal
from gke_gpu.gpu.gke_rewrites import bundles_local_ssds
from tests.conftest import render, stack_config

SSD_BLOCK = "nodeConfig.ephemeralStorageLocalSsdConfig"
RESERVED = {"type": "SPECIFIC", "name": "my-reservation"}

# One pool per machine series the catalog sells (the series is the machine type's first part, with
# A2 Ultra, A3 Mega/Ultra and A4X Max apart where their Local SSDs or host differ).
SERIES: dict[str, dict[str, Any]] = {
    "n1": {"accelerator": "nvidia-tesla-t4", "gpusPerNode": 1},
    "g2": {"accelerator": "nvidia-l4", "gpusPerNode": 1},
    "a2": {"accelerator": "nvidia-tesla-a100", "gpusPerNode": 1},
    "a2-ultra": {"accelerator": "nvidia-a100-80gb", "gpusPerNode": 1},
    "a3-high": {"accelerator": "nvidia-h100-80gb", "gpusPerNode": 8},
    "a3-mega": {"accelerator": "nvidia-h100-mega-80gb", "gpusPerNode": 8},
    "a3-ultra": {"accelerator": "nvidia-h200-141gb", "gpusPerNode": 8},
    "a4": {"accelerator": "nvidia-b200", "gpusPerNode": 8},
    "a4x": {"accelerator": "nvidia-gb200", "gpusPerNode": 4, "reservation": RESERVED},
    "a4x-max": {"accelerator": "nvidia-gb300", "gpusPerNode": 4, "reservation": RESERVED},
    "g4": {"accelerator": "nvidia-rtx-pro-6000", "gpusPerNode": 1},
}


def _render(pool: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], tuple[str, ...]]:
    config = stack_config(
        cluster={"mode": "standard", "name": "series", "minimumVersion": "1.35"},
        gpuPools=[{"name": "gpu", "maxNodes": 1, **pool}],
        monitoring={"dcgm": "none", "dashboard": False},
    )
    result = render(config)
    cluster = result.one("gcp:container/cluster:Cluster").inputs
    node_pool = next(r for r in result.of_type("gcp:container/nodePool:NodePool") if r.name == "gpu-gpu-pool")
    return cluster, node_pool.inputs, node_pool.ignore_changes


def test_every_gpu_machine_series_is_covered() -> None:
    """A machine series added to the catalog must be added here, with what GKE does on it."""
    series = {name.split("-")[0] for a in load_catalog().accelerators.values() for name in a.machine_types}
    covered = {pool_series.split("-")[0] for pool_series in SERIES}
    assert series <= covered, series - covered


@pytest.mark.parametrize("series", sorted(SERIES))
def test_what_each_machine_series_sends_and_leaves_to_gke(series: str) -> None:
    cluster, pool, ignored = _render(SERIES[series])
    machine = pool["nodeConfig"]["machineType"]
    bundled = bundles_local_ssds(machine)
    block = pool["nodeConfig"].get("ephemeralStorageLocalSsdConfig")
    if bundled:
        assert block and block["localSsdCount"] > 0, machine
        assert SSD_BLOCK in ignored, f"{machine}: a count GKE echoes otherwise would replace the pool"
    else:
        assert block is None and SSD_BLOCK not in ignored, machine
    metal = is_bare_metal(machine)
    assert cluster["enableShieldedNodes"] is (not metal), machine
    assert (cluster["resourceLabels"].get(BARE_METAL_LABEL) == "true") is metal, machine
    assert pool["nodeConfig"]["shieldedInstanceConfig"] == {
        "enableIntegrityMonitoring": True,
        "enableSecureBoot": True,
    }


def test_the_series_with_local_ssds_and_bare_metal_are_the_expected_ones() -> None:
    """Which machines bundle Local SSDs and which are bare metal (the catalog's LSSD, LSSD-A4X, GPU-MT
    sources), so that the parametrized test above cannot pass by finding none."""
    machines = {s: _render(pool)[1]["nodeConfig"]["machineType"] for s, pool in SERIES.items()}
    assert {s for s, m in machines.items() if bundles_local_ssds(m)} == {
        "a2-ultra",
        "a3-high",
        "a3-mega",
        "a3-ultra",
        "a4",
        "a4x",
        "a4x-max",
    }
    assert {s for s, m in machines.items() if is_bare_metal(m)} == {"a4x-max"}
