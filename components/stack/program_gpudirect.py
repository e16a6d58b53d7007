"""The stack's GPUDirect layer: per flavour among the stack's pools, its VPCs (GpuDirectNetworks),
then, once the cluster exists, its in-cluster objects (GpuDirectSoftware)."""

from typing import Any

import pulumi

from ..core.image_digests import digests_for
from ..gpu.pool import GpuPool
from ..gpudirect.admission import GpuDirectAdmission, GpuDirectAdmissionArgs
from ..gpudirect.admission_cel import flavors_with_injector
from ..gpudirect.dranet import DranetClaimTemplates, dranet_pod_parts
from ..gpudirect.flavors import DRANET_CLAIM_TEMPLATE, FLAVORS, GpuDirectFlavor
from ..gpudirect.g4_network import G4SecondNetwork, G4SecondNetworkArgs
from ..gpudirect.images import NODE_IMAGES_BY_TAG
from ..gpudirect.networks import GpuDirectNetworks, GpuDirectNetworksArgs
from ..gpudirect.pod_parts import gpudirect_pod_parts
from ..gpudirect.software import GpuDirectSoftware, GpuDirectSoftwareArgs
from ..workloads.batch_teams import DEFAULT_TEAM
from ..workloads.nccl_allreduce_network import rdma_nic_count
from ..workloads.team_namespaces import gpudirect_namespace
from .declare import declare
from .settings import AdmissionScope, Settings


def stack_flavors(settings: Settings) -> dict[GpuDirectFlavor, list[GpuPool]]:
    """The GPUDirect flavours of the stack's pools, in pool order, with their pools."""
    flavors: dict[GpuDirectFlavor, list[GpuPool]] = {}
    for pool in settings.gpu_pools:
        flavor = pool.gpudirect_flavor
        if flavor is not None:
            flavors.setdefault(flavor, []).append(pool)
    return flavors


def multi_network_flavors(settings: Settings) -> dict[GpuDirectFlavor, list[GpuPool]]:
    """`stack_flavors` for the pools on multi-networking (DRANET pools get GKE's own networks)."""
    flavors = {
        flavor: [pool for pool in pools if pool.multi_network]
        for flavor, pools in stack_flavors(settings).items()
    }
    return {flavor: pools for flavor, pools in flavors.items() if pools}


def stack_network_flavors(settings: Settings) -> dict[GpuDirectFlavor, list[GpuPool]]:
    """`stack_flavors` for the pools whose nodes attach VPCs this program creates: multi-networking
    pools, and A4X Max's DRANET pools (GKE's accelerator network profile does not serve them)."""
    flavors = {
        flavor: [pool for pool in pools if pool.stack_networks]
        for flavor, pools in stack_flavors(settings).items()
    }
    return {flavor: pools for flavor, pools in flavors.items() if pools}


def dranet_pools(settings: Settings) -> list[GpuPool]:
    """The pools whose Pods claim their GPU NICs through GKE's managed DRANET."""
    return [pool for pool in settings.gpu_pools if pool.dranet]


def gpudirect_networks(settings: Settings, prefix: str = "") -> dict[GpuDirectFlavor, GpuDirectNetworks]:
    """One GpuDirectNetworks per flavour whose pools attach the stack's VPCs: the VPCs every such pool
    attaches to; `prefix` starts their resource names (a fleet worker's)."""
    network = settings.network
    declared: dict[GpuDirectFlavor, GpuDirectNetworks] = {}
    for flavor, pools in stack_network_flavors(settings).items():
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
        if FLAVORS[flavor].roce:
            # The stack rules put every RDMA pool in one zone.
            args["zone"] = (pools[0].zones or [""])[0]
        declared[flavor] = declare(GpuDirectNetworks, f"{prefix}gpudirect-{flavor.lower()}", args)
    return declared


def g4_second_network(
    settings: Settings, kubernetes: pulumi.ResourceOptions, prefix: str = ""
) -> G4SecondNetwork | None:
    """G4's second network (gpudirect/g4_network.py), once per cluster with a `secondNetwork` pool:
    its VPC, subnet and firewall rule, and its Network in the cluster (`kubernetes`); `prefix` starts
    its resource name (a fleet worker's)."""
    if not any(pool.second_network for pool in settings.gpu_pools):
        return None
    network = settings.network
    assert network is not None and network.gpudirect_cidr, "the stack rules resolve the range"
    assert settings.cluster.name is not None, "the cluster rules resolve the name"
    args: G4SecondNetworkArgs = {
        "project": settings.project or "",
        "region": settings.region or "",
        "name_prefix": settings.cluster.name,
        "cidr": network.gpudirect_cidr,
    }
    if not network.existing:
        args["flow_log_sampling"] = network.flow_log_sampling or 0
        args["cluster_ranges"] = [
            r for r in (network.subnet_cidr, network.pods_cidr, network.services_cidr) if r
        ]
    return declare(G4SecondNetwork, f"{prefix}g4-second-network", args, opts=kubernetes)


def pool_node_networks(pool: GpuPool, networks: dict[Any, Any], second: G4SecondNetwork | None) -> Any:
    """The additional node networks a pool attaches: its GPUDirect flavour's, G4's second, or None."""
    flavor = pool.gpudirect_flavor
    if flavor is not None and pool.stack_networks:
        return networks[flavor].node_networks
    if pool.second_network and second is not None:
        return second.node_networks
    return None


def gpudirect_software(
    settings: Settings,
    networks: dict[GpuDirectFlavor, GpuDirectNetworks],
    kubernetes: pulumi.ResourceOptions,
    prefix: str = "",
) -> list[GpuDirectSoftware]:
    """Per flavour, its Networks (multi-networking pools only) and node software in the cluster (the
    installers tolerate every taint, as Google's manifests; DRANET pools need gIB too)."""
    declared: list[GpuDirectSoftware] = []
    for flavor, pools in stack_flavors(settings).items():
        args: GpuDirectSoftwareArgs = {
            "flavor": flavor,
            # Only the pools that asked for GPUDirect: another pool of the same accelerator keeps its
            # nodes as they are.
            "node_pools": [pool.name for pool in pools],
        }
        if flavor in networks and any(pool.multi_network for pool in pools):
            # The Networks Pods name in their annotations (DRANET pools claim their NICs instead).
            args["node_networks"] = networks[flavor].node_networks
        if settings.network is not None and settings.network.gpudirect_cidr:
            args["gpudirect_cidr"] = settings.network.gpudirect_cidr
        if digests := digests_for(settings.image_digests, NODE_IMAGES_BY_TAG[flavor]):
            args["image_digests"] = digests
        declared.append(
            declare(GpuDirectSoftware, f"{prefix}gpudirect-{flavor.lower()}-software", args, opts=kubernetes)
        )
    return declared


def gpudirect_admission(
    settings: Settings,
    scope: AdmissionScope,
    kubernetes: pulumi.ResourceOptions,
    prefix: str = "",
) -> GpuDirectAdmission | None:
    """The admission policies that confine GPUDirect's privilege and the GPU networks
    (gpudirect/admission.py), once per cluster with GPUDirect pools or G4's second network; `scope`:
    the namespaces each policy admits (program_batch.admission_scope)."""
    flavors = list(stack_flavors(settings))
    if not (
        scope.namespaces or flavors_with_injector(flavors) or scope.networks or scope.nic_claims is not None
    ):
        return None
    args: GpuDirectAdmissionArgs = {
        "flavors": flavors,
        "namespaces": scope.namespaces,
        "device_namespaces": scope.device_namespaces,
    }
    if scope.networks:
        args["network_namespaces"] = scope.networks
    if scope.nic_claims is not None:
        args["nic_claim_namespaces"] = scope.nic_claims
    return declare(GpuDirectAdmission, f"{prefix}gpudirect-admission", args, opts=kubernetes)


def gpudirect_output(settings: Settings) -> dict[str, Any]:
    """Stack output `gpudirect`: per flavour, its pools, its Networks and the Pod pieces a workload
    copies into its own JobSet (gpudirect/pod_parts.py, the same the nccl-allreduce sample uses)."""
    output: dict[str, Any] = {}
    for flavor, pools in stack_flavors(settings).items():
        entry: dict[str, Any] = {"pools": [pool.name for pool in pools]}
        if any(pool.multi_network for pool in pools):
            entry["networks"] = [nic.network_name for nic in FLAVORS[flavor].nics]
            entry["pod"] = gpudirect_pod_parts(flavor)
        if any(pool.dranet for pool in pools):
            # For the DRANET pools: the claim instead of the annotations (gpudirect/dranet.py).
            entry["dranetPod"] = dranet_pod_parts(flavor)
        output[str(flavor)] = entry
    return output


def pool_gpudirect_summary(pool: GpuPool) -> dict[str, Any] | None:
    flavor = pool.gpudirect_flavor
    if flavor is None:
        return None
    if pool.dranet:
        return {"flavor": str(flavor), "networking": "dranet", "claimTemplate": DRANET_CLAIM_TEMPLATE}
    return {
        "flavor": str(flavor),
        "networking": "multiNetwork",
        "networks": [nic.network_name for nic in FLAVORS[flavor].nics],
    }


def dranet_claim_templates(
    settings: Settings,
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
    prefix: str = "",
) -> DranetClaimTemplates | None:
    """The ResourceClaimTemplate `default-rdma` in each team's GPUDirect namespace whose pools include
    a DRANET pool (the all-reduce declares its own): where the teams' JobSets on those pools claim the
    RDMA NICs. After the team namespaces (`depends_on`)."""
    dranet = {pool.name for pool in dranet_pools(settings)}
    if not dranet or not settings.batch.kueue:
        return None
    teams = [(team.name, set(team.pools)) for team in settings.batch.teams] or [
        (DEFAULT_TEAM, {pool.name for pool in settings.gpu_pools})
    ]
    namespaces = [gpudirect_namespace(name) for name, pools in teams if pools & dranet]
    if not namespaces:
        return None
    counts = sorted(
        {
            rdma_nic_count(GpuDirectFlavor(p.gpudirect_flavor))
            for p in dranet_pools(settings)
            if p.gpudirect_flavor
        }
    )
    return declare(
        DranetClaimTemplates,
        f"{prefix}gpudirect-dranet",
        {"namespaces": namespaces, "nic_counts": counts},
        opts=pulumi.ResourceOptions(provider=provider, depends_on=depends_on),
    )
