"""A cluster's GPU pools: node pools, capacity ladders or, on Autopilot, compute classes; and what the
pools need beside them (`gpu_layer`), which a single-cluster stack and each fleet worker declare alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from ..cluster.gke_cluster import GkeCluster
from ..gpu.compute_class import GpuComputeClass, compute_class_args
from ..gpu.node_pool import GpuNodePool, node_pool_args
from ..gpudirect.g4_network import G4SecondNetwork
from .declare import declare
from .program_batch import admission_scope
from .program_dra import dra_driver
from .program_gpudirect import (
    g4_second_network,
    gpudirect_admission,
    gpudirect_networks,
    gpudirect_software,
    pool_node_networks,
)
from .settings import Settings


@dataclass(frozen=True)
class GpuLayer:
    """A cluster's GPU pools (by name) and what they need on the cluster: GPUDirect's node software
    (with its Networks), the admission policies that confine its privilege, NVIDIA's DRA driver."""

    pools: dict[str, pulumi.ComponentResource]
    software: list[pulumi.Resource]
    admission: pulumi.Resource | None
    driver: pulumi.Resource | None

    @property
    def guards(self) -> list[pulumi.Resource]:
        """What a namespace the admission policies confine waits for."""
        return [self.admission] if self.admission is not None else []


def gpu_layer(settings: Settings, cluster: GkeCluster, prefix: str = "") -> GpuLayer:
    """Declare the cluster's GPU pools and what they need: GPUDirect's VPCs and G4's second network
    (before the pools that attach to them), the image-cache allowlist of its capacity ladders,
    GPUDirect's software and admission policies, and the DRA driver of its racks and `draGpus` pools.
    `prefix` starts every resource name (a fleet worker's); every Kubernetes object goes through the
    cluster's provider."""
    networks = gpudirect_networks(settings, prefix)
    kubernetes = pulumi.ResourceOptions(providers={"kubernetes": cluster.provider})
    second_network = g4_second_network(settings, kubernetes, prefix)
    pools = gpu_pools(settings, cluster, networks, prefix, second_network)
    # GKE creates a ladder's node pools itself: it attaches their preloaded disk only for an image the
    # cluster's one allowlist names.
    ladder_images = sorted(
        {p.image_cache.disk_image for p in settings.gpu_pools if p.capacity_ladder and p.image_cache}
    )
    if ladder_images and not settings.cluster.autopilot:
        from ..gpu.image_cache_allowlist import ImageCacheAllowlist

        declare(
            ImageCacheAllowlist,
            f"{prefix}image-cache",
            {"disk_images": ladder_images},
            opts=pulumi.ResourceOptions(provider=cluster.provider),
        )
    software = gpudirect_software(settings, networks, kubernetes, prefix)
    admission = gpudirect_admission(settings, admission_scope(settings), kubernetes, prefix)
    driver = dra_driver(settings, cluster.provider, list(pools.values()), prefix)
    return GpuLayer(pools, list(software), admission, driver)


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
