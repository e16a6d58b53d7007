"""G4's second network (a pool's `secondNetwork`): the VPC, subnet and firewall rule of one extra gVNIC
NIC per G4 node, and the GKENetworkParamSet and Network that name it in the cluster.

Source: GoogleCloudPlatform/cluster-toolkit @ 1047080375 (2026-06-25), examples/gke-g4/gke-g4.yaml
(module `gke-g4-net-1`: VPC `<deployment>-net-1`, subnet `<deployment>-sub-1`, firewall rule
`<deployment>-internal-1` allowing TCP, UDP and ICMP; the cluster's and the G4 pool's
`additional_networks`, nic_type GVNIC), modules/network/vpc (MTU 8896 by default),
modules/scheduler/gke-cluster (multi-networking and Dataplane V2 on with additional networks;
templates/gke-network-paramset.yaml.tftpl and network-object.yaml.tftpl: deviceMode NetDevice for a
gVNIC network, Network type Device) and modules/compute/gke-node-pool (one
`additional_node_network_configs` {network, subnetwork} per additional network).

What the NIC carries is not written in any source read (UNVERIFIED): the blueprint's NCCL test names
no Network, and neither do the Pods this program declares.
"""

from typing import Annotated, Any, NotRequired, TypedDict

import pulumi
from pulumi_gcp import compute
from pydantic import Field

from ..core.arg_types import ProjectId, RegionName, matching
from ..core.common import K8S_NAME, Problems
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.k8s import app_labels
from ..core.model import Cidr
from ..core.nodes import NodeNetwork
from ..core.validation import ArgsModel, Deferrable
from ..network.vpc import flow_log_config
from .flavors import DEFAULT_GPUDIRECT_CIDR, FLAVORS, G4_NIC, check_gpudirect_cidr, subnet_range

# cluster-toolkit modules/network/vpc's default MTU, which the blueprint keeps.
G4_NETWORK_MTU = 8896
_FIREWALL_SUFFIX = f"-{G4_NIC.vpc_suffix}-internal"
MAX_PREFIX = 63 - len(_FIREWALL_SUFFIX)


class G4SecondNetworkArgs(TypedDict):
    """Where G4's second network goes, and the range its subnet is a slot of."""

    project: pulumi.Input[str]
    """The GCP project (the cluster's)."""
    region: pulumi.Input[str]
    """The cluster's region: the subnet is in it."""
    name_prefix: str
    """Prefix of the VPC, subnet and firewall names (the cluster's name): `<prefix>-g4-net-1`."""
    cidr: NotRequired[str]
    """The stack's GPUDirect range (GpuDirectNetworks' `cidr`, a /16 or larger): the subnet is its slot
    27, which no GPUDirect flavour uses. Defaults to 192.168.0.0/16 (subnet 192.168.216.0/21)."""
    cluster_ranges: NotRequired[list[str]]
    """The cluster's node, Pod and Service ranges, checked against `cidr`. Defaults to unchecked."""
    flow_log_sampling: NotRequired[float]
    """VPC flow logs on the subnet: the fraction of flows logged, 0 to 1; 0 turns them off. Defaults
    to 0.5."""


class _G4SecondNetworkSpec(ArgsModel):
    project: Deferrable[ProjectId]
    region: Deferrable[RegionName]
    name_prefix: matching(  # type: ignore[valid-type]
        K8S_NAME, "lowercase letters, digits and hyphens, starting with a letter", max_length=MAX_PREFIX
    )
    cidr: Cidr = DEFAULT_GPUDIRECT_CIDR
    cluster_ranges: Annotated[list[Cidr], Field(default_factory=list, max_length=8)]
    flow_log_sampling: Annotated[float, Field(ge=0, le=1)] = 0.5


def _rules(spec: _G4SecondNetworkSpec) -> list[str]:
    problems = Problems()
    ranges = [(f"cluster_ranges[{i}]", r) for i, r in enumerate(spec.cluster_ranges)]
    check_gpudirect_cidr(spec.cidr, ranges, "cidr", problems)
    return problems.items


class G4SecondNetwork(GkeGpuComponent[_G4SecondNetworkSpec]):
    """The second network of G4 nodes, as cluster-toolkit's G4 blueprint declares it: a VPC (MTU 8896)
    with one subnet, a firewall rule that lets the nodes reach each other on it (TCP, UDP, ICMP from the
    subnet), and in the cluster the GKENetworkParamSet and Network `g4-gvnic-1` (deviceMode
    NetDevice). The cluster needs multi-networking and Dataplane V2; give this component the cluster's
    Kubernetes provider (`providers={"kubernetes": ...}`).

    Hazard: a pool's node networks and a subnet's range are fixed at creation; changing the prefix or
    `cidr` replaces the subnet, which GCP refuses while a pool uses it.
    """

    node_networks: pulumi.Output[list[NodeNetwork]]
    """The one extra NIC's VPC and subnet names: GpuNodePool's `additional_node_networks`."""
    subnet_range: pulumi.Output[str]
    """The subnet's range."""
    network_name: pulumi.Output[str]
    """The Kubernetes Network's name (`g4-gvnic-1`)."""

    _args_model = _G4SecondNetworkSpec
    _args_rules = staticmethod(_rules)
    _args_type = G4SecondNetworkArgs

    def __init__(
        self,
        name: str,
        /,
        args: G4SecondNetworkArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        child = pulumi.ResourceOptions(parent=self)
        project = spec.project
        prefix = spec.name_prefix
        ip_range = subnet_range(spec.cidr, G4_NIC)
        vpc = compute.Network(
            f"{name}-vpc",
            name=f"{prefix}-{G4_NIC.vpc_suffix}",
            project=project,
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            mtu=G4_NETWORK_MTU,
            description=f"The second gVNIC NIC of {prefix}'s G4 nodes",
            opts=child,
        )
        subnet = compute.Subnetwork(
            f"{name}-subnet",
            name=f"{prefix}-{G4_NIC.subnet_suffix}",
            project=project,
            region=spec.region,
            network=vpc.id,
            ip_cidr_range=ip_range,
            private_ip_google_access=True,
            log_config=flow_log_config(spec.flow_log_sampling),
            opts=child,
        )
        # The blueprint allows its whole 192.168.0.0/16 (both of its VPCs' subnets); here the subnet
        # itself, the only range on this VPC.
        compute.Firewall(
            f"{name}-internal",
            name=f"{prefix}{_FIREWALL_SUFFIX}",
            project=project,
            network=vpc.id,
            direction="INGRESS",
            source_ranges=[ip_range],
            allows=[
                compute.FirewallAllowArgs(protocol="tcp"),
                compute.FirewallAllowArgs(protocol="udp"),
                compute.FirewallAllowArgs(protocol="icmp"),
            ],
            description="Traffic between the cluster's G4 nodes on their second NIC, from this VPC only",
            opts=child,
        )
        from .node_parts import device_network

        device_network(
            self,
            name,
            G4_NIC.network_name,
            {"vpc": vpc.name, "vpcSubnet": subnet.name, "deviceMode": G4_NIC.device_mode},
            app_labels("g4-second-network", component="network"),
        )
        self.node_networks = pulumi.Output.all(vpc.name, subnet.name).apply(
            lambda names: [{"network": names[0], "subnetwork": names[1]}]
        )
        self.subnet_range = pulumi.Output.from_input(ip_range)
        self.network_name = pulumi.Output.from_input(G4_NIC.network_name)
        self.register_outputs(
            {
                "nodeNetworks": self.node_networks,
                "subnetRange": self.subnet_range,
                "networkName": self.network_name,
            }
        )


def used_slots() -> set[int]:
    """The GPUDirect range's slots the flavours take (G4's must not be one of them)."""
    return {nic.slot for spec in FLAVORS.values() for nic in spec.nics if nic.slot is not None}
