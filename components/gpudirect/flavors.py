"""GPUDirect flavours: which machine types have GPU-to-GPU NICs, and the networks each flavour needs.

Sources: ../shared/reference/gke-gpu-scale-out.md section 1a (NIC layouts: Google's GPU network
bandwidth page, cluster-toolkit's blueprints) and 2a/2b (GKENetworkParamSet, Network and the Pod
annotations: GoogleCloudPlatform/gke-networking-api). One table, used by the pool rules, the VPCs
(GpuDirectNetworks), the in-cluster objects (GpuDirectSoftware), the node pool and the workloads.

Every flavour's extra networks get fixed slots of the stack's GPUDirect range (32 equal slots), so
adding a second flavour later never renumbers the subnets of the first (a subnet's range is
ForceNew, and a pool's additional networks are too).
"""

import ipaddress
from enum import StrEnum
from typing import Any, NamedTuple

from ..core.common import Problems, cut


class GpuDirectFlavor(StrEnum):
    """How a machine type's GPUs talk to other nodes' GPUs."""

    TCPX = "TCPX"
    """GPUDirect-TCPX (A3 High, A3 Edge): 4 extra gVNIC NICs."""
    TCPXO = "TCPXO"
    """GPUDirect-TCPXO (A3 Mega): 8 extra gVNIC NICs."""
    RDMA = "RDMA"
    """GPUDirect-RDMA over RoCE (A3 Ultra, A4): 1 extra gVNIC NIC and 8 MRDMA NICs."""
    RDMA_A4X = "RDMA-A4X"
    """GPUDirect-RDMA over RoCE on A4X (GB200, Arm hosts): 1 extra gVNIC NIC and 4 MRDMA NICs, and
    the gIB plugin's arm64 build."""
    RDMA_A4X_MAX = "RDMA-A4X-Max"
    """GPUDirect-RDMA over RoCE on A4X Max (GB300, Arm bare metal): 1 extra IDPF NIC and 8 MRDMA NICs
    (4 ConnectX-8) on a RoCE VPC of the bare-metal profile `<zone>-vpc-roce-metal`, claimed through
    DRANET only."""


class GpuDirectNetworking(StrEnum):
    """How a GPUDirect pool's Pods reach its GPU NICs (a pool's `gpudirectNetworking`)."""

    MULTI_NETWORK = "multiNetwork"
    """GKE multi-networking: VPCs and subnets this program creates, a GKENetworkParamSet and Network
    per NIC, and the `networking.gke.io/interfaces` annotation on each Pod."""
    DRANET = "dranet"
    """GKE managed DRANET: the pool's accelerator network profile `auto` (GKE creates the VPCs), and a
    ResourceClaim per Pod on the DeviceClass `mrdma.google.com` (GKE 1.34.1-gke.1829001+)."""


class ExtraNic(NamedTuple):
    """One extra NIC of a GPUDirect node: its VPC, its subnet, and the Kubernetes Network Pods use."""

    # The Kubernetes Network (and GKENetworkParamSet) name, unique per cluster across flavours.
    network_name: str
    # The VPC this NIC's subnet is in, as a suffix of `<prefix>-`: the 8 RDMA NICs share one RoCE VPC.
    vpc_suffix: str
    # The subnet's name suffix (`<prefix>-<subnet_suffix>`).
    subnet_suffix: str
    # The interface the NIC appears as inside the Pod (eth0 is the primary network).
    interface: str
    # GKENetworkParamSet.spec.deviceMode: NetDevice for gVNIC, RDMA for MRDMA NICs.
    device_mode: str
    # Slot of the stack's GPUDirect range this subnet takes (0..31); None where the network profile
    # provides the subnet itself (`provided_subnet`).
    slot: int | None
    # The bare-metal RoCE profile (`<zone>-vpc-roce-metal`) creates the VPC's one subnet itself, named
    # `default-subnet-1-<vpc name>`, and every MRDMA NIC attaches to it (Google's "Create an
    # AI-optimized MIG with A4X Max"; cluster-toolkit modules/network/gpu-rdma-vpc `is_roce_metal`).
    provided_subnet: bool = False


class FlavorSpec(NamedTuple):
    flavor: GpuDirectFlavor
    nics: tuple[ExtraNic, ...]
    # MTU of the flavour's VPCs (cluster-toolkit: 8244 for TCPX/TCPXO, 8896 for its RDMA VPCs).
    mtu: int
    # The accelerator values of the nodes its NCCL plugin installer selects.
    accelerators: tuple[str, ...]
    # The nodes' CPU architecture (`kubernetes.io/arch`): the installer's image must be built for it.
    arch: str = "amd64"
    # The RoCE VPC's network profile, after `<zone>-` (`vpc-roce` for VMs, `vpc-roce-metal` for bare
    # metal).
    roce_profile: str = "vpc-roce"
    # Pods reach the RDMA NICs only through DRANET (no multi-networking), while the node pool still
    # attaches the VPCs this program creates as additional node networks (GKE's accelerator network
    # profile `auto` is not used). A4X Max, as cluster-toolkit's examples/gke-a4x-max-bm wires it.
    dranet_on_stack_networks: bool = False

    @property
    def vpc_suffixes(self) -> tuple[str, ...]:
        """The flavour's VPCs, each once, in NIC order."""
        return tuple(dict.fromkeys(nic.vpc_suffix for nic in self.nics))

    @property
    def roce(self) -> bool:
        """True when the flavour has MRDMA NICs, in a zonal RoCE VPC."""
        return any(nic.device_mode == "RDMA" for nic in self.nics)

    def is_roce_vpc(self, vpc_suffix: str) -> bool:
        """True for the VPC of the flavour's MRDMA NICs (network profile `<zone>-<roce_profile>`)."""
        return any(nic.vpc_suffix == vpc_suffix and nic.device_mode == "RDMA" for nic in self.nics)

    @property
    def created_subnets(self) -> tuple[ExtraNic, ...]:
        """The NICs whose subnet this program creates (each once: a provided subnet is GCP's)."""
        return tuple(nic for nic in self.nics if not nic.provided_subnet)


def _gvnic_nics(prefix: str, count: int, first_slot: int) -> tuple[ExtraNic, ...]:
    return tuple(
        ExtraNic(
            network_name=f"{prefix}-{i}",
            vpc_suffix=f"{prefix}-{i}",
            subnet_suffix=f"{prefix}-{i}",
            interface=f"eth{i}",
            device_mode="NetDevice",
            slot=first_slot + i - 1,
        )
        for i in range(1, count + 1)
    )


# The RoCE VPC's name suffix: its network profile is `<zone>-vpc-roce`, so it is zonal.
ROCE_VPC_SUFFIX = "rdma"
# A4X's: its own VPCs, so a stack with A4 and A4X pools (both in the profile's zone) keeps both.
A4X_ROCE_VPC_SUFFIX = "a4x-rdma"
# A4X Max's RoCE VPC (profile `<zone>-vpc-roce-metal`) and the subnet GCP creates in it.
A4X_MAX_ROCE_VPC_SUFFIX = "a4xmax-rdma"
ROCE_METAL_SUBNET = "default-subnet-1-{vpc}"

FLAVORS: dict[GpuDirectFlavor, FlavorSpec] = {
    GpuDirectFlavor.TCPX: FlavorSpec(
        GpuDirectFlavor.TCPX, _gvnic_nics("tcpx", 4, 0), 8244, ("nvidia-h100-80gb",)
    ),
    GpuDirectFlavor.TCPXO: FlavorSpec(
        GpuDirectFlavor.TCPXO, _gvnic_nics("tcpxo", 8, 4), 8244, ("nvidia-h100-mega-80gb",)
    ),
    GpuDirectFlavor.RDMA: FlavorSpec(
        GpuDirectFlavor.RDMA,
        (
            ExtraNic("gvnic-1", "gvnic-1", "gvnic-1", "eth1", "NetDevice", 12),
            *(
                ExtraNic(f"rdma-{i}", ROCE_VPC_SUFFIX, f"rdma-{i}", f"eth{i + 2}", "RDMA", 13 + i)
                for i in range(8)
            ),
        ),
        8896,
        ("nvidia-h200-141gb", "nvidia-b200"),
    ),
    # A4X (cluster-toolkit examples/gke-a4x/gke-a4x.yaml before its DRANET rewrite, @0f9034dc9: one
    # gVNIC VPC and a RoCE VPC `<zone>-vpc-roce` with 4 subnets; container-engine-accelerators
    # gpudirect-rdma/nccl-test-imex-a4x.yaml: eth2..eth5 on rdma-0..rdma-3). Its Networks carry an
    # `a4x-` prefix: Network names are cluster-wide and RDMA's `gvnic-1`, `rdma-0..` are taken.
    GpuDirectFlavor.RDMA_A4X: FlavorSpec(
        GpuDirectFlavor.RDMA_A4X,
        (
            ExtraNic("a4x-gvnic-1", "a4x-gvnic-1", "a4x-gvnic-1", "eth1", "NetDevice", 21),
            *(
                ExtraNic(f"a4x-rdma-{i}", A4X_ROCE_VPC_SUFFIX, f"a4x-rdma-{i}", f"eth{i + 2}", "RDMA", 22 + i)
                for i in range(4)
            ),
        ),
        8896,
        ("nvidia-gb200",),
        arch="arm64",
    ),
    # A4X Max (cluster-toolkit examples/gke-a4x-max-bm @1047080375, 2026-06-25: a VPC with one IPv4
    # subnet for the IDPF NIC, a RoCE VPC with network profile `<zone>-vpc-roce-metal` whose provided
    # subnet all 8 MRDMA NICs attach to, MTU 8896; Google's "Create an AI-optimized MIG with A4X Max":
    # 4 CX-8 NICs as 8 MRDMA interfaces on `default-subnet-1-<network>`, MTU 8896 recommended). No
    # Kubernetes Network objects: DRANET hands the NICs to Pods. Interfaces: UNVERIFIED (DRANET names
    # them), kept for the NIC order only.
    GpuDirectFlavor.RDMA_A4X_MAX: FlavorSpec(
        GpuDirectFlavor.RDMA_A4X_MAX,
        (
            ExtraNic("a4xmax-idpf-1", "a4xmax-idpf", "a4xmax-idpf", "eth1", "NetDevice", 26),
            *(
                ExtraNic(
                    f"a4xmax-rdma-{i}",
                    A4X_MAX_ROCE_VPC_SUFFIX,
                    A4X_MAX_ROCE_VPC_SUFFIX,
                    f"eth{i + 2}",
                    "RDMA",
                    None,
                    provided_subnet=True,
                )
                for i in range(8)
            ),
        ),
        8896,
        ("nvidia-gb300",),
        arch="arm64",
        roce_profile="vpc-roce-metal",
        dranet_on_stack_networks=True,
    ),
}

# Machine type -> flavour. Only 8-GPU A3/A4 shapes have GPU NICs: a3-highgpu-1g/2g/4g have a single
# physical NIC, and L4, A100, T4, V100, P4, P100 and RTX PRO 6000 machines have none.
MACHINE_FLAVORS: dict[str, GpuDirectFlavor] = {
    "a3-highgpu-8g": GpuDirectFlavor.TCPX,
    "a3-edgegpu-8g": GpuDirectFlavor.TCPX,
    "a3-megagpu-8g": GpuDirectFlavor.TCPXO,
    "a3-ultragpu-8g": GpuDirectFlavor.RDMA,
    "a4-highgpu-8g": GpuDirectFlavor.RDMA,
    "a4x-highgpu-4g": GpuDirectFlavor.RDMA_A4X,
    "a4x-maxgpu-4g-metal": GpuDirectFlavor.RDMA_A4X_MAX,
}
# Machine types with GPU NICs that this program does not wire, and why (the pool rules say so).
UNSUPPORTED_MACHINES: dict[str, str] = {}
# Not in Google's NIC table as clearly as A3 High (the reference marks its layout UNVERIFIED).
UNVERIFIED_MACHINES = frozenset({"a3-edgegpu-8g"})

# The default GPUDirect range (cluster-toolkit's global_ip_address_range for A3 Mega) and its slots.
DEFAULT_GPUDIRECT_CIDR = "192.168.0.0/16"
SLOTS = 32
# The largest prefix the range may have: a slot of a /16 is a /21 (2,046 node addresses).
MAX_GPUDIRECT_PREFIX = 16


# DRANET (gpudirectNetworking: dranet): GKE's managed DRANET, on the machines whose GPU NICs are
# MRDMA (DeviceClass mrdma.google.com). Sources: GKE "Allocate network resources by using GKE managed
# DRANET" (DeviceClasses mrdma.google.com and netdev.google.com installed from 1.34.1-gke.1829001;
# the networking-dra-driver DaemonSet runs on GPU/TPU nodes with DRANET enabled); cluster-toolkit
# v1.95.0 modules/compute/gke-node-pool (main.tf: accelerator_network_profile "auto", the node label,
# Dataplane V2 required; gpu_direct.tf: dranet_min_version; resource-claim-template.yaml.tftpl).
DRANET_FLAVORS = frozenset({GpuDirectFlavor.RDMA, GpuDirectFlavor.RDMA_A4X, GpuDirectFlavor.RDMA_A4X_MAX})
# Flavours whose Pods reach the GPU NICs through DRANET only (multi-networking is not offered there).
DRANET_ONLY_FLAVORS = frozenset(f for f, spec in FLAVORS.items() if spec.dranet_on_stack_networks)
DRANET_MIN_VERSION = "1.34.1-gke.1829001"
DRANET_NETWORK_PROFILE = "auto"
DRANET_NODE_LABEL = "cloud.google.com/gke-networking-dra-driver"
DRANET_DEVICE_CLASS = "mrdma.google.com"
# cluster-toolkit's name for the claim template, applied in the namespace of the Pods that use it.
DRANET_CLAIM_TEMPLATE = "default-rdma"
# The templates' one request, as cluster-toolkit names it.
DRANET_REQUEST = "req-mrdma"


def flavor_of(machine_type: str | None) -> GpuDirectFlavor | None:
    return MACHINE_FLAVORS.get(machine_type or "")


def max_name_suffix() -> int:
    """The longest `-<suffix>` the VPCs and subnets append to the stack's prefix."""
    return max(
        len(f"-{nic.subnet_suffix}")
        for spec in FLAVORS.values()
        for nic in spec.nics
        if not nic.provided_subnet
    )


def subnet_range(cidr: str, nic: ExtraNic) -> str:
    """The NIC's subnet: its slot of the GPUDirect range."""
    if nic.slot is None:
        raise ValueError(f"{nic.network_name}: its subnet is the network profile's, not a slot")
    network = ipaddress.ip_network(cidr)
    subnets = list(network.subnets(prefixlen_diff=5))
    return str(subnets[nic.slot])


def pod_interfaces(flavor: GpuDirectFlavor) -> list[dict[str, str]]:
    """The `networking.gke.io/interfaces` annotation's value (as a list): eth0 on the Pod network,
    then one interface per extra NIC on its Network."""
    return [
        {"interfaceName": "eth0", "network": "default"},
        *({"interfaceName": nic.interface, "network": nic.network_name} for nic in FLAVORS[flavor].nics),
    ]


def check_gpudirect_cidr(
    cidr: str, cluster_ranges: list[tuple[str, str]], key: str, problems: Problems
) -> None:
    """The GPUDirect range's own rules: an address of its network, at most a /16, private, and clear
    of the cluster's ranges (`(name, cidr)` pairs). The stack file and the component share them."""
    try:
        network = ipaddress.ip_network(cidr)
    except ValueError:
        problems.add(key, f"{cut(cidr)} is not a network address (host bits set?), e.g. 192.168.0.0/16")
        return
    if network.version != 4 or network.prefixlen > MAX_GPUDIRECT_PREFIX:
        problems.add(
            key,
            f"{network} is too small: the GPUDirect subnets take 32 equal slots of a /{MAX_GPUDIRECT_PREFIX} "
            "or larger IPv4 range (a /21 each, room for every node of a pool)",
        )
    if not network.is_private:
        problems.add(key, f"{network} is not a private range; use e.g. 192.168.0.0/16")
    for name, value in cluster_ranges:
        try:
            other = ipaddress.ip_network(value, strict=False)
        except ValueError:
            continue  # reported where it is written
        if network.overlaps(other):
            problems.add(
                key,
                f"{network} overlaps {name} {other}; a node's GPU NICs and its primary NIC must not share "
                "addresses",
            )


def counted_claim_template_spec(count: int) -> dict[str, Any]:
    """A ResourceClaimTemplate's `spec` for `count` MRDMA NICs (ExactCount): what Kueue admits, where
    `default-rdma`'s allocation mode `All` is refused by Kueue 0.19.2 (pkg/dra/claims.go:93-98) and the
    count is what Kueue charges as `networking.gke.io/mrdma-nic` (workloads/kueue_config.py)."""
    exactly = {"deviceClassName": DRANET_DEVICE_CLASS, "allocationMode": "ExactCount", "count": count}
    return {"spec": {"devices": {"requests": [{"name": DRANET_REQUEST, "exactly": exactly}]}}}


# The blueprint's Network is `gvnic-1`; RDMA's (A3 Ultra, A4) is too, and Network names are
# cluster-wide, so G4's carries a `g4-` prefix as A4X's does. Its subnet takes slot 27 of the stack's
# GPUDirect range (the flavours hold 0..26): the blueprint's own 192.168.64.0/18 would overlap TCPXO's
# and RDMA's slots of the default 192.168.0.0/16.
G4_NIC = ExtraNic("g4-gvnic-1", "g4-net-1", "g4-sub-1", "eth1", "NetDevice", 27)


def rdma_nic_count(flavor: GpuDirectFlavor) -> int:
    """The MRDMA NICs of a node of the flavour: what DRANET offers it as devices of `mrdma.google.com`
    (one device per NIC: UNVERIFIED on a node)."""
    return sum(1 for nic in FLAVORS[flavor].nics if nic.device_mode == "RDMA")
