"""GPUDirect's plan: the stack's GPUDirect pools turned into what its components take (per flavour, its
VPCs and its node software; G4's second network; the admission policies) and the stack output
`gpudirect`, as data. Pure: no resource is declared here (stack/program_pools.py declares the plan,
wiring the networks' Outputs into the pools and the software). Typed on `GpuDirectPool` (what this
domain reads of a GPU pool), and light: the components' modules are imported by the stacks that declare
them, not by a plan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, NotRequired, TypedDict, cast

from ..core.image_digests import digests_for
from ..network.model import NetworkConfig
from .flavors import DRANET_CLAIM_TEMPLATE, FLAVORS, G4_NIC, GpuDirectFlavor, rdma_nic_count
from .section import GpuDirectPool

if TYPE_CHECKING:
    from .admission import GpuDirectAdmissionArgs
    from .g4_network import G4SecondNetworkArgs
    from .networks import GpuDirectNetworksArgs
    from .software import GpuDirectSoftwareArgs


class PoolGpuDirect(TypedDict):
    """A pool's GPUDirect in the stack output `gpuPools[].gpudirect`."""

    flavor: str
    networking: str  # a GpuDirectNetworking value
    claimTemplate: NotRequired[str]
    networks: NotRequired[list[str]]


class FlavorOutput(TypedDict):
    """A flavour's entry of the stack output `gpudirect`: its pools, its Networks and the Pod parts a
    workload copies (with DRANET: the claim instead of the annotations)."""

    pools: list[str]
    networks: NotRequired[list[str]]
    pod: NotRequired[dict[str, Any]]
    dranetPod: NotRequired[dict[str, Any]]


class AdmissionScope(NamedTuple):
    """Where the admission policies of the stack's GPU layer admit what (GpuDirectAdmission): the
    namespaces the Pod policy confines, those of them where the device annotations are allowed, each
    GPU Network's namespaces, and the namespaces whose claims may request DRANET's NICs (None: no DRANET
    pool). The teams' and the all-reduce's namespaces make it: workloads/batch_plan.py builds it."""

    namespaces: list[str]
    device_namespaces: list[str]
    networks: dict[str, list[str]]
    nic_claims: list[str] | None


class GpuDirectPlan(NamedTuple):
    """The stack's GPUDirect layer, planned: its pools by flavour, and the args that need no Output."""

    flavors: dict[GpuDirectFlavor, list[GpuDirectPool]]
    networks: dict[GpuDirectFlavor, GpuDirectNetworksArgs]
    second_network: G4SecondNetworkArgs | None
    gpudirect_cidr: str | None
    image_digests: Mapping[str, str]

    def software(
        self, node_networks: Mapping[GpuDirectFlavor, Any]
    ) -> dict[GpuDirectFlavor, GpuDirectSoftwareArgs]:
        """Per flavour, its node software's args (the installers tolerate every taint, as Google's
        manifests; DRANET pools need gIB too), its Networks from `node_networks` (the declared
        GpuDirectNetworks' Output, per flavour) for multi-networking pools."""
        from .images import NODE_IMAGES_BY_TAG

        planned: dict[GpuDirectFlavor, GpuDirectSoftwareArgs] = {}
        for flavor, pools in self.flavors.items():
            args: GpuDirectSoftwareArgs = {
                "flavor": flavor,
                # Only the pools that asked for GPUDirect: another pool of the same accelerator keeps
                # its nodes as they are.
                "node_pools": [pool.name for pool in pools],
            }
            if flavor in node_networks and any(pool.multi_network for pool in pools):
                # The Networks Pods name in their annotations (DRANET pools claim their NICs instead).
                args["node_networks"] = node_networks[flavor]
            if self.gpudirect_cidr:
                args["gpudirect_cidr"] = self.gpudirect_cidr
            if digests := digests_for(dict(self.image_digests), NODE_IMAGES_BY_TAG[flavor]):
                args["image_digests"] = digests
            planned[flavor] = args
        return planned

    def admission(self, scope: AdmissionScope) -> GpuDirectAdmissionArgs | None:
        """The admission policies that confine GPUDirect's privilege and the GPU networks, once per
        cluster with GPUDirect pools or G4's second network; None where they would admit nothing."""
        flavors = list(self.flavors)
        if not (flavors or scope.namespaces or scope.networks or scope.nic_claims is not None):
            return None
        from .admission_cel import flavors_with_injector

        if not (
            scope.namespaces
            or flavors_with_injector(flavors)
            or scope.networks
            or scope.nic_claims is not None
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
        return args

    def nic_counts(self) -> list[int]:
        """The NIC counts of the DRANET pools' flavours (DranetClaimTemplates' `rdma-<n>` templates)."""
        return sorted(
            {rdma_nic_count(flavor) for flavor, pools in self.flavors.items() if any(p.dranet for p in pools)}
        )

    def output(self) -> dict[str, FlavorOutput]:
        """Stack output `gpudirect`: per flavour, its pools, its Networks and the Pod pieces a workload
        copies into its own JobSet (gpudirect/pod_parts.py, the same the nccl-allreduce sample uses)."""
        from .pod_parts import dranet_pod_parts, gpudirect_pod_parts

        output: dict[str, FlavorOutput] = {}
        for flavor, pools in self.flavors.items():
            entry: FlavorOutput = {"pools": [pool.name for pool in pools]}
            if any(pool.multi_network for pool in pools):
                entry["networks"] = [nic.network_name for nic in FLAVORS[flavor].nics]
                entry["pod"] = gpudirect_pod_parts(flavor)
            if any(pool.dranet for pool in pools):
                # For the DRANET pools: the claim instead of the annotations.
                entry["dranetPod"] = dranet_pod_parts(flavor)
            output[str(flavor)] = entry
        return output


def plan_gpudirect(
    pools: Sequence[GpuDirectPool],
    network: NetworkConfig | None,
    *,
    project: str,
    region: str,
    cluster_name: str,
    image_digests: Mapping[str, str],
) -> GpuDirectPlan:
    """The GPUDirect layer of a cluster's pools: per flavour whose pools attach VPCs this program creates
    (multi-networking pools, and A4X Max's DRANET pools, which GKE's accelerator network profile does
    not serve), a GpuDirectNetworks; G4's second network where a pool asks for it."""
    flavors: dict[GpuDirectFlavor, list[GpuDirectPool]] = {}
    for pool in pools:
        if pool.gpudirect_flavor is not None:
            flavors.setdefault(pool.gpudirect_flavor, []).append(pool)
    networks: dict[GpuDirectFlavor, GpuDirectNetworksArgs] = {}
    for flavor, members in flavors.items():
        attached = [pool for pool in members if pool.stack_networks]
        if not attached:
            continue
        args = cast("GpuDirectNetworksArgs", _vpc(network, project, region, cluster_name))
        args["flavor"] = flavor
        if FLAVORS[flavor].roce:
            # The stack rules put every RDMA pool in one zone.
            args["zone"] = (attached[0].zones or [""])[0]
        networks[flavor] = args
    second = None
    if any(pool.second_network for pool in pools):
        second = cast("G4SecondNetworkArgs", _vpc(network, project, region, cluster_name))
    cidr = network.gpudirect_cidr if network is not None else None
    return GpuDirectPlan(flavors, networks, second, cidr, image_digests)


def multi_networking(pools: Sequence[GpuDirectPool]) -> bool:
    """The cluster needs GKE's multi-networking: a GPUDirect pool on it, or G4's second network."""
    return any(pool.multi_network or pool.second_network for pool in pools)


def pool_summary(pool: GpuDirectPool) -> PoolGpuDirect | None:
    """A pool's GPUDirect in its stack output (`gpuPools[].gpudirect`, `secondNetwork`)."""
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


def second_network_name() -> str:
    """The Kubernetes Network of G4's second NIC, for a Pod that names it."""
    return G4_NIC.network_name


def _vpc(network: NetworkConfig | None, project: str, region: str, name_prefix: str) -> dict[str, Any]:
    """What a VPC of the GPU NICs takes, a flavour's or G4's: where it goes and, beside a VPC the stack
    creates, its flow logs and the cluster's ranges (an existing VPC's are its own)."""
    assert network is not None and network.gpudirect_cidr, "the stack rules resolve the range"
    args: dict[str, Any] = {
        "project": project,
        "region": region,
        "name_prefix": name_prefix,
        "cidr": network.gpudirect_cidr,
    }
    if not network.existing:
        args["flow_log_sampling"] = network.flow_log_sampling or 0
        args["cluster_ranges"] = [
            r for r in (network.subnet_cidr, network.pods_cidr, network.services_cidr) if r
        ]
    return args
