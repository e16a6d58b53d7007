"""A cluster's GPU layer, declared from its domains' plans: GPUDirect's VPCs and G4's second network
(before the pools that attach them), the GPU pools (node pools, capacity ladders or, on Autopilot,
compute classes), the image-cache allowlist of its ladders, GPUDirect's node software and admission
policies, and NVIDIA's DRA driver. A single-cluster stack and each fleet worker declare it alike."""

from __future__ import annotations

from typing import Any, NamedTuple

import pulumi

from ..cluster.gke_cluster import GkeCluster
from ..dra.plan import driver_args
from ..gpu.plan import attached_networks, declares_compute_class, ladder_images, pool_kind
from ..gpu.pool import GpuPool
from ..gpudirect.plan import GpuDirectPlan, plan_gpudirect
from ..workloads.batch_plan import admission_scope
from .declare import declare
from .settings import Settings


class GpuLayer(NamedTuple):
    """A cluster's GPU pools (by name) and what they need on the cluster: GPUDirect's node software
    (with its Networks), the admission policies that confine its privilege, NVIDIA's DRA driver; and
    GPUDirect's plan, which the cluster's jobs and outputs read."""

    pools: dict[str, pulumi.ComponentResource]
    software: list[pulumi.Resource]
    admission: pulumi.Resource | None
    driver: pulumi.Resource | None
    gpudirect: GpuDirectPlan

    @property
    def guards(self) -> list[pulumi.Resource]:
        """What a namespace the admission policies confine waits for."""
        return [self.admission] if self.admission is not None else []


def gpudirect_plan(settings: Settings) -> GpuDirectPlan:
    return plan_gpudirect(
        settings.gpu_pools,
        settings.network,
        project=settings.project or "",
        region=settings.region or "",
        cluster_name=settings.cluster.name or "",
        image_digests=settings.image_digests,
    )


def gpu_layer(settings: Settings, cluster: GkeCluster, prefix: str = "") -> GpuLayer:
    """Declare the cluster's GPU layer; `prefix` starts every resource name (a fleet worker's); every
    Kubernetes object goes through the cluster's provider."""
    plan = gpudirect_plan(settings)
    kubernetes = pulumi.ResourceOptions(providers={"kubernetes": cluster.provider})
    networks: dict[Any, Any] = {}
    if plan.networks:
        from ..gpudirect.networks import GpuDirectNetworks

        for flavor, args in plan.networks.items():
            networks[flavor] = declare(
                GpuDirectNetworks,
                f"{prefix}gpudirect-{flavor.lower()}",
                args,
                section="network",
                section_checked=True,
            )
    second = None
    if plan.second_network is not None:
        from ..gpudirect.g4_network import G4SecondNetwork

        second = declare(
            G4SecondNetwork,
            f"{prefix}g4-second-network",
            plan.second_network,
            opts=kubernetes,
            section="gpuPools",
            section_checked=True,
        )
    pools = {
        pool.name: component
        for pool in settings.gpu_pools
        if (component := _pool(settings, pool, cluster, _node_networks(pool, networks, second), prefix))
    }
    if images := ladder_images(settings.gpu_pools, autopilot=settings.cluster.autopilot):
        from ..gpu.image_cache_allowlist import ImageCacheAllowlist

        declare(
            ImageCacheAllowlist,
            f"{prefix}image-cache",
            {"disk_images": images},
            opts=pulumi.ResourceOptions(provider=cluster.provider),
            section="gpuPools",
        )
    software: list[pulumi.Resource] = []
    if plan.flavors:
        from ..gpudirect.software import GpuDirectSoftware

        node_networks = {flavor: network.node_networks for flavor, network in networks.items()}
        for flavor, software_args in plan.software(node_networks).items():
            software.append(
                declare(
                    GpuDirectSoftware,
                    f"{prefix}gpudirect-{flavor.lower()}-software",
                    software_args,
                    opts=kubernetes,
                    section="gpuPools",
                )
            )
    admission = None
    scope = admission_scope(settings.gpu_pools, settings.workloads, settings.batch, settings.serving)
    if (admission_args := plan.admission(scope)) is not None:
        from ..gpudirect.admission import GpuDirectAdmission

        admission = declare(
            GpuDirectAdmission,
            f"{prefix}gpudirect-admission",
            admission_args,
            opts=kubernetes,
            section="gpuPools",
        )
    driver = None
    if (dra := driver_args(settings.gpu_pools, standard=settings.cluster.mode == "standard")) is not None:
        from ..dra.driver import NvidiaDraDriver

        driver = declare(
            NvidiaDraDriver,
            f"{prefix}dra-driver",
            dra,
            opts=pulumi.ResourceOptions(provider=cluster.provider, depends_on=list(pools.values())),
            section="gpuPools",
        )
    return GpuLayer(pools, software, admission, driver, plan)


def _node_networks(pool: GpuPool, networks: dict[Any, Any], second: Any) -> Any:
    """The node networks gpu/plan.py's attached_networks names for the pool, as declared."""
    attached = attached_networks(pool)
    if attached == "gpudirect":
        return networks[pool.gpudirect_flavor].node_networks
    if attached == "second" and second is not None:
        return second.node_networks
    return None


def _pool(
    settings: Settings, pool: GpuPool, cluster: GkeCluster, node_networks: Any, prefix: str
) -> pulumi.ComponentResource | None:
    """Declare one GPU pool on `cluster`: a capacity ladder, a node pool or, on Autopilot, a ComputeClass
    where the profile has an on-demand fallback (None: GKE makes the profile's nodes itself)."""
    name = f"{prefix}gpu-{pool.name}"
    location = settings.cluster.location
    assert location is not None, "the cluster rules resolve the location"
    kind = pool_kind(pool, autopilot=settings.cluster.autopilot)
    if kind == "capacity-ladder":
        from ..gpu.capacity_ladder import GpuCapacityLadder, capacity_ladder_args

        args = capacity_ladder_args(
            pool,
            project=settings.project or "",
            location=location,
            node_service_account_email=cluster.node_service_account_email,
        )
        # A Kubernetes object: after the cluster, through its provider.
        opts = pulumi.ResourceOptions(provider=cluster.provider)
        return declare(GpuCapacityLadder, name, args, opts=opts, section="gpuPools")
    if kind == "node-pool":
        from ..gpu.node_pool import GpuNodePool, node_pool_args

        node_pool = node_pool_args(
            pool,
            project=settings.project or "",
            location=location,
            cluster_name=cluster.cluster_name,
            node_service_account_email=cluster.node_service_account_email,
            additional_node_networks=node_networks,
        )
        return declare(GpuNodePool, name, node_pool, section="gpuPools")
    if not declares_compute_class(pool, autopilot=settings.cluster.autopilot):
        return None
    from ..gpu.compute_class import GpuComputeClass, compute_class_args

    opts = pulumi.ResourceOptions(provider=cluster.provider)
    return declare(
        GpuComputeClass, name, compute_class_args(pool, region=settings.region), opts=opts, section="gpuPools"
    )
