"""The extra VPCs and subnets of one GPUDirect flavour: what its nodes' GPU NICs attach to."""

from typing import Annotated, Any, NotRequired, TypedDict

import pulumi
from pulumi_gcp import compute
from pydantic import Field

from ..core.arg_types import ProjectId, RegionName, enum_values, matching
from ..core.common import K8S_NAME, ZONE_PATTERN, Problem, Problems, cut
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.model import Cidr
from ..core.nodes import NodeNetwork
from ..core.validation import ArgsModel, Deferrable
from ..network.vpc import flow_log_config
from .flavors import (
    DEFAULT_GPUDIRECT_CIDR,
    FLAVORS,
    ROCE_METAL_SUBNET,
    GpuDirectFlavor,
    check_gpudirect_cidr,
    max_name_suffix,
    subnet_range,
)

# The longest name suffix (`-a4x-gvnic-1`) leaves the prefix this much of Compute Engine's 63 characters.
MAX_PREFIX = 63 - max_name_suffix()
# Google's RDMA guide: the RoCE VPC takes the zonal network profile `<zone>-vpc-roce` (VMs) or
# `<zone>-vpc-roce-metal` (bare metal: A4X Max).
ROCE_PROFILE = "projects/{project}/global/networkProfiles/{zone}-{profile}"


class GpuDirectNetworksArgs(TypedDict):
    """Where the flavour's VPCs go, and the address range their subnets share."""

    project: pulumi.Input[str]
    """The GCP project (the cluster's)."""
    region: pulumi.Input[str]
    """The cluster's region: every subnet is in it."""
    name_prefix: str
    """Prefix of the VPC and subnet names (the cluster's name): `<prefix>-tcpxo-1`, `<prefix>-rdma`."""
    flavor: GpuDirectFlavor
    """The machines' GPUDirect flavour (TCPX: 4 gVNIC VPCs; TCPXO: 8; RDMA: 1 gVNIC VPC and a RoCE VPC
    with 8 subnets; RDMA-A4X: 1 gVNIC VPC and a RoCE VPC with 4 subnets)."""
    zone: NotRequired[str]
    """RDMA and RDMA-A4X only, and required there: the zone of the RoCE VPC's network profile, the GPU
    pool's zone."""
    cidr: NotRequired[str]
    """The range every GPUDirect subnet of the cluster is carved from (a /16 or larger, 32 fixed slots,
    one per NIC of each flavour, so flavours never renumber each other). It must not overlap the
    cluster's node, Pod and Service ranges. Defaults to 192.168.0.0/16."""
    cluster_ranges: NotRequired[list[str]]
    """The cluster's node, Pod and Service ranges, checked against `cidr`. Defaults to unchecked."""
    flow_log_sampling: NotRequired[float]
    """VPC flow logs on the gVNIC subnets: the fraction of flows logged, 0 to 1; 0 turns them off (none
    on the RoCE subnets). NCCL keeps few, long-lived flows, so they log little. Defaults to 0.5."""


class _GpuDirectNetworksSpec(ArgsModel):
    project: Deferrable[ProjectId]
    region: Deferrable[RegionName]
    name_prefix: matching(  # type: ignore[valid-type]
        K8S_NAME, "lowercase letters, digits and hyphens, starting with a letter", max_length=MAX_PREFIX
    )
    flavor: enum_values(GpuDirectFlavor)  # type: ignore[valid-type]
    zone: Annotated[str, Field(max_length=40)] | None = None
    cidr: Cidr = DEFAULT_GPUDIRECT_CIDR
    cluster_ranges: Annotated[list[Cidr], Field(default_factory=list, max_length=8)]
    flow_log_sampling: Annotated[float, Field(ge=0, le=1)] = 0.5


def _rules(spec: _GpuDirectNetworksSpec) -> list[str]:
    checked = Problems()
    ranges = [(f"cluster_ranges[{i}]", r) for i, r in enumerate(spec.cluster_ranges)]
    check_gpudirect_cidr(spec.cidr, ranges, "cidr", checked)
    problems = checked.items
    if FLAVORS[GpuDirectFlavor(spec.flavor)].roce:
        if spec.zone is None:
            problems.append(
                Problem(
                    "zone", f"required with flavor {spec.flavor}: the RoCE VPC's network profile is zonal"
                )
            )
        elif not ZONE_PATTERN.fullmatch(spec.zone):
            problems.append(Problem("zone", f"{cut(spec.zone)} is not a zone name (e.g. us-central1-a)"))
        elif isinstance(spec.region, str) and not spec.zone.startswith(f"{spec.region}-"):
            problems.append(Problem("zone", f"{spec.zone} is not in region {spec.region}"))
    elif spec.zone is not None:
        problems.append(
            Problem("zone", f"only allowed with flavor RDMA or RDMA-A4X (flavor is {spec.flavor})")
        )
    return problems


class GpuDirectNetworks(GkeGpuComponent[_GpuDirectNetworksSpec]):
    """The VPCs and subnets a GPUDirect flavour's extra NICs attach to, with firewall rules that let
    the nodes of the cluster reach each other on them and nothing else.

    * TCPX: 4 gVNIC VPCs, one subnet each, MTU 8244; TCPXO: 8 of them.
    * RDMA: 1 gVNIC VPC with one subnet and 1 RoCE VPC (network profile `<zone>-vpc-roce`) with 8
      subnets, MTU 8896. A RoCE VPC only takes the MRDMA NICs of A3 Ultra, A4 and A4X in its zone.
    * RDMA-A4X: the same with 4 RoCE subnets (`<prefix>-a4x-gvnic-1`, `<prefix>-a4x-rdma`).

    No Cloud NAT and no routes: the NICs carry GPU traffic between nodes only. The gVNIC subnets have
    Private Google Access and sampled flow logs, as the cluster's own subnet. Firewall rules allow
    TCP, UDP and ICMP from the VPC's own subnet; none are declared on the RoCE VPC (RDMA traffic does
    not pass the VPC firewall; UNVERIFIED whether rules there have any effect).

    Hazard: a subnet's range and a node pool's NICs are fixed at creation. Changing `cidr`, the flavour
    or the prefix replaces the subnets, which GCP refuses while a pool uses them: delete the GPUDirect
    pools first.
    """

    node_networks: pulumi.Output[list[NodeNetwork]]
    """Per extra NIC, in NIC order, its VPC and subnet names: GpuNodePool's `additional_node_networks`."""
    subnet_ranges: pulumi.Output[list[str]]
    """Per extra NIC, its subnet's range."""

    _args_model = _GpuDirectNetworksSpec
    _args_rules = staticmethod(_rules)
    _args_type = GpuDirectNetworksArgs

    def __init__(
        self,
        name: str,
        /,
        args: GpuDirectNetworksArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        child = pulumi.ResourceOptions(parent=self)
        project = spec.project
        region = spec.region
        flavor = FLAVORS[GpuDirectFlavor(spec.flavor)]
        prefix = spec.name_prefix

        vpcs: dict[str, compute.Network] = {}
        for suffix in flavor.vpc_suffixes:
            roce = flavor.is_roce_vpc(suffix)
            vpcs[suffix] = compute.Network(
                f"{name}-{suffix}",
                name=f"{prefix}-{suffix}",
                project=project,
                auto_create_subnetworks=False,
                routing_mode="REGIONAL",
                mtu=flavor.mtu,
                network_profile=(
                    pulumi.Output.from_input(project).apply(
                        lambda p: ROCE_PROFILE.format(project=p, zone=spec.zone, profile=flavor.roce_profile)
                    )
                    if roce
                    else None
                ),
                description=f"GPUDirect-{flavor.flavor} {'RoCE ' if roce else ''}NICs of {prefix}",
                opts=child,
            )
        subnets: dict[str, compute.Subnetwork] = {}
        ranges: list[str] = []
        for nic in flavor.created_subnets:
            ranges.append(subnet_range(spec.cidr, nic))
            roce = nic.device_mode == "RDMA"
            subnets[nic.network_name] = compute.Subnetwork(
                f"{name}-{nic.subnet_suffix}",
                name=f"{prefix}-{nic.subnet_suffix}",
                project=project,
                region=region,
                network=vpcs[nic.vpc_suffix].id,
                ip_cidr_range=ranges[-1],
                # Like the cluster's own subnet; RoCE subnets carry only RDMA (UNVERIFIED whether
                # GCP takes either setting there, so neither is set).
                private_ip_google_access=None if roce else True,
                log_config=None if roce else flow_log_config(spec.flow_log_sampling),
                opts=child,
            )
        for suffix, vpc in vpcs.items():
            if flavor.is_roce_vpc(suffix):
                continue
            own = [
                r for nic, r in zip(flavor.created_subnets, ranges, strict=True) if nic.vpc_suffix == suffix
            ]
            compute.Firewall(
                f"{name}-{suffix}-internal",
                name=f"{prefix}-{suffix}-internal",
                project=project,
                network=vpc.id,
                direction="INGRESS",
                source_ranges=own,
                allows=[
                    compute.FirewallAllowArgs(protocol="tcp"),
                    compute.FirewallAllowArgs(protocol="udp"),
                    compute.FirewallAllowArgs(protocol="icmp"),
                ],
                description="GPU traffic between the cluster's GPUDirect nodes, from this VPC only",
                opts=child,
            )

        self.node_networks = pulumi.Output.all(
            *(
                pulumi.Output.all(
                    vpcs[nic.vpc_suffix].name,
                    vpcs[nic.vpc_suffix].name.apply(lambda vpc: ROCE_METAL_SUBNET.format(vpc=vpc))
                    if nic.provided_subnet
                    else subnets[nic.network_name].name,
                )
                for nic in flavor.nics
            )
        ).apply(lambda pairs: [{"network": n, "subnetwork": s} for n, s in pairs])
        self.subnet_ranges = pulumi.Output.from_input(ranges)
        self.register_outputs({"nodeNetworks": self.node_networks, "subnetRanges": self.subnet_ranges})
