"""The args of GpuNodePool and GpuComputeClass: what a program (in any Pulumi language) writes.

These TypedDicts are the package schema's inputs (the Pulumi analyzer reads them, with each field's
docstring as its description), so this module must not use `from __future__ import annotations`,
`Literal` or unions other than `X | None`. The shape checks are the pydantic models in gpu/pool.py
(the same ones a stack file's `gpuPools` entry goes through) and the catalog rules in
gpu/rules.py.
"""

from enum import StrEnum
from typing import NotRequired, TypedDict

import pulumi

from ..core.nodes import NodeNetwork


class GpuDriverVersion(StrEnum):
    """Which NVIDIA driver GKE installs on the nodes."""

    DEFAULT = "DEFAULT"
    """The default driver of the node's GKE version."""
    LATEST = "LATEST"
    """The latest driver available for the node's GKE version."""
    INSTALLATION_DISABLED = "INSTALLATION_DISABLED"
    """No driver: install one yourself (Standard only)."""


class GpuSharingStrategy(StrEnum):
    """How containers share one physical GPU."""

    TIME_SHARING = "TIME_SHARING"
    """Containers take turns on the whole GPU (no memory isolation)."""
    MPS = "MPS"
    """NVIDIA Multi-Process Service: concurrent kernels, memory limits per client (Standard only)."""


class ReservationType(StrEnum):
    """Which Compute Engine reservations the nodes consume."""

    NONE = "NONE"
    """None: on-demand (or Spot) capacity only."""
    ANY = "ANY"
    """Any matching reservation of the project, then on-demand."""
    SPECIFIC = "SPECIFIC"
    """Only the named reservation (it must exist in every zone of the pool)."""


class CapacityStep(StrEnum):
    """One rung of a capacity ladder: where a node comes from, tried in the ladder's order."""

    RESERVATION = "reservation"
    """The pool's reservation (`reservation`: SPECIFIC with a name, or ANY)."""
    ON_DEMAND = "onDemand"
    """On-demand VMs."""
    FLEX_START = "flexStart"
    """DWS flex-start VMs: on-demand capacity when available, for at most `max_run_duration`."""
    SPOT = "spot"
    """Spot VMs."""


class TaintEffect(StrEnum):
    """The effect of a node taint."""

    NO_SCHEDULE = "NO_SCHEDULE"
    """Pods without a toleration are not scheduled on the nodes."""
    PREFER_NO_SCHEDULE = "PREFER_NO_SCHEDULE"
    """The scheduler avoids the nodes for Pods without a toleration, but may use them."""
    NO_EXECUTE = "NO_EXECUTE"
    """Pods without a toleration are not scheduled, and running ones are evicted."""


class GpuSharing(TypedDict):
    """GPU sharing: several containers on one physical GPU."""

    strategy: GpuSharingStrategy
    """TIME_SHARING or MPS (MPS on Standard only)."""
    max_clients_per_gpu: int
    """Containers per physical GPU: 2 to 48 (MPS: at most 16 before Volta)."""


class GpuReservation(TypedDict):
    """The Compute Engine reservation the nodes consume."""

    type: ReservationType
    """NONE, ANY or SPECIFIC. Spot and queued provisioning need NONE."""
    name: NotRequired[str]
    """With SPECIFIC: `<name>`, `<name>/reservationBlocks/<block>`, or
    `projects/<project>/reservations/<name>` for a shared reservation."""


class NodeTaint(TypedDict):
    """A taint on every node of the pool, in addition to `nvidia.com/gpu=present:NoSchedule`."""

    key: str
    """The taint's key (a Kubernetes label key)."""
    value: NotRequired[str]
    """The taint's value. Defaults to empty."""
    effect: NotRequired[TaintEffect]
    """Defaults to NO_SCHEDULE."""


class GpuImageCache(TypedDict):
    """Container images preloaded on every node from a secondary boot disk."""

    disk_image: str
    """A Compute Engine image built with gke-disk-image-builder, as it prints it:
    `projects/<project>/global/images/<name>`. Each node gets a disk of the image's size and the boot
    disk's type; image streaming stays on. Changing it replaces the pool."""


class GpuNodePoolArgs(TypedDict):
    project: str
    """The GCP project of the cluster."""
    location: str
    """The cluster's location: its region (regional cluster) or zone (zonal cluster). The pool's zones
    are chosen in it."""
    cluster_name: pulumi.Input[str]
    """The GKE Standard cluster the pool belongs to."""
    accelerator: str
    """A GKE accelerator type, for example `nvidia-l4`, `nvidia-h100-80gb` or `nvidia-tesla-a100`."""
    gpus_per_node: int
    """GPUs per node: a count the machine type takes (for example 1, 2, 4 or 8 for nvidia-l4)."""
    max_nodes: int
    """The most nodes the pool autoscales to, over all its zones (it bounds the bill; it must fit your GPU
    quota)."""
    name: NotRequired[str]
    """The GKE node pool's name (at most 40 characters). Defaults to the resource name."""
    min_nodes: NotRequired[int]
    """Nodes kept when idle, over all zones. Defaults to 0: an idle pool costs nothing."""
    machine_type: NotRequired[str]
    """A machine type that carries the accelerator. Defaults to the catalog's machine for the GPU count
    (for example g2-standard-8 for one nvidia-l4)."""
    zones: NotRequired[list[str]]
    """Zones of the location for the nodes. Defaults to the zones that offer the accelerator (the
    cluster's zone for a zonal cluster)."""
    spot: NotRequired[bool]
    """Spot VMs: much cheaper, preemptible. Defaults to false."""
    driver_version: NotRequired[GpuDriverVersion]
    """The driver GKE installs. Defaults to DEFAULT."""
    sharing: NotRequired[GpuSharing]
    """Time-sharing or MPS. Defaults to none (one container per GPU)."""
    mig_partition_size: NotRequired[str]
    """A MIG profile of the accelerator, for example `1g.10gb` on nvidia-tesla-a100. Defaults to none."""
    reservation: NotRequired[GpuReservation]
    """The reservation the nodes consume. Defaults to type NONE."""
    queued_provisioning: NotRequired[bool]
    """Nodes only through ProvisioningRequests (Dynamic Workload Scheduler). Defaults to false."""
    flex_start: NotRequired[bool]
    """DWS flex-start VMs: on-demand capacity obtained when available, for at most 7 days a node; not
    with spot, queued_provisioning or a reservation. Needs GKE 1.32.2-gke.1652000. Defaults to false."""
    max_run_duration: NotRequired[str]
    """With flex_start: how long a node may run, e.g. `24h` or `7d` (at most 7d). Defaults to GKE's 7
    days."""
    compact_placement: NotRequired[bool]
    """A compact placement policy (needs exactly one zone). Defaults to false."""
    workload_policy: NotRequired[bool]
    """NVL72 racks (A4X `a4x-highgpu-4g`, A4X Max `a4x-maxgpu-4g-metal`): declare a Compute Engine
    workload policy (HIGH_THROUGHPUT, accelerator topology 1x72) and attach it to the pool, so its VMs
    share one NVLink domain. Required above one node on those machines; the pool then holds at most 18
    nodes in exactly one zone. Defaults to false."""
    numa_aligned: NotRequired[bool]
    """NUMA-aligned kubelet settings: CPU manager `static`, topology manager `restricted`, memory
    manager `Static` (Guaranteed Pods get CPUs, memory and GPUs of one NUMA node). Defaults to true on
    G4 (nvidia-rtx-pro-6000), false elsewhere."""
    second_network: NotRequired[bool]
    """G4 (nvidia-rtx-pro-6000) only, Standard, GKE 1.32.11-gke.1174000+: a second gVNIC NIC per node,
    on a VPC of its own, as cluster-toolkit's G4 blueprint attaches it; needs
    `additional_node_networks` (G4SecondNetwork's `node_networks`) and a cluster with multi-networking.
    What the NIC carries is UNVERIFIED. Turning it on for an existing pool replaces the pool (its node
    networks are fixed at creation). Defaults to false."""
    gpudirect: NotRequired[bool]
    """GPUDirect networking in the machine's own flavour: TCPX (a3-highgpu-8g, a3-edgegpu-8g), TCPXO
    (a3-megagpu-8g), RDMA (a3-ultragpu-8g, a4-highgpu-8g), RDMA-A4X (a4x-highgpu-4g) or RDMA-A4X-Max
    (a4x-maxgpu-4g-metal: DRANET only, 2 MiB huge pages). Needs exactly one zone and
    `additional_node_networks` (GpuDirectNetworks' `node_networks`). Defaults to false."""
    gpudirect_networking: NotRequired[str]
    """With gpudirect: how Pods reach the GPU NICs. 'multiNetwork': GKE multi-networking over
    `additional_node_networks`. 'dranet' (the default and only choice on A4X Max, whose pool still
    attaches `additional_node_networks`): GKE's managed DRANET (A3 Ultra, A4, A4X, A4X Max; GKE
    1.34.1-gke.1829001+): the accelerator network profile 'auto' (GKE creates the networks; no
    `additional_node_networks`) and the node label cloud.google.com/gke-networking-dra-driver=true;
    Pods claim the NICs through a ResourceClaimTemplate (DranetClaimTemplates). Changing it replaces
    the pool. Defaults to 'multiNetwork' ('dranet' on A4X Max)."""
    additional_node_networks: NotRequired[pulumi.Input[list[NodeNetwork]]]
    """With gpudirect: the extra NICs' VPCs and subnets, in NIC order (4 for TCPX, 8 for TCPXO, 9 for
    RDMA, 5 for RDMA-A4X, 9 for RDMA-A4X-Max). Changing them replaces the pool. Defaults to none."""
    dra_gpus: NotRequired[bool]
    """GPUs handed to Pods by NVIDIA's DRA driver (ResourceClaims of the DeviceClass gpu.nvidia.com)
    instead of GKE's device plugin: the nodes are labelled to turn the plugin off. Needs GKE 1.34,
    driver_version INSTALLATION_DISABLED (GKE installs no driver there: NvidiaDraDriver's
    driver_installer_pools does, or install it yourself), and an NvidiaDraDriver with gpus; not with
    sharing or MIG. Defaults to false."""
    local_ssd_count: NotRequired[int]
    """Local SSDs as ephemeral storage. Defaults to the machine's bundled SSDs, or none."""
    disk_size_gb: NotRequired[int]
    """Boot disk size in GB. Defaults to 200."""
    disk_type: NotRequired[str]
    """Boot disk type. Defaults to the machine's first supported type (pd-balanced or
    hyperdisk-balanced)."""
    image_cache: NotRequired[GpuImageCache]
    """Preload container images (for example a model server's) from a secondary boot disk, so a new
    node starts them without pulling. Needs GKE 1.30.1-gke.1329000. Defaults to none."""
    labels: NotRequired[dict[str, str]]
    """Kubernetes labels on every node (not under kubernetes.io, k8s.io or cloud.google.com)."""
    taints: NotRequired[list[NodeTaint]]
    """Taints on every node, after `nvidia.com/gpu=present:NoSchedule`, which is always declared."""
    node_service_account_email: NotRequired[pulumi.Input[str]]
    """The nodes' service account (GkeCluster's `node_service_account_email`). Defaults to the
    project's Compute Engine default service account, which has far more access than nodes need."""


class GpuComputeClassArgs(TypedDict):
    accelerator: str
    """A GKE accelerator offered on Autopilot, for example `nvidia-l4`."""
    gpus_per_node: int
    """GPUs per node: a count Autopilot offers for the accelerator."""
    name: NotRequired[str]
    """The profile's name; the ComputeClass is `gpu-<name>`. Defaults to the resource name."""
    region: NotRequired[str]
    """The cluster's region: checks that the accelerator is offered there. Defaults to unchecked."""
    driver_version: NotRequired[GpuDriverVersion]
    """DEFAULT or LATEST. Defaults to DEFAULT."""
    sharing: NotRequired[GpuSharing]
    """Time-sharing (MPS is Standard only). Defaults to none."""
    mig_partition_size: NotRequired[str]
    """A MIG profile of the accelerator. Defaults to none."""
