"""The accelerator catalog: which NVIDIA GPUs GKE offers, on which machine types, in which zones.

The data lives in ``components/data/accelerators.yaml`` with its sources and capture date. This module
only loads it into typed, immutable objects and answers questions about it; it never reaches the
network. Zones and Autopilot offerings change: when the catalog and GCP disagree, GCP wins, and the
fix is a one-line edit to the YAML file (see its header for how to re-check with gcloud).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from .data import DATA_DIR, load_data

# An Accelerator's mappings that its entry leaves out: empty, and read-only like the record.
_NO_ENTRIES: Mapping[Any, Any] = MappingProxyType({})
CATALOG_PATH = DATA_DIR / "accelerators.yaml"
MACHINE_TYPES_PATH = DATA_DIR / "machine_types.yaml"

# N1 is the only general-purpose series that takes attached GPUs. Its predefined shapes are
# regular, so they are generated rather than listed: memory is 3.75 GB (standard), 6.5 GB (highmem)
# or 0.9 GB (highcpu) per vCPU.
_N1_MEMORY_PER_VCPU = {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9}
_N1_VCPUS = {
    "standard": (1, 2, 4, 8, 16, 32, 64, 96),
    "highmem": (2, 4, 8, 16, 32, 64, 96),
    "highcpu": (2, 4, 8, 16, 32, 64, 96),
}
_N1_PATTERN = re.compile(r"^n1-(standard|highmem|highcpu)-(\d+)$")
# N1 custom machine types (GCE: `custom-<vCPUs>-<MiB>` or `n1-custom-...`, `-ext` for extended memory):
# 1 or an even number of vCPUs up to 96, memory a multiple of 256 MiB, 0.9-6.5 GB per vCPU unless -ext.
_N1_CUSTOM_PATTERN = re.compile(r"^(?:n1-)?custom-(\d+)-(\d+)(-ext)?$")
_N1_CUSTOM_MEMORY_PER_VCPU_GB = (0.9, 6.5)


class MachineType(NamedTuple):
    """A GCE machine type able to carry GPUs of one accelerator type."""

    name: str
    gpus: int
    vcpus: int
    memory_gb: float
    # Local SSDs that come with the machine type (A2 Ultra, A3, A4): declared with exactly this count.
    bundled_local_ssds: int = 0
    # Optional Local SSD counts the machine type accepts (when none are bundled).
    local_ssd_counts: tuple[int, ...] = ()
    # Boot disk types, when the machine type differs from its series (a3-ultragpu-8g).
    boot_disk_types: tuple[str, ...] = ()
    # False where GKE does not offer the machine type through queued provisioning (DWS).
    queued_provisioning: bool = True
    # False where Compute Engine sells the machine type only as Spot, flex-start or reserved capacity;
    # `on_demand_confirmed` False where that is reported but not read in Compute Engine's docs.
    on_demand: bool = True
    on_demand_confirmed: bool = True

    @property
    def series(self) -> str:
        # `custom-4-16384` is an N1 custom machine type.
        return "n1" if self.name.startswith("custom-") else self.name.split("-", 1)[0]


class AttachLimit(NamedTuple):
    """For accelerators attached to N1 machines: the largest N1 shape a given GPU count allows."""

    max_vcpus: int
    max_memory_gb: float


class NvlinkDomain(NamedTuple):
    """An NVL72 rack's NVLink domain: the workload policy's accelerator topology and the VMs it holds."""

    accelerator_topology: str
    vms: int


class Accelerator(NamedTuple):
    name: str
    display_name: str
    memory_gb: int
    # Fixed-shape accelerators (L4, A100, H100, ...): the machine types that carry them.
    machine_types: Mapping[str, MachineType] = _NO_ENTRIES
    # Attachable accelerators (T4, V100, ...): GPU count -> the N1 shape limits for that count.
    attach_limits: Mapping[int, AttachLimit] = _NO_ENTRIES
    default_machine_types: Mapping[int, str] = _NO_ENTRIES
    # MIG partition size -> partitions per GPU. Empty when the GPU has no MIG.
    mig_partitions: Mapping[str, int] = _NO_ENTRIES
    # GPU counts a single Autopilot Pod may request; empty when Autopilot does not offer it.
    autopilot_counts: tuple[int, ...] = ()
    # Region -> zones that offer this accelerator (and its machine types).
    zones: Mapping[str, tuple[str, ...]] = _NO_ENTRIES
    # Free-form caveats shown to users (e.g. "1g/2g/4g only as Spot or flex-start").
    notes: tuple[str, ...] = ()
    # GPU count -> the first GKE version that offers it on Autopilot.
    autopilot_min_versions: Mapping[int, str] = _NO_ENTRIES
    # MPS clients one GPU serves (16 before Volta, 48 from Volta on).
    mps_max_clients: int = 48
    # Host CPU architecture of the machine types ("arm64" for A4X).
    arch: str = "amd64"
    # False where the machine types are not sold as Spot VMs.
    spot: bool = True
    # False where the machine types are not offered as DWS flex-start VMs.
    flex_start: bool = True
    n1_local_ssd_counts: tuple[int, ...] = ()
    # NVL72 racks (A4X, A4X Max): the NVLink domain a workload policy places the VMs in; None elsewhere.
    nvlink_domain: NvlinkDomain | None = None
    # The first GKE version with node pools of this GPU, where a source names one (A4X Max).
    gke_min_version: str | None = None
    # True where pools of the GPU get NUMA-aligned kubelet settings unless they say otherwise (G4).
    numa_aligned_default: bool = False
    # Machine types Compute Engine sells with a fraction of one GPU (name -> fraction), refused here.
    fractional_machine_types: Mapping[str, str] = _NO_ENTRIES
    # GPU memory as the device reports it to CUDA (vLLM's budget is a share of it), where measured or
    # logged, and the data file's source key for it; None elsewhere (the sold figure, memory_gb, stands in).
    device_memory_bytes: int | None = None
    device_memory_source: str = ""
    # Where the zones came from (a key of the data file's sources) and the date they were read there.
    zones_source: str = ""
    zones_read: str = ""

    @property
    def gpu_memory_bytes(self) -> int:
        """One GPU's memory as CUDA reports it where known, else the sold figure read as GB (1e9 bytes),
        which is off by a few percent either way (accelerators.yaml, deviceMemoryBytes)."""
        return self.device_memory_bytes or int(self.memory_gb * 1e9)

    @property
    def gpu_memory_basis(self) -> str:
        """How gpu_memory_bytes was found, for a message."""
        if self.device_memory_bytes is None:
            return f"{self.memory_gb} GB each as sold; the device's own figure is not known here"
        how = "measured" if self.device_memory_source == "DEV" else "as vLLM logs it (UNVERIFIED)"
        return f"{self.device_memory_bytes / 2**30:.2f} GiB each as the device reports it, {how}"

    @property
    def zone_data(self) -> str:
        """Where a zone answer comes from, for a message (the source is a key of the data file's list)."""
        return f"zone data: accelerators.yaml, source {self.zones_source}, read {self.zones_read}"

    @property
    def attachable(self) -> bool:
        return bool(self.attach_limits)

    @property
    def allowed_counts(self) -> tuple[int, ...]:
        if self.attachable:
            return tuple(sorted(self.attach_limits))
        return tuple(sorted({m.gpus for m in self.machine_types.values()}))

    @property
    def autopilot(self) -> bool:
        return bool(self.autopilot_counts)

    @property
    def machine_series(self) -> tuple[str, ...]:
        if self.attachable:
            return ("n1",)
        return tuple(sorted({m.series for m in self.machine_types.values()}))

    def machine_type(self, name: str) -> MachineType | None:
        """The machine type by name if it can carry this accelerator, else None."""
        if not self.attachable:
            return self.machine_types.get(name)
        custom = _N1_CUSTOM_PATTERN.match(name)
        if custom:
            return self._n1_custom(name, int(custom.group(1)), int(custom.group(2)), bool(custom.group(3)))
        match = _N1_PATTERN.match(name)
        if not match:
            return None
        family, vcpus = match.group(1), int(match.group(2))
        if vcpus not in _N1_VCPUS[family]:
            return None
        # An N1 machine type's GPU count is chosen by the user; 0 marks "not fixed".
        return MachineType(
            name=name,
            gpus=0,
            vcpus=vcpus,
            memory_gb=round(vcpus * _N1_MEMORY_PER_VCPU[family], 2),
            local_ssd_counts=self.n1_local_ssd_counts,
        )

    def _n1_custom(self, name: str, vcpus: int, memory_mib: int, extended: bool) -> MachineType | None:
        if not (vcpus == 1 or (vcpus % 2 == 0 and 2 <= vcpus <= 96)) or memory_mib % 256:
            return None
        low, high = _N1_CUSTOM_MEMORY_PER_VCPU_GB
        per_vcpu = memory_mib / 1024 / vcpus
        if per_vcpu < low or (per_vcpu > high and not extended):
            return None
        return MachineType(
            name=name,
            gpus=0,
            vcpus=vcpus,
            memory_gb=round(memory_mib / 1024, 2),
            local_ssd_counts=self.n1_local_ssd_counts,
        )

    def counts_for(self, machine: MachineType) -> tuple[int, ...]:
        """GPU counts this machine type takes."""
        if not self.attachable:
            return (machine.gpus,)
        return tuple(
            count
            for count, limit in sorted(self.attach_limits.items())
            if machine.vcpus <= limit.max_vcpus and machine.memory_gb <= limit.max_memory_gb
        )

    def machine_type_examples(self) -> list[str]:
        """Machine type names to show in an error message."""
        if self.attachable:
            return ["n1-standard-*", "n1-highmem-*", "n1-highcpu-*"]
        return sorted(self.machine_types, key=_natural_key)


class Series(NamedTuple):
    name: str
    boot_disk_types: tuple[str, ...]


class Catalog(NamedTuple):
    captured: str
    accelerators: dict[str, Accelerator]
    series: dict[str, Series]
    # Regions with zone data for at least one accelerator.
    regions: tuple[str, ...]
    # Every Compute Engine region (gcp:region must be one).
    gcp_regions: tuple[str, ...] = ()

    @property
    def gpu_series(self) -> frozenset[str]:
        """Machine series that carry GPUs by construction (G2, A2, A3, A4, A4X, G4)."""
        return frozenset(m.series for a in self.accelerators.values() for m in a.machine_types.values())

    def accelerator(self, name: str) -> Accelerator | None:
        return self.accelerators.get(name)

    def boot_disk_types(self, machine: MachineType) -> tuple[str, ...]:
        """Boot disk types the machine type takes; the first is the default."""
        if machine.boot_disk_types:
            return machine.boot_disk_types
        series = self.series.get(machine.series)
        return series.boot_disk_types if series else ()


def _natural_key(text: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _parse(raw: dict[str, Any]) -> Catalog:
    accelerators: dict[str, Accelerator] = {}
    regions: set[str] = set()
    for name, spec in raw["accelerators"].items():
        machine_types = {
            mt_name: MachineType(
                name=mt_name,
                gpus=int(mt["gpus"]),
                vcpus=int(mt["vcpus"]),
                memory_gb=float(mt["memoryGb"]),
                bundled_local_ssds=int(mt.get("bundledLocalSsds", 0)),
                local_ssd_counts=tuple(mt.get("localSsdCounts") or ()),
                boot_disk_types=tuple(mt.get("bootDiskTypes") or ()),
                queued_provisioning=bool(mt.get("queuedProvisioning", True)),
                on_demand=bool(mt.get("onDemand", True)),
                on_demand_confirmed=bool(mt.get("onDemandConfirmed", True)),
            )
            for mt_name, mt in (spec.get("machineTypes") or {}).items()
        }
        attach_limits = {
            int(count): AttachLimit(int(limit["maxVcpus"]), float(limit["maxMemoryGb"]))
            for count, limit in (spec.get("attachLimits") or {}).items()
        }
        zones = {region: tuple(z) for region, z in (spec.get("zones") or {}).items()}
        regions.update(zones)
        accelerators[name] = Accelerator(
            name=name,
            display_name=spec["displayName"],
            memory_gb=int(spec["memoryGb"]),
            machine_types=machine_types,
            attach_limits=attach_limits,
            default_machine_types={int(k): v for k, v in (spec.get("defaultMachineTypes") or {}).items()},
            mig_partitions=dict(spec.get("migPartitions") or {}),
            autopilot_counts=tuple(spec.get("autopilotCounts") or ()),
            zones=zones,
            notes=tuple(spec.get("notes") or ()),
            autopilot_min_versions={
                int(k): str(v) for k, v in (spec.get("autopilotMinVersions") or {}).items()
            },
            mps_max_clients=int(spec.get("mpsMaxClients", 48)),
            arch=str(spec.get("arch", "amd64")),
            spot=bool(spec.get("spot", True)),
            flex_start=bool(spec.get("flexStart", True)),
            n1_local_ssd_counts=tuple(raw.get("n1LocalSsdCounts") or ()) if attach_limits else (),
            nvlink_domain=(
                NvlinkDomain(
                    str(spec["nvlinkDomain"]["acceleratorTopology"]), int(spec["nvlinkDomain"]["vms"])
                )
                if spec.get("nvlinkDomain")
                else None
            ),
            numa_aligned_default=bool(spec.get("numaAlignedDefault", False)),
            gke_min_version=str(spec["gkeMinVersion"]) if spec.get("gkeMinVersion") else None,
            fractional_machine_types={
                str(k): str(v) for k, v in (spec.get("fractionalMachineTypes") or {}).items()
            },
            device_memory_bytes=int(spec["deviceMemoryBytes"]) if spec.get("deviceMemoryBytes") else None,
            device_memory_source=str(spec.get("deviceMemorySource", "")),
            zones_source=str((spec.get("source") or {}).get("zones", "")),
            zones_read=str((spec.get("source") or {}).get("read", "")),
        )
    series = {name: Series(name, tuple(spec["bootDiskTypes"])) for name, spec in raw["series"].items()}
    return Catalog(
        captured=str(raw["captured"]),
        accelerators=accelerators,
        series=series,
        regions=tuple(sorted(regions)),
        gcp_regions=tuple(sorted(raw.get("gcpRegions") or ())),
    )


@functools.cache
def load_catalog(path: Path = CATALOG_PATH) -> Catalog:
    """Load and cache the accelerator catalog shipped with the program."""
    return _parse(load_data(path))


class MachineSeries(NamedTuple):
    """A Compute Engine machine series (``data/machine_types.yaml``) and its predefined machine types."""

    name: str
    arch: str
    # Whole machine type names; None where the table does not list the series' shapes (any is accepted).
    shapes: frozenset[str] | None
    # Whether the series has custom machine types (<series>-custom-<vCPUs>-<memory MB>[-ext]).
    custom: bool

    def listed(self) -> list[str]:
        """The listed predefined machine types, in natural order (e2-standard-4 before e2-standard-16)."""
        return sorted(self.shapes or (), key=_natural_key)


class MachineTypes(NamedTuple):
    captured: str
    series: dict[str, MachineSeries]

    def names(self) -> list[str]:
        """Every listed predefined machine type, in natural order."""
        return [name for series in self.series.values() for name in series.listed()]


def _series_shapes(name: str, shapes: dict[str, Any] | None) -> frozenset[str] | None:
    if shapes is None:
        return None
    names: set[str] = set()
    for kind, values in shapes.items():
        if kind == "named":
            names.update(f"{name}-{value}" for value in values)
        elif kind.endswith("-lssd"):
            names.update(f"{name}-{kind.removesuffix('-lssd')}-{vcpus}-lssd" for vcpus in values)
        else:
            names.update(f"{name}-{kind}-{vcpus}" for vcpus in values)
    return frozenset(names)


@functools.cache
def load_machine_types(path: Path = MACHINE_TYPES_PATH) -> MachineTypes:
    """Load and cache the table of Compute Engine machine series shipped with the program."""
    raw = load_data(path)
    return MachineTypes(
        captured=str(raw["captured"]),
        series={
            name: MachineSeries(
                name=name,
                arch=str(spec.get("arch", "amd64")),
                shapes=_series_shapes(name, spec.get("shapes")),
                custom=bool(spec.get("custom", False)),
            )
            for name, spec in raw["series"].items()
        },
    )
