"""A cluster's GPU pools: node pools, capacity ladders or, on Autopilot, compute classes."""

from __future__ import annotations

from typing import Any

import pulumi

from ..cluster.gke_cluster import GkeCluster
from ..gpu.compute_class import GpuComputeClass, compute_class_args
from ..gpu.node_pool import GpuNodePool, node_pool_args
from ..gpudirect.g4_network import G4SecondNetwork
from .declare import declare
from .program_gpudirect import pool_node_networks
from .settings import Settings


def gpu_pools(
    settings: Settings,
    cluster: GkeCluster,
    networks: dict[Any, Any],
    prefix: str = "",
    second_network: G4SecondNetwork | None = None,
) -> dict[str, pulumi.ComponentResource]:
    """Declare the stack's GPU pools on `cluster`; `prefix` starts their resource names (a fleet
    worker's); `second_network`: G4's, for the pools with `secondNetwork`."""
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
            args = node_pool_args(
                pool,
                project=settings.project or "",
                location=settings.cluster.location,
                cluster_name=cluster.cluster_name,
                node_service_account_email=cluster.node_service_account_email,
                additional_node_networks=pool_node_networks(pool, networks, second_network),
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
