"""One GPU pool, one type: what a stack file's `gpuPools` entry and `GpuNodePool`'s args describe.

`GpuPool` checks the shape of a pool (types, ranges, unknown keys). The stack file writes its keys in
camelCase (`gpusPerNode`); a component's args in snake_case (`gpus_per_node`): the same model reads
both (`model_validate(..., by_name=True, by_alias=False)` for args). The catalog rules
(gpu/rules.py) then return the same type with every default resolved: the machine type, the GPU
count, the zones, the disk type, the Local SSDs.
"""

from typing import Annotated, Any, TypeVar, cast

from pydantic import Field, PrivateAttr

from ..core.arg_types import enum_values
from ..core.common import (
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    MAX_BOOT_DISK_GB,
    MAX_NODES_PER_POOL,
    MAX_SHARED_CLIENTS,
)
from ..core.model import DISK_IMAGE, DURATION, LabelKey, LabelValue, MachineTypeName, StackModel, example
from ..gpudirect.flavors import DRANET_ONLY_FLAVORS, GpuDirectFlavor, GpuDirectNetworking, flavor_of
from .pool_args import CapacityStep, GpuDriverVersion, GpuSharingStrategy, ReservationType, TaintEffect

_SHARING_LABELS = {"TIME_SHARING": "time-sharing", "MPS": "mps"}
_RESERVATION_API_TYPES = {
    "NONE": "NO_RESERVATION",
    "ANY": "ANY_RESERVATION",
    "SPECIFIC": "SPECIFIC_RESERVATION",
}
_KUBERNETES_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
    "NO_EXECUTE": "NoExecute",
}


_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# A Local SSD disk: 375 GB (Compute Engine "About Local SSD disks"), in GiB rounded down.
LOCAL_SSD_GIB = 375 * 10**9 // 2**30


def duration_seconds(text: str) -> int:
    """A duration as written in a stack file ("90m", "24h", "7d", "3600s") in seconds."""
    return int(text[:-1]) * _UNIT_SECONDS[text[-1]]


class SharingConfig(StackModel):
    model_config = example(strategy="TIME_SHARING", maxClientsPerGpu=2)

    strategy: enum_values(GpuSharingStrategy)  # type: ignore[valid-type]
    max_clients_per_gpu: int = Field(ge=2, le=MAX_SHARED_CLIENTS)

    @property
    def label_value(self) -> str:
        """Value of the node label `cloud.google.com/gke-gpu-sharing-strategy`."""
        return _SHARING_LABELS[self.strategy]


class ReservationConfig(StackModel):
    model_config = example(type="SPECIFIC", name="my-reservation")

    type: enum_values(ReservationType) = "NONE"  # type: ignore[valid-type]
    name: Annotated[str, Field(min_length=1, max_length=300)] | None = None

    @property
    def api_type(self) -> str:
        return _RESERVATION_API_TYPES[self.type]

    @property
    def block(self) -> str | None:
        """The reservation block the name targets (`<name>/reservationBlocks/<block>`), or None."""
        if self.type != "SPECIFIC" or not self.name or "/reservationBlocks/" not in self.name:
            return None
        return self.name.rsplit("/reservationBlocks/", 1)[1]


class TaintConfig(StackModel):
    model_config = example(key="dedicated", value="gpu", effect="NO_SCHEDULE")

    key: LabelKey
    value: LabelValue = ""
    effect: enum_values(TaintEffect) = "NO_SCHEDULE"  # type: ignore[valid-type]

    @property
    def kubernetes_effect(self) -> str:
        return _KUBERNETES_EFFECTS[self.effect]


# GKE's mode for a secondary boot disk that caches container images (the API's only other value,
# MODE_UNSPECIFIED, attaches it as a plain data disk). Always set: gcloud defaults to it, the API
# does not.
CONTAINER_IMAGE_CACHE = "CONTAINER_IMAGE_CACHE"


class ImageCacheConfig(StackModel):
    """Container images preloaded on every node from a secondary boot disk (GKE's CONTAINER_IMAGE_CACHE
    mode): a Compute Engine image built with gke-disk-image-builder. containerd reads an image's layers
    from it instead of pulling them; what is not on it is pulled (or streamed) as usual."""

    model_config = example(diskImage="projects/my-project/global/images/gpu-images")

    disk_image: Annotated[str, Field(max_length=200, pattern=DISK_IMAGE)]

    @property
    def project(self) -> str:
        """The project that holds the image (projects/<project>/global/images/<name>)."""
        return self.disk_image.split("/")[1]

    @property
    def image_name(self) -> str:
        return self.disk_image.rsplit("/", 1)[1]


GPU_TAINT = TaintConfig(key=GPU_TAINT_KEY, value=GPU_TAINT_VALUE, effect="NO_SCHEDULE")


PoolT = TypeVar("PoolT", bound="GpuPool")


class GpuPool(StackModel):
    """A GPU node pool (Standard) or GPU profile (Autopilot). After the catalog rules, every default
    is resolved (machine type, GPU count, zones, disk type, Local SSDs, the on-demand fallback)."""

    model_config = example(name="l4", accelerator="nvidia-l4", gpusPerNode=1, maxNodes=2)

    name: Annotated[str, Field(max_length=100)]
    accelerator: Annotated[str, Field(max_length=100)]
    gpus_per_node: int | None = Field(None, ge=1, le=16)
    machine_type: MachineTypeName | None = None
    spot: bool = False
    on_demand_fallback: bool | None = None
    min_nodes: int = Field(0, ge=0, le=MAX_NODES_PER_POOL)
    max_nodes: int | None = Field(None, ge=1, le=MAX_NODES_PER_POOL)
    zones: Annotated[list[Annotated[str, Field(max_length=40)]], Field(max_length=26)] | None = None
    driver_version: enum_values(GpuDriverVersion) = "DEFAULT"  # type: ignore[valid-type]
    sharing: SharingConfig | None = None
    mig_partition_size: Annotated[str, Field(max_length=40)] | None = None
    reservation: ReservationConfig = ReservationConfig.model_construct()
    queued_provisioning: bool = False
    # DWS flex-start VMs (capacity for at most 7 days, obtained when available); max_run_duration is
    # how long a node may run, as a duration such as "24h" or "7d" (GKE's default and limit: 7 days).
    flex_start: bool = False
    max_run_duration: Annotated[str, Field(max_length=20, pattern=DURATION)] | None = None
    compact_placement: bool = False
    # NVL72 racks (A4X, A4X Max): a Compute Engine workload policy (HIGH_THROUGHPUT, the machine's
    # accelerator topology 1x72) declared with the pool and attached as its placement policy; the pool
    # then holds at most one NVLink domain's VMs (gpu/rack_rules.py).
    workload_policy: bool = False
    # NUMA-aligned kubelet (CPU manager static, topology manager restricted, memory manager Static);
    # None: the GPU's default (on for G4), resolved by the pool rules.
    numa_aligned: bool | None = None
    # G4 only: a second gVNIC NIC on the stack's own VPC (gpudirect/g4_network.py), as cluster-toolkit's
    # G4 blueprint attaches it. Off by default: a pool's additionalNodeNetworkConfigs are ForceNew, so
    # turning it on (or defaulting it on) replaces the pool and its nodes.
    second_network: bool = False
    # Standard only: a custom ComputeClass (gpu/capacity_ladder.py) that tries each step in order, on
    # node pools GKE creates itself, instead of one node pool with one way to get capacity.
    capacity_ladder: list[enum_values(CapacityStep)] | None = Field(None, min_length=1, max_length=4)  # type: ignore[valid-type]
    # GPUDirect networking, in the machine type's own flavour (gpudirect/flavors.py): TCPX, TCPXO or RDMA.
    gpudirect: bool = False
    # Standard, GKE 1.34+: GPUs handed to Pods by NVIDIA's DRA driver (ResourceClaims) instead of GKE's
    # device plugin (dra/driver.py; the rules in gpu/dra_rules.py).
    dra_gpus: bool = False
    # With gpudirect: how its Pods reach the GPU NICs, multi-networking (the default) or GKE's DRANET.
    gpudirect_networking: enum_values(GpuDirectNetworking) | None = None  # type: ignore[valid-type]
    local_ssd_count: int | None = Field(None, ge=0, le=32)
    disk_size_gb: int = Field(200, ge=10, le=MAX_BOOT_DISK_GB)
    disk_type: Annotated[str, Field(max_length=40)] | None = None
    # One disk image per pool: gke-disk-image-builder puts any number of container images on one.
    image_cache: ImageCacheConfig | None = None
    labels: Annotated[dict[LabelKey, LabelValue], Field(max_length=64)] = {}
    taints: Annotated[list[TaintConfig], Field(max_length=32)] = []

    # Set by the catalog rules: MIG instances per GPU (1 without MIG).
    _mig_partitions_per_gpu: int = PrivateAttr(default=1)

    @property
    def mig_partitions_per_gpu(self) -> int:
        return self._mig_partitions_per_gpu

    def as_spec(self, spec_type: type[PoolT], **placement: Any) -> PoolT:
        """This pool, already checked and resolved by the pool rules, as a component's args model
        (a subclass that adds where the pool goes), without checking it again: every field as it is,
        the placement values as given (Outputs included), and what the rules set beside the fields."""
        # cast: pydantic's mypy plugin types model_construct as returning GpuPool, not spec_type.
        spec = cast(
            PoolT,
            spec_type.model_construct(
                _fields_set=self.model_fields_set | set(placement), **dict(self), **placement
            ),
        )
        spec._mig_partitions_per_gpu = self._mig_partitions_per_gpu
        return spec

    @property
    def gpudirect_flavor(self) -> GpuDirectFlavor | None:
        """The pool's GPUDirect flavour (its machine type's NICs), None without `gpudirect`."""
        return flavor_of(self.machine_type) if self.gpudirect else None

    @property
    def dranet(self) -> bool:
        """True for a GPUDirect pool whose Pods reach the GPU NICs through GKE's managed DRANET: asked
        for, or by default where DRANET is the only way (A4X Max)."""
        if not self.gpudirect:
            return False
        if self.gpudirect_networking is None:
            return self.gpudirect_flavor in DRANET_ONLY_FLAVORS
        return self.gpudirect_networking == GpuDirectNetworking.DRANET

    @property
    def multi_network(self) -> bool:
        """True for a GPUDirect pool on multi-networking: the stack's VPCs, Networks, annotations."""
        return self.gpudirect and not self.dranet

    @property
    def stack_networks(self) -> bool:
        """True for a GPUDirect pool whose nodes attach VPCs this program creates (additional node
        networks): every multi-networking pool, and DRANET pools of flavours GKE's accelerator
        network profile does not serve (A4X Max)."""
        flavor = self.gpudirect_flavor
        if flavor is None:
            return False
        return self.multi_network or (self.dranet and flavor in DRANET_ONLY_FLAVORS)

    @property
    def max_run_seconds(self) -> int | None:
        """max_run_duration in seconds (the form GKE takes: "<n>s")."""
        return duration_seconds(self.max_run_duration) if self.max_run_duration else None

    @property
    def node_ephemeral_storage_gib(self) -> int:
        """The ephemeral storage (emptyDir, image layers, logs) of one node, in GiB: its Local SSDs where
        the pool puts ephemeral storage on them (GKE "About Local SSD for GKE",
        --ephemeral-storage-local-ssd; the machine's bundled SSDs on A3, A4), else its boot disk."""
        if self.local_ssd_count:
            return self.local_ssd_count * LOCAL_SSD_GIB
        return self.disk_size_gb

    @property
    def dra_node_labels(self) -> dict[str, str]:
        """The node labels GKE's "Prepare GKE infrastructure for DRA workloads" puts on a DRA-GPU pool:
        GKE's device plugin off, and the label the DRA driver's kubelet plugin selects by default."""
        if not self.dra_gpus:
            return {}
        return {"gke-no-default-nvidia-gpu-device-plugin": "true", "nvidia.com/gpu.present": "true"}

    @property
    def all_taints(self) -> tuple[TaintConfig, ...]:
        """The GPU taint the program always declares, then the pool's own."""
        return (GPU_TAINT, *self.taints)

    @property
    def schedulable_gpus_per_node(self) -> int:
        """`nvidia.com/gpu` a node advertises: GPUs x MIG partitions x sharing clients."""
        clients = self.sharing.max_clients_per_gpu if self.sharing else 1
        return (self.gpus_per_node or 0) * self.mig_partitions_per_gpu * clients
