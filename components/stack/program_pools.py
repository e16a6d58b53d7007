"""A cluster's GPU pools: node pools, capacity ladders or, on Autopilot, compute classes."""

from __future__ import annotations

from typing import Any

import pulumi

from ..cluster.gke_cluster import GkeCluster
from ..gpu.compute_class import GpuComputeClass, compute_class_args
from ..gpu.node_pool import GpuNodePool, node_pool_args
from .declare import declare
from .settings import Settings


def gpu_pools(
    settings: Settings, cluster: GkeCluster, networks: dict[Any, Any], prefix: str = ""
) -> dict[str, pulumi.ComponentResource]:
    """Declare the stack's GPU pools on `cluster`; `prefix` starts their resource names (a fleet
    worker's)."""
    autopilot = settings.cluster.autopilot
    pools: dict[str, pulumi.ComponentResource] = {}
    for pool in settings.gpu_pools:
        name = f"{prefix}gpu-{pool.name}"
        if not autopilot and pool.capacity_ladder is not None:
            from ..gpu.capacity_ladder import GpuCapacityLadder, capacity_ladder_args

            assert settings.cluster.location is not None, "the cluster rules resolve the location"
            pools[pool.name] = declare(
                GpuCapacityLadder,
                name,
                capacity_ladder_args(
                    pool,
                    project=settings.project or "",
                    location=settings.cluster.location,
                    node_service_account_email=cluster.node_service_account_email,
                ),
                # A Kubernetes object: after the cluster, through its provider.
                opts=pulumi.ResourceOptions(provider=cluster.provider),
            )
        elif not autopilot:
            assert settings.cluster.location is not None, "the cluster rules resolve the location"
            flavor = pool.gpudirect_flavor
            args = node_pool_args(
                pool,
                project=settings.project or "",
                location=settings.cluster.location,
                cluster_name=cluster.cluster_name,
                node_service_account_email=cluster.node_service_account_email,
                additional_node_networks=(
                    networks[flavor].node_networks if flavor is not None and pool.stack_networks else None
                ),
            )
            pools[pool.name] = declare(GpuNodePool, name, args)
        elif pool.on_demand_fallback:
            pools[pool.name] = declare(
                GpuComputeClass,
                name,
                compute_class_args(pool, region=settings.region),
                opts=pulumi.ResourceOptions(provider=cluster.provider),
            )
    return pools
