"""The stack's GPUDirect layer: per flavour among the stack's pools, its VPCs (GpuDirectNetworks),
then, once the cluster exists, its in-cluster objects (GpuDirectSoftware)."""

from typing import Any

import pulumi

from .declare import declare
from .gpu_pool import GpuPool
from .gpu_pool_args import NodeNetwork
from .gpudirect import FLAVORS, GpuDirectFlavor, flavor_of
from .gpudirect_networks import GpuDirectNetworks, GpuDirectNetworksArgs
from .settings import Settings
from .validation import UNKNOWN


def stack_flavors(settings: Settings) -> dict[GpuDirectFlavor, list[GpuPool]]:
    """The GPUDirect flavours of the stack's pools, in pool order, with their pools."""
    flavors: dict[GpuDirectFlavor, list[GpuPool]] = {}
    for pool in settings.gpu_pools:
        flavor = flavor_of(pool.machine_type) if pool.gpudirect else None
        if flavor is not None:
            flavors.setdefault(flavor, []).append(pool)
    return flavors


def gpudirect_networks(settings: Settings) -> dict[GpuDirectFlavor, GpuDirectNetworks]:
    """One GpuDirectNetworks per flavour: the VPCs every pool of that flavour attaches to."""
    network = settings.network
    declared: dict[GpuDirectFlavor, GpuDirectNetworks] = {}
    for flavor, pools in stack_flavors(settings).items():
        assert network is not None and network.gpudirect_cidr, "the stack rules resolve the range"
        args: GpuDirectNetworksArgs = {
            "project": settings.project or "",
            "region": settings.region or "",
            "name_prefix": settings.cluster.name,
            "flavor": flavor,
            "cidr": network.gpudirect_cidr,
        }
        if not network.existing:
            args["cluster_ranges"] = [
                r for r in (network.subnet_cidr, network.pods_cidr, network.services_cidr) if r
            ]
        if flavor == GpuDirectFlavor.RDMA:
            # The stack rules put every RDMA pool in one zone.
            args["zone"] = (pools[0].zones or [""])[0]
        declared[flavor] = declare(GpuDirectNetworks, f"gpudirect-{flavor.lower()}", args)
    return declared


def node_networks(networks: GpuDirectNetworks, flavor: GpuDirectFlavor) -> list[NodeNetwork]:
    """GpuNodePool's `additional_node_networks`: one entry per NIC, each name an Output of the
    component (unknown while the stack's args are only checked)."""
    outputs = networks.node_networks
    entries: list[NodeNetwork] = []
    for i in range(len(FLAVORS[flavor].nics)):
        if isinstance(outputs, pulumi.Output):
            entries.append(
                {
                    "network": outputs.apply(lambda nics, i=i: nics[i]["network"]),
                    "subnetwork": outputs.apply(lambda nics, i=i: nics[i]["subnetwork"]),
                }
            )
        else:
            entries.append({"network": UNKNOWN, "subnetwork": UNKNOWN})  # type: ignore[typeddict-item]
    return entries


def pool_gpudirect_summary(pool: GpuPool) -> dict[str, Any] | None:
    flavor = flavor_of(pool.machine_type) if pool.gpudirect else None
    if flavor is None:
        return None
    return {"flavor": str(flavor), "networks": [nic.network_name for nic in FLAVORS[flavor].nics]}
