"""The stack's GPUDirect layer: per flavour among the stack's pools, its VPCs (GpuDirectNetworks),
then, once the cluster exists, its in-cluster objects (GpuDirectSoftware)."""

from typing import Any

import pulumi

from ..gpu.pool import GpuPool
from ..gpudirect.admission import GpuDirectAdmission, GpuDirectAdmissionArgs
from ..gpudirect.admission_cel import flavors_with_injector
from ..gpudirect.flavors import FLAVORS, GpuDirectFlavor
from ..gpudirect.networks import GpuDirectNetworks, GpuDirectNetworksArgs
from ..gpudirect.pod_parts import gpudirect_pod_parts
from ..gpudirect.software import GpuDirectSoftware, GpuDirectSoftwareArgs
from .declare import declare
from .settings import Settings


def stack_flavors(settings: Settings) -> dict[GpuDirectFlavor, list[GpuPool]]:
    """The GPUDirect flavours of the stack's pools, in pool order, with their pools."""
    flavors: dict[GpuDirectFlavor, list[GpuPool]] = {}
    for pool in settings.gpu_pools:
        flavor = pool.gpudirect_flavor
        if flavor is not None:
            flavors.setdefault(flavor, []).append(pool)
    return flavors


def gpudirect_networks(settings: Settings) -> dict[GpuDirectFlavor, GpuDirectNetworks]:
    """One GpuDirectNetworks per flavour: the VPCs every pool of that flavour attaches to."""
    network = settings.network
    declared: dict[GpuDirectFlavor, GpuDirectNetworks] = {}
    for flavor, pools in stack_flavors(settings).items():
        assert network is not None and network.gpudirect_cidr, "the stack rules resolve the range"
        assert settings.cluster.name is not None, "the cluster rules resolve the name"
        args: GpuDirectNetworksArgs = {
            "project": settings.project or "",
            "region": settings.region or "",
            "name_prefix": settings.cluster.name,
            "flavor": flavor,
            "cidr": network.gpudirect_cidr,
        }
        if not network.existing:
            args["flow_log_sampling"] = network.flow_log_sampling or 0
        if not network.existing:
            args["cluster_ranges"] = [
                r for r in (network.subnet_cidr, network.pods_cidr, network.services_cidr) if r
            ]
        if flavor == GpuDirectFlavor.RDMA:
            # The stack rules put every RDMA pool in one zone.
            args["zone"] = (pools[0].zones or [""])[0]
        declared[flavor] = declare(GpuDirectNetworks, f"gpudirect-{flavor.lower()}", args)
    return declared


def gpudirect_software(
    settings: Settings,
    networks: dict[GpuDirectFlavor, GpuDirectNetworks],
    kubernetes: pulumi.ResourceOptions,
) -> list[GpuDirectSoftware]:
    """Per flavour, its Networks and node software in the cluster (the installers tolerate every
    taint, as Google's manifests)."""
    declared: list[GpuDirectSoftware] = []
    for flavor, pools in stack_flavors(settings).items():
        args: GpuDirectSoftwareArgs = {
            "flavor": flavor,
            "node_networks": networks[flavor].node_networks,
            # Only the pools that asked for GPUDirect: another pool of the same accelerator keeps its
            # nodes as they are.
            "node_pools": [pool.name for pool in pools],
        }
        if settings.network is not None and settings.network.gpudirect_cidr:
            args["gpudirect_cidr"] = settings.network.gpudirect_cidr
        declared.append(
            declare(GpuDirectSoftware, f"gpudirect-{flavor.lower()}-software", args, opts=kubernetes)
        )
    return declared


def gpudirect_admission(
    settings: Settings,
    confined: tuple[list[str], list[str]],
    kubernetes: pulumi.ResourceOptions,
) -> GpuDirectAdmission | None:
    """The admission policies that confine GPUDirect's privilege (gpudirect/admission.py), once per
    cluster with GPUDirect pools; `confined`: the namespaces they bind and those where the device
    annotations are allowed (program_batch.gpudirect_namespaces)."""
    flavors = list(stack_flavors(settings))
    namespaces, device_namespaces = confined
    if not flavors or not (namespaces or flavors_with_injector(flavors)):
        return None
    args: GpuDirectAdmissionArgs = {
        "flavors": flavors,
        "namespaces": namespaces,
        "device_namespaces": device_namespaces,
    }
    return declare(GpuDirectAdmission, "gpudirect-admission", args, opts=kubernetes)


def gpudirect_output(settings: Settings) -> dict[str, Any]:
    """Stack output `gpudirect`: per flavour, its pools, its Networks and the Pod pieces a workload
    copies into its own JobSet (gpudirect/pod_parts.py, the same the nccl-allreduce sample uses)."""
    return {
        str(flavor): {
            "pools": [pool.name for pool in pools],
            "networks": [nic.network_name for nic in FLAVORS[flavor].nics],
            "pod": gpudirect_pod_parts(flavor),
        }
        for flavor, pools in stack_flavors(settings).items()
    }


def pool_gpudirect_summary(pool: GpuPool) -> dict[str, Any] | None:
    flavor = pool.gpudirect_flavor
    if flavor is None:
        return None
    return {"flavor": str(flavor), "networks": [nic.network_name for nic in FLAVORS[flavor].nics]}
