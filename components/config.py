"""Stack configuration: the one place that turns `Pulumi.<stack>.yaml` into typed, validated settings.

Two passes, both before any resource is declared:

1. *Shape* (pydantic): types, enums, ranges, required keys, and unknown keys (every model forbids
   extras, so a typo such as ``gpusPerNodes`` is an error, not a silently ignored key).
2. *Meaning* (this module, against the accelerator catalog): an accelerator GKE does not offer, a GPU
   count the machine type does not take, a zone without that GPU, MIG on a GPU without MIG, Spot with a
   reservation, overlapping CIDRs, Autopilot with Standard-only fields, and so on.

Every problem becomes one line naming the key, the bad value and what is allowed; all lines are raised
together as one :class:`ConfigError`. The result is a frozen :class:`Settings` in which every default
is resolved (machine type, zones, disk type, cluster name), so components never re-derive them.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin

import pulumi
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from components.catalog import Accelerator, Catalog, MachineType, load_catalog
from components.images import BLACKWELL_ACCELERATORS

NAMESPACE = "gke-gpu"
# Config keys of the gke-gpu namespace; anything else under `gke-gpu:` is an error.
TOP_LEVEL_KEYS = (
    "network",
    "cluster",
    "gpuPools",
    "monitoring",
    "workloads",
    "devicePlugin",
    "gpuNodes",
)

GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
MAX_SHARED_CLIENTS = 48  # GKE's documented upper bound for clients per physical GPU.
WORKLOAD_NAMES = ("nvidia-smi", "cuda-vector-add", "pytorch-smoke", "sharing-demo")

_K8S_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_REGION = re.compile(r"^[a-z]+-[a-z]+\d+$")
_ZONE = re.compile(r"^([a-z]+-[a-z]+\d+)-[a-z]$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_RESERVATION = re.compile(
    r"^(projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]*[a-z0-9])?$"
)
_CHANNEL = re.compile(r"^projects/[^/]+/notificationChannels/[^/]+$")
# RFC 1918, plus RFC 6598 shared space, which GKE supports for Pod and Service ranges.
_PRIVATE_RANGES = tuple(
    ipaddress.IPv4Network(r) for r in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)
# GKE's default of 110 Pods per Standard node takes a /24 of the Pod range per node.
_POD_RANGE_PREFIX_PER_NODE = 24
# Zones a regional cluster's node pools use when node_locations is left out.
_DEFAULT_REGIONAL_ZONES = 3


class ConfigError(pulumi.RunError):
    """Invalid stack configuration. Pulumi prints the message without a Python stack trace."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid stack configuration ({len(self.problems)} problem(s)):\n{lines}")


# --------------------------------------------------------------------------------------------------
# Pass 1: the shape of the stack file (camelCase keys, unknown keys forbidden).


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=False,
        extra="forbid",
        frozen=True,
        str_strip_whitespace=True,
    )


class ExistingNetworkConfig(_Model):
    network: str
    subnetwork: str
    pods_range_name: str
    services_range_name: str


class NetworkConfig(_Model):
    subnet_cidr: str = "10.10.0.0/20"
    pods_cidr: str = "10.16.0.0/14"
    services_cidr: str = "10.20.0.0/20"
    # VPC flow logs on the subnet, sampled: 0 turns them off.
    flow_log_sampling: float = Field(0.5, ge=0, le=1)
    existing: ExistingNetworkConfig | None = None


class AuthorizedNetworkConfig(_Model):
    cidr_block: str
    display_name: str = ""


class SystemPoolConfig(_Model):
    machine_type: str = "e2-standard-4"
    min_nodes: int = Field(1, ge=0)
    max_nodes: int = Field(3, ge=1)
    spot: bool = False
    disk_size_gb: int = Field(100, ge=10)


class ClusterConfig(_Model):
    mode: Literal["autopilot", "standard", "existing"]
    name: str | None = None
    location: str | None = None
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED"] = "REGULAR"
    private_nodes: bool = True
    master_authorized_networks: list[AuthorizedNetworkConfig] = []
    deletion_protection: bool = True
    system_pool: SystemPoolConfig | None = None
    # The control plane's IP endpoint is private unless publicEndpoint is true; the DNS-based
    # endpoint (IAM-authorised) is always on, so CI reaches the cluster without an IP allowlist.
    public_endpoint: bool = False
    # Explicitly allow a public IP endpoint with no allowlist or with 0.0.0.0/0.
    public_endpoint_open_to_internet: bool = False
    binary_authorization: bool = False
    # mode: existing
    kubeconfig: str | None = Field(None, repr=False)
    context: str | None = None
    flavor: Literal["gke", "generic"] | None = None


class SharingConfig(_Model):
    strategy: Literal["TIME_SHARING", "MPS"]
    max_clients_per_gpu: int = Field(ge=2, le=MAX_SHARED_CLIENTS)


class ReservationConfig(_Model):
    type: Literal["NONE", "ANY", "SPECIFIC"] = "NONE"
    name: str | None = None


class TaintConfig(_Model):
    key: str
    value: str = ""
    effect: Literal["NO_SCHEDULE", "PREFER_NO_SCHEDULE", "NO_EXECUTE"] = "NO_SCHEDULE"


class GpuPoolConfig(_Model):
    name: str
    accelerator: str
    gpus_per_node: int | None = Field(None, ge=1)
    machine_type: str | None = None
    spot: bool = False
    on_demand_fallback: bool | None = None
    min_nodes: int = Field(0, ge=0)
    max_nodes: int | None = Field(None, ge=1)
    zones: list[str] | None = None
    driver_version: Literal["DEFAULT", "LATEST", "INSTALLATION_DISABLED"] = "DEFAULT"
    sharing: SharingConfig | None = None
    mig_partition_size: str | None = None
    reservation: ReservationConfig = ReservationConfig()
    queued_provisioning: bool = False
    compact_placement: bool = False
    local_ssd_count: int | None = Field(None, ge=0)
    disk_size_gb: int = Field(200, ge=10, le=65536)
    disk_type: str | None = None
    labels: dict[str, str] = {}
    taints: list[TaintConfig] = []


class AlertsConfig(_Model):
    enabled: bool = False
    notification_channels: list[str] = []
    idle_gpu_minutes: int = Field(120, ge=5, le=1440)
    idle_gpu_utilization_percent: float = Field(5, ge=0, le=100)
    xid_errors: bool = True


class MonitoringConfig(_Model):
    # Defaults depend on the cluster: managed and a dashboard on GKE; the exporter and no Cloud
    # Monitoring dashboard on a generic cluster.
    dcgm: Literal["managed", "exporter", "none"] | None = None
    dashboard: bool | None = None
    alerts: AlertsConfig = AlertsConfig()
    scrape: Literal["podMonitoring", "serviceMonitor", "annotations"] | None = None
    # The namespace of the Prometheus that scrapes the exporter: the only one a NetworkPolicy lets
    # reach the metrics port (default gmp-system on GKE, monitoring on a generic cluster).
    scraper_namespace: str | None = None


class WorkloadConfig(_Model):
    name: Literal["nvidia-smi", "cuda-vector-add", "pytorch-smoke", "sharing-demo"]
    pool: str | None = None
    replicas: int | None = Field(None, ge=2, le=MAX_SHARED_CLIENTS)


class TimeSlicingConfig(_Model):
    replicas: int = Field(ge=2, le=MAX_SHARED_CLIENTS)


class DevicePluginSharingConfig(_Model):
    time_slicing: TimeSlicingConfig


class DevicePluginConfig(_Model):
    gpu_node_label: str = "nvidia.com/gpu.present=true"
    # Taint the nodes of gpuNodes with nvidia.com/gpu=present:NoSchedule (off for a single-node
    # workstation, whose only node must also run everything else).
    taint_gpu_nodes: bool = True
    # For containerd set up with an `nvidia` runtime class that is not the default runtime.
    runtime_class_name: str | None = None
    sharing: DevicePluginSharingConfig | None = None


class StackConfig(_Model):
    """All `gke-gpu:` keys of one stack file."""

    network: NetworkConfig | None = None
    cluster: ClusterConfig
    gpu_pools: list[GpuPoolConfig] = []
    monitoring: MonitoringConfig = MonitoringConfig()
    workloads: list[WorkloadConfig] = []
    device_plugin: DevicePluginConfig | None = None
    gpu_nodes: list[str] | None = None

    @field_validator("workloads", mode="before")
    @classmethod
    def _names_as_objects(cls, value: Any) -> Any:
        """`- nvidia-smi` is shorthand for `- {name: nvidia-smi}`."""
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value


# --------------------------------------------------------------------------------------------------
# The resolved settings handed to the components (every default filled in).


@dataclass(frozen=True)
class Sharing:
    strategy: Literal["TIME_SHARING", "MPS"]
    max_clients_per_gpu: int

    @property
    def label_value(self) -> str:
        """Value of the node label `cloud.google.com/gke-gpu-sharing-strategy`."""
        return {"TIME_SHARING": "time-sharing", "MPS": "mps"}[self.strategy]


@dataclass(frozen=True)
class Reservation:
    type: Literal["NONE", "ANY", "SPECIFIC"] = "NONE"
    name: str | None = None

    @property
    def api_type(self) -> str:
        return {
            "NONE": "NO_RESERVATION",
            "ANY": "ANY_RESERVATION",
            "SPECIFIC": "SPECIFIC_RESERVATION",
        }[self.type]


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: Literal["NO_SCHEDULE", "PREFER_NO_SCHEDULE", "NO_EXECUTE"]

    @property
    def kubernetes_effect(self) -> str:
        return {
            "NO_SCHEDULE": "NoSchedule",
            "PREFER_NO_SCHEDULE": "PreferNoSchedule",
            "NO_EXECUTE": "NoExecute",
        }[self.effect]


GPU_TAINT = Taint(GPU_TAINT_KEY, GPU_TAINT_VALUE, "NO_SCHEDULE")


@dataclass(frozen=True)
class GpuPool:
    """One GPU node pool (Standard) or GPU profile (Autopilot), every default resolved."""

    name: str
    accelerator: str
    gpus_per_node: int
    gpu_memory_gb: int
    spot: bool
    driver_version: Literal["DEFAULT", "LATEST", "INSTALLATION_DISABLED"]
    sharing: Sharing | None = None
    mig_partition_size: str | None = None
    # Standard only (None / empty on Autopilot).
    machine_type: str | None = None
    min_nodes: int = 0
    max_nodes: int | None = None
    zones: tuple[str, ...] = ()
    reservation: Reservation = Reservation()
    queued_provisioning: bool = False
    compact_placement: bool = False
    local_ssd_count: int = 0
    disk_size_gb: int = 200
    disk_type: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    # Autopilot only: Spot first, on-demand when Spot capacity is out (through a ComputeClass).
    on_demand_fallback: bool = False
    mig_partitions_per_gpu: int = 1

    @property
    def all_taints(self) -> tuple[Taint, ...]:
        """The GPU taint the program always declares, then the pool's own."""
        return (GPU_TAINT, *self.taints)

    @property
    def schedulable_gpus_per_node(self) -> int:
        """`nvidia.com/gpu` a node advertises: GPUs x MIG partitions x sharing clients."""
        clients = self.sharing.max_clients_per_gpu if self.sharing else 1
        return self.gpus_per_node * self.mig_partitions_per_gpu * clients


@dataclass(frozen=True)
class NetworkSettings:
    """Either CIDRs for a new VPC, or the names of an existing VPC, subnet and ranges."""

    subnet_cidr: str | None
    pods_cidr: str | None
    services_cidr: str | None
    existing: ExistingNetworkConfig | None = None
    # Fraction of flows logged on the new subnet (0: flow logs off; None for an existing network).
    flow_log_sampling: float | None = 0.5


@dataclass(frozen=True)
class SystemPool:
    machine_type: str
    min_nodes: int
    max_nodes: int
    spot: bool
    disk_size_gb: int


@dataclass(frozen=True)
class AuthorizedNetwork:
    cidr_block: str
    display_name: str


@dataclass(frozen=True)
class ClusterSettings:
    mode: Literal["autopilot", "standard", "existing"]
    name: str
    location: str
    release_channel: str = "REGULAR"
    private_nodes: bool = True
    authorized_networks: tuple[AuthorizedNetwork, ...] = ()
    deletion_protection: bool = True
    system_pool: SystemPool | None = None
    # False: the IP endpoint is private (reachable from the VPC); True: public, limited to
    # authorized_networks (or open to any address when the stack says so explicitly).
    public_endpoint: bool = False
    binary_authorization: bool = False
    # mode: existing
    kubeconfig: str | None = field(default=None, repr=False)
    context: str | None = None
    flavor: Literal["gke", "generic"] | None = None

    @property
    def autopilot(self) -> bool:
        return self.mode == "autopilot"

    @property
    def on_gke(self) -> bool:
        """True when the GPU nodes are GKE nodes (drivers, labels and device plugin from GKE)."""
        return self.mode != "existing" or self.flavor == "gke"


@dataclass(frozen=True)
class AlertSettings:
    notification_channels: tuple[str, ...]
    idle_gpu_minutes: int
    idle_gpu_utilization_percent: float
    xid_errors: bool


@dataclass(frozen=True)
class MonitoringSettings:
    dcgm: Literal["managed", "exporter", "none"]
    dashboard: bool
    alerts: AlertSettings | None
    scrape: Literal["podMonitoring", "serviceMonitor", "annotations"] | None
    # Set with dcgm exporter: the namespace allowed to reach the exporter's metrics port.
    scraper_namespace: str | None = None


@dataclass(frozen=True)
class Workload:
    name: str
    pool: str | None
    replicas: int | None = None


@dataclass(frozen=True)
class DevicePluginSettings:
    node_label_key: str
    node_label_value: str
    time_slicing_replicas: int | None
    taint_gpu_nodes: bool = True
    runtime_class_name: str | None = None


@dataclass(frozen=True)
class Settings:
    project: str | None
    region: str | None
    stack: str
    cluster: ClusterSettings
    network: NetworkSettings | None
    gpu_pools: tuple[GpuPool, ...]
    monitoring: MonitoringSettings
    workloads: tuple[Workload, ...]
    device_plugin: DevicePluginSettings | None = None
    gpu_nodes: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------------
# Pass 1 error formatting.


def _format_path(loc: Iterable[Any]) -> str:
    parts = list(loc)
    text = f"{NAMESPACE}:{parts[0]}" if parts else NAMESPACE
    for part in parts[1:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def _model_at(model: type[BaseModel], loc: Sequence[Any]) -> type[BaseModel] | None:
    """The pydantic model class found by walking `loc` (aliases and list indexes) from `model`."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        match = next(
            (f for f in current.model_fields.values() if f.alias == part),
            None,
        )
        if match is None:
            return None
        current = _unwrap(match.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """list[X] -> X, X | None -> X (the model class behind a field annotation)."""
    while True:
        args = [a for a in get_args(annotation) if a is not type(None)]
        origin = get_origin(annotation)
        if (origin in (list, tuple) and args) or (origin is not None and len(args) == 1):
            annotation = args[0]
        elif origin is None or not args:
            return annotation
        else:
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            return models[0] if models else annotation


def _describe_pydantic_error(error: Mapping[str, Any]) -> str:
    loc = list(error["loc"])
    path = _format_path(loc)
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        parent = _model_at(StackConfig, loc[:-1])
        allowed = sorted(f.alias or n for n, f in parent.model_fields.items()) if parent else []
        return f"{path}: unknown key; allowed keys here: {', '.join(allowed)}"
    if kind == "missing":
        return f"{path}: required"
    if kind == "literal_error":
        return f"{path}: {value!r} is not allowed; allowed: {error['ctx']['expected']}"
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        bounds = {
            "greater_than_equal": ">=",
            "less_than_equal": "<=",
            "greater_than": ">",
            "less_than": "<",
        }
        limit = next(iter(error["ctx"].values()))
        return f"{path}: {value!r} is not allowed; must be {bounds[kind]} {limit}"
    return f"{path}: {value!r} is not allowed: {error['msg']}"


# --------------------------------------------------------------------------------------------------
# Pass 2: meaning, against the catalog.


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{path}: {message}")


def _listing(values: Iterable[Any]) -> str:
    values = list(values)
    return ", ".join(str(v) for v in values) if values else "(none)"


def _network_of(text: str, path: str, problems: _Problems) -> ipaddress.IPv4Network | None:
    try:
        return ipaddress.IPv4Network(text, strict=True)
    except ValueError as exc:
        problems.add(path, f"{text!r} is not an IPv4 CIDR block ({exc})")
        return None


class _Resolver:
    """Checks a shape-valid StackConfig for meaning and resolves it into Settings."""

    def __init__(
        self,
        config: StackConfig,
        *,
        project: str | None,
        region: str | None,
        stack: str,
        catalog: Catalog,
    ) -> None:
        self.config = config
        self.project = project
        self.region = region
        self.stack = stack
        self.catalog = catalog
        self.problems = _Problems()
        self.warnings: list[str] = []

    # -- top level --------------------------------------------------------------------------------

    def resolve(self) -> Settings:
        cfg = self.config
        mode = cfg.cluster.mode
        if mode != "existing" or _dashboard_on(cfg) or cfg.monitoring.alerts.enabled:
            self._require_gcp(needed_for=None if mode != "existing" else "the dashboard or alerts")
        cluster = self._cluster()
        network = self._network() if mode != "existing" else self._no_network()
        pools = self._pools(cluster)
        monitoring = self._monitoring(cluster, pools)
        workloads = self._workloads(cluster, pools)
        device_plugin, gpu_nodes = self._existing_gpu_layer(cluster)
        if network is not None and cluster.mode == "standard":
            self._check_address_capacity(network, cluster, pools)
        if network is not None and network.existing is not None and cluster.private_nodes:
            self.warnings.append(
                f"{NAMESPACE}:network.existing: private nodes have no external IP; the samples and the "
                "DCGM exporter pull from nvcr.io and docker.io, so the subnet needs Cloud NAT"
            )
        if cluster.mode != "existing" and cluster.deletion_protection and not cluster.authorized_networks:
            self.warnings.append(
                f"{NAMESPACE}:cluster.masterAuthorizedNetworks: empty, so the control plane's public "
                "endpoint accepts connections from any address (authentication is still required); "
                "see README 'Access'"
            )
        if self.problems.items:
            raise ConfigError(self.problems.items)
        return Settings(
            project=self.project,
            region=self.region,
            stack=self.stack,
            cluster=cluster,
            network=network,
            gpu_pools=pools,
            monitoring=monitoring,
            workloads=workloads,
            device_plugin=device_plugin,
            gpu_nodes=gpu_nodes,
        )

    def _require_gcp(self, needed_for: str | None) -> None:
        suffix = f" (needed for {needed_for})" if needed_for else ""
        if not self.project:
            self.problems.add(
                "gcp:project",
                f"required{suffix}; set it with `pulumi config set gcp:project <project-id>`",
            )
        elif not re.fullmatch(r"[a-z][-a-z0-9]{4,28}[a-z0-9]", self.project):
            self.problems.add(
                "gcp:project",
                f"{self.project!r} is not a GCP project ID (6-30 lowercase letters, digits, hyphens)",
            )
        if self.config.cluster.mode == "existing":
            return
        if not self.region:
            self.problems.add(
                "gcp:region",
                f"required{suffix}; set it with `pulumi config set gcp:region us-central1`",
            )
        elif not _REGION.fullmatch(self.region):
            self.problems.add("gcp:region", f"{self.region!r} is not a GCP region name (e.g. us-central1)")

    # -- network ----------------------------------------------------------------------------------

    def _no_network(self) -> None:
        if self.config.network is not None:
            self.problems.add(
                f"{NAMESPACE}:network",
                "not allowed with cluster.mode existing: no network is declared for an existing cluster",
            )
        return None

    def _network(self) -> NetworkSettings:
        net = self.config.network or NetworkConfig()
        if net.existing is not None:
            cidr_keys = {"subnet_cidr", "pods_cidr", "services_cidr"} & net.model_fields_set
            for key in sorted(cidr_keys):
                self.problems.add(
                    f"{NAMESPACE}:network.{to_camel(key)}",
                    "not allowed with network.existing: the existing subnet's ranges are used",
                )
            if "flow_log_sampling" in net.model_fields_set:
                self.problems.add(
                    f"{NAMESPACE}:network.flowLogSampling",
                    "not allowed with network.existing: flow logs are a setting of the existing subnet",
                )
            return NetworkSettings(None, None, None, existing=net.existing, flow_log_sampling=None)
        prefix = f"{NAMESPACE}:network"
        subnet = _network_of(net.subnet_cidr, f"{prefix}.subnetCidr", self.problems)
        pods = _network_of(net.pods_cidr, f"{prefix}.podsCidr", self.problems)
        services = _network_of(net.services_cidr, f"{prefix}.servicesCidr", self.problems)
        named = [("subnetCidr", subnet), ("podsCidr", pods), ("servicesCidr", services)]
        for i, (key_a, net_a) in enumerate(named):
            for key_b, net_b in named[i + 1 :]:
                if net_a and net_b and net_a.overlaps(net_b):
                    self.problems.add(
                        f"{prefix}.{key_b}",
                        f"{net_b} overlaps {prefix}.{key_a} {net_a}; the node, Pod and Service "
                        "ranges must not overlap",
                    )
        for key, value in named:
            if value and not any(value.subnet_of(r) for r in _PRIVATE_RANGES):
                self.warnings.append(
                    f"{prefix}.{key}: {value} is outside RFC 1918 and 100.64.0.0/10; GKE accepts "
                    "privately used public ranges, but make sure nothing else routes them"
                )
        if pods and pods.prefixlen > 24:
            self.problems.add(
                f"{prefix}.podsCidr",
                f"{pods} is too small; GKE gives each node a /24 of Pod addresses, so use /24 or larger",
            )
        return NetworkSettings(
            net.subnet_cidr, net.pods_cidr, net.services_cidr, flow_log_sampling=net.flow_log_sampling
        )

    def _check_address_capacity(
        self, network: NetworkSettings, cluster: ClusterSettings, pools: tuple[GpuPool, ...]
    ) -> None:
        """The Pod range must hold a /24 for every node the pools can grow to (plus a surge node)."""
        if not network.pods_cidr or cluster.system_pool is None:
            return
        pods = ipaddress.IPv4Network(network.pods_cidr)
        if pods.prefixlen > _POD_RANGE_PREFIX_PER_NODE:
            return  # already reported
        nodes = cluster.system_pool.max_nodes + sum(p.max_nodes or 0 for p in pools) + 1
        capacity = 2 ** (_POD_RANGE_PREFIX_PER_NODE - pods.prefixlen)
        if capacity < nodes:
            self.problems.add(
                f"{NAMESPACE}:network.podsCidr",
                f"{pods} holds Pod addresses for {capacity} node(s), but the pools can grow to {nodes} "
                "(system and GPU maxNodes, plus one upgrade surge node; each node takes a /24); use a "
                f"/{_POD_RANGE_PREFIX_PER_NODE - (nodes - 1).bit_length()} or larger",
            )

    # -- cluster ----------------------------------------------------------------------------------

    def _cluster(self) -> ClusterSettings:
        c = self.config.cluster
        prefix = f"{NAMESPACE}:cluster"
        if c.mode == "existing":
            return self._existing_cluster(c, prefix)
        for key in ("kubeconfig", "context", "flavor"):
            if key in c.model_fields_set:
                self.problems.add(f"{prefix}.{key}", f"only allowed with mode existing (mode is {c.mode})")

        name = c.name or f"{self.project}-{self.stack}"
        if (c.name or self.project) and not (_K8S_NAME.fullmatch(name) and len(name) <= 40):
            key = "name" if c.name else "name (default <project>-<stack>)"
            self.problems.add(
                f"{prefix}.{key}",
                f"{name!r} is not a valid GKE cluster name; use at most 40 lowercase letters, digits "
                "and hyphens, starting with a letter",
            )

        location = c.location or self.region or ""
        if c.location and self.region:
            zone = _ZONE.fullmatch(c.location)
            if c.location == self.region:
                pass
            elif zone and zone.group(1) == self.region:
                if c.mode == "autopilot":
                    self.problems.add(
                        f"{prefix}.location",
                        f"{c.location!r} is a zone; Autopilot clusters are regional, so use "
                        f"{self.region!r} or leave location out",
                    )
            else:
                self.problems.add(
                    f"{prefix}.location",
                    f"{c.location!r} is not region {self.region} or one of its zones",
                )

        authorized: list[AuthorizedNetwork] = []
        for i, entry in enumerate(c.master_authorized_networks):
            path = f"{prefix}.masterAuthorizedNetworks[{i}].cidrBlock"
            net = _network_of(entry.cidr_block, path, self.problems)
            if net is not None:
                authorized.append(AuthorizedNetwork(entry.cidr_block, entry.display_name or entry.cidr_block))

        system_pool: SystemPool | None = None
        if c.mode == "autopilot":
            if c.system_pool is not None:
                self.problems.add(
                    f"{prefix}.systemPool",
                    "not allowed with mode autopilot: Autopilot manages the nodes for system Pods",
                )
        else:
            sp = c.system_pool or SystemPoolConfig()
            if sp.min_nodes > sp.max_nodes:
                self.problems.add(
                    f"{prefix}.systemPool.minNodes",
                    f"{sp.min_nodes} is greater than systemPool.maxNodes {sp.max_nodes}",
                )
            if sp.machine_type.split("-", 1)[0] in {"g2", "a2", "a3", "a4", "g4"}:
                self.problems.add(
                    f"{prefix}.systemPool.machineType",
                    f"{sp.machine_type!r} is a GPU machine type; the system pool is for non-GPU "
                    "system Pods (e.g. e2-standard-4)",
                )
            zones = 1 if _ZONE.fullmatch(location) else _DEFAULT_REGIONAL_ZONES
            if sp.max_nodes < zones:
                self.problems.add(
                    f"{prefix}.systemPool.maxNodes",
                    f"{sp.max_nodes} is too small: the system pool of a regional cluster starts with one "
                    f"node in each of its {zones} zones; allowed: {zones} or more (or a zonal cluster)",
                )
            system_pool = SystemPool(sp.machine_type, sp.min_nodes, sp.max_nodes, sp.spot, sp.disk_size_gb)

        return ClusterSettings(
            mode=c.mode,
            name=name,
            location=location,
            release_channel=c.release_channel,
            private_nodes=c.private_nodes,
            authorized_networks=tuple(authorized),
            deletion_protection=c.deletion_protection,
            system_pool=system_pool,
            public_endpoint=c.public_endpoint,
            binary_authorization=c.binary_authorization,
        )

    def _existing_cluster(self, c: ClusterConfig, prefix: str) -> ClusterSettings:
        gke_only = (
            "location",
            "release_channel",
            "private_nodes",
            "master_authorized_networks",
            "deletion_protection",
            "system_pool",
        )
        for key in gke_only:
            if key in c.model_fields_set:
                self.problems.add(
                    f"{prefix}.{to_camel(key)}",
                    "not allowed with mode existing: the program does not manage that cluster",
                )
        if not c.kubeconfig:
            self.problems.add(
                f"{prefix}.kubeconfig",
                "required with mode existing; set it as a secret: "
                '`pulumi config set --secret --path gke-gpu:cluster.kubeconfig "$(cat kubeconfig)"`',
            )
        if c.flavor is None:
            self.problems.add(f"{prefix}.flavor", "required with mode existing; allowed: 'gke', 'generic'")
        self._check_kubeconfig(c, prefix)
        name = c.name or ""
        monitoring = self.config.monitoring
        if (_dashboard_on(self.config) or monitoring.alerts.enabled) and not name:
            self.problems.add(
                f"{prefix}.name",
                "required when monitoring.dashboard or monitoring.alerts is on: the dashboard and "
                "alerts filter on the cluster name",
            )
        return ClusterSettings(
            mode="existing",
            name=name,
            location="",
            kubeconfig=c.kubeconfig,
            context=c.context,
            flavor=c.flavor,
            deletion_protection=False,
        )

    def _check_kubeconfig(self, c: ClusterConfig, prefix: str) -> None:
        """A kubeconfig that parses must have the named context (a secret not decrypted offline, or
        one that is not YAML, is left for the Kubernetes provider to judge)."""
        if not c.kubeconfig:
            return
        try:
            document = yaml.safe_load(c.kubeconfig)
        except yaml.YAMLError:
            document = None
        if not isinstance(document, dict):
            return
        contexts = [ctx.get("name") for ctx in document.get("contexts") or [] if isinstance(ctx, dict)]
        if not contexts:
            self.problems.add(f"{prefix}.kubeconfig", "has no contexts; is it a kubeconfig file?")
        elif c.context is not None and c.context not in contexts:
            self.problems.add(
                f"{prefix}.context",
                f"{c.context!r} is not a context of the kubeconfig; allowed: {_listing(contexts)}",
            )

    # -- GPU pools --------------------------------------------------------------------------------

    def _pools(self, cluster: ClusterSettings) -> tuple[GpuPool, ...]:
        pools_config = self.config.gpu_pools
        if cluster.mode == "existing":
            if pools_config:
                self.problems.add(
                    f"{NAMESPACE}:gpuPools",
                    "not allowed with cluster.mode existing: node pools of an existing cluster are "
                    "not managed here (use gpuNodes and devicePlugin for a generic cluster)",
                )
            return ()
        seen: dict[str, int] = {}
        resolved: list[GpuPool] = []
        for i, pool in enumerate(pools_config):
            path = f"{NAMESPACE}:gpuPools[{i}]"
            if pool.name in seen:
                self.problems.add(
                    f"{path}.name",
                    f"{pool.name!r} is already used by gpuPools[{seen[pool.name]}]; pool names must "
                    "be unique",
                )
            seen.setdefault(pool.name, i)
            result = self._pool(pool, path, cluster)
            if result is not None:
                resolved.append(result)
        if cluster.mode == "standard" and cluster.system_pool:
            reserved = {"system", "default-pool"}
            for i, pool in enumerate(pools_config):
                if pool.name in reserved:
                    self.problems.add(
                        f"{NAMESPACE}:gpuPools[{i}].name",
                        f"{pool.name!r} is reserved for the system pool; choose another name",
                    )
        return tuple(resolved)

    def _pool(self, pool: GpuPoolConfig, path: str, cluster: ClusterSettings) -> GpuPool | None:
        errors_before = len(self.problems.items)
        if not (_K8S_NAME.fullmatch(pool.name) and len(pool.name) <= 40):
            self.problems.add(
                f"{path}.name",
                f"{pool.name!r} is not a valid node pool name; use at most 40 lowercase letters, "
                "digits and hyphens, starting with a letter",
            )
        accelerator = self.catalog.accelerator(pool.accelerator)
        if accelerator is None:
            self.problems.add(
                f"{path}.accelerator",
                f"{pool.accelerator!r} is not a GKE accelerator in the catalog; allowed: "
                f"{_listing(sorted(self.catalog.accelerators))}",
            )
            return None
        self._check_mig(pool, path, accelerator)
        self._check_labels_and_taints(pool, path)
        if pool.on_demand_fallback and not pool.spot:
            self.problems.add(
                f"{path}.onDemandFallback",
                "true needs spot: true (the fallback is from Spot to on-demand)",
            )
        if cluster.autopilot:
            result = self._autopilot_profile(pool, path, accelerator)
        else:
            result = self._standard_pool(pool, path, accelerator, cluster)
        return result if len(self.problems.items) == errors_before else None

    def _check_mig(self, pool: GpuPoolConfig, path: str, accelerator: Accelerator) -> None:
        if pool.mig_partition_size is None:
            return
        if not accelerator.mig_partitions:
            self.problems.add(
                f"{path}.migPartitionSize",
                f"{pool.mig_partition_size!r} is not allowed: {accelerator.name} has no MIG; "
                "GPUs with MIG: "
                + _listing(sorted(a.name for a in self.catalog.accelerators.values() if a.mig_partitions)),
            )
        elif pool.mig_partition_size not in accelerator.mig_partitions:
            self.problems.add(
                f"{path}.migPartitionSize",
                f"{pool.mig_partition_size!r} is not a MIG partition of {accelerator.name}; allowed: "
                f"{_listing(accelerator.mig_partitions)}",
            )

    def _check_labels_and_taints(self, pool: GpuPoolConfig, path: str) -> None:
        for key, value in pool.labels.items():
            if not _valid_label_key(key):
                self.problems.add(
                    f"{path}.labels",
                    f"key {key!r} is not a valid Kubernetes label key",
                )
            elif key.split("/")[0].endswith(("kubernetes.io", "k8s.io", "cloud.google.com")):
                self.problems.add(
                    f"{path}.labels",
                    f"key {key!r} uses a prefix reserved for Kubernetes and GKE",
                )
            if len(value) > 63 or not _LABEL_NAME.fullmatch(value):
                self.problems.add(
                    f"{path}.labels.{key}",
                    f"{value!r} is not a valid Kubernetes label value",
                )
        seen: set[str] = set()
        for j, taint in enumerate(pool.taints):
            tpath = f"{path}.taints[{j}]"
            if taint.key == GPU_TAINT_KEY:
                self.problems.add(
                    f"{tpath}.key",
                    f"{GPU_TAINT_KEY!r} is declared on every GPU pool already "
                    f"({GPU_TAINT_KEY}={GPU_TAINT_VALUE}:NoSchedule); remove it",
                )
            elif not _valid_label_key(taint.key):
                self.problems.add(f"{tpath}.key", f"{taint.key!r} is not a valid taint key")
            if taint.value and (len(taint.value) > 63 or not _LABEL_NAME.fullmatch(taint.value)):
                self.problems.add(f"{tpath}.value", f"{taint.value!r} is not a valid taint value")
            if (taint.key, taint.effect) in seen:  # type: ignore[comparison-overlap]
                self.problems.add(f"{tpath}", f"duplicate taint {taint.key}:{taint.effect}")
            seen.add((taint.key, taint.effect))  # type: ignore[arg-type]

    def _autopilot_profile(self, pool: GpuPoolConfig, path: str, accelerator: Accelerator) -> GpuPool | None:
        standard_only = {
            "machine_type": "Autopilot picks the machine for each Pod",
            "zones": "Autopilot places Pods in the region's zones itself",
            "min_nodes": "Autopilot scales nodes with the Pods",
            "max_nodes": "Autopilot scales nodes with the Pods",
            "local_ssd_count": "Autopilot sizes ephemeral storage from Pod requests",
            "disk_size_gb": "Autopilot sizes boot disks itself",
            "disk_type": "Autopilot chooses boot disks itself",
            "taints": "Autopilot taints its nodes itself",
            "labels": "Autopilot node labels come from Pod node selectors",
            "compact_placement": "on Autopilot, compact placement is requested per workload",
            "queued_provisioning": "on Autopilot, queued provisioning is requested per workload "
            "through a ProvisioningRequest",
            "reservation": "on Autopilot, a reservation is consumed per workload with node selectors",
        }
        for key, why in standard_only.items():
            if key in pool.model_fields_set:
                self.problems.add(
                    f"{path}.{to_camel(key)}",
                    f"not allowed on Autopilot ({why}); Standard-only keys: "
                    + _listing(to_camel(k) for k in standard_only),
                )
        if pool.driver_version == "INSTALLATION_DISABLED":
            self.problems.add(
                f"{path}.driverVersion",
                "'INSTALLATION_DISABLED' is not allowed on Autopilot (GKE always installs the "
                "driver); allowed: 'DEFAULT', 'LATEST'",
            )
        if not accelerator.autopilot:
            self.problems.add(
                f"{path}.accelerator",
                f"{accelerator.name!r} is not offered on Autopilot; Autopilot accelerators: "
                + _listing(sorted(a.name for a in self.catalog.accelerators.values() if a.autopilot)),
            )
            return None
        if pool.sharing and pool.sharing.strategy == "MPS":
            self.problems.add(
                f"{path}.sharing.strategy",
                "'MPS' is not allowed on Autopilot (GKE supports MPS on Standard only); "
                "allowed: 'TIME_SHARING'",
            )
        count = pool.gpus_per_node or accelerator.autopilot_counts[0]
        if count not in accelerator.autopilot_counts:
            self.problems.add(
                f"{path}.gpusPerNode",
                f"{count} is not offered for {accelerator.name} on Autopilot; allowed: "
                f"{_listing(accelerator.autopilot_counts)}",
            )
        self._check_region_offers(accelerator, f"{path}.accelerator")
        # The Spot-then-on-demand fallback is a ComputeClass, which (before GKE 1.35) cannot express
        # GPU sharing or MIG; such profiles select Spot directly instead.
        partitioned = pool.sharing is not None or pool.mig_partition_size is not None
        if pool.on_demand_fallback and partitioned:
            self.problems.add(
                f"{path}.onDemandFallback",
                "true is not allowed with sharing or migPartitionSize (the ComputeClass that "
                "falls back to on-demand cannot express them); set it to false",
            )
        fallback = (
            pool.spot and not partitioned if pool.on_demand_fallback is None else pool.on_demand_fallback
        )
        return GpuPool(
            **_common_pool_fields(pool, accelerator, count),
            on_demand_fallback=fallback,
            zones=accelerator.zones.get(self.region or "", ()),
        )

    def _check_region_offers(self, accelerator: Accelerator, path: str) -> None:
        region = self.region or ""
        if region in self.catalog.regions and region not in accelerator.zones:
            self.problems.add(
                path,
                f"{accelerator.name!r} is not offered in region {region} (catalog); regions with it: "
                f"{_listing(sorted(accelerator.zones))}",
            )

    def _standard_pool(
        self, pool: GpuPoolConfig, path: str, accelerator: Accelerator, cluster: ClusterSettings
    ) -> GpuPool | None:
        if "on_demand_fallback" in pool.model_fields_set:
            self.problems.add(
                f"{path}.onDemandFallback",
                "only allowed on Autopilot; on Standard, add a second pool without spot",
            )
        if pool.max_nodes is None:
            self.problems.add(
                f"{path}.maxNodes",
                "required on Standard: every GPU pool autoscales up to an explicit limit "
                f"(it bounds the bill and must fit your {accelerator.name} quota)",
            )
        elif pool.min_nodes > pool.max_nodes:
            self.problems.add(
                f"{path}.minNodes",
                f"{pool.min_nodes} is greater than maxNodes {pool.max_nodes}",
            )
        machine = self._machine(pool, path, accelerator)
        if machine is None:
            return None
        count = self._gpu_count(pool, path, accelerator, machine)
        zones = self._zones(pool, path, accelerator, cluster)
        if zones and pool.min_nodes and pool.max_nodes is not None and pool.min_nodes <= pool.max_nodes:
            # A pool starts with the same number of nodes in every zone (initial_node_count is per zone).
            per_zone = -(-pool.min_nodes // len(zones))
            if per_zone * len(zones) > pool.max_nodes:
                self.problems.add(
                    f"{path}.minNodes",
                    f"{pool.min_nodes} over {len(zones)} zones starts {per_zone} node(s) per zone "
                    f"({per_zone * len(zones)} nodes), more than maxNodes {pool.max_nodes}; raise maxNodes, "
                    "make minNodes a multiple of the zone count, or list fewer zones",
                )
        self._check_capacity_options(pool, path, machine, zones)
        local_ssds = self._local_ssds(pool, path, machine)
        disk_type = self._disk_type(pool, path, machine)
        return GpuPool(
            **_common_pool_fields(pool, accelerator, count),
            machine_type=machine.name,
            min_nodes=pool.min_nodes,
            max_nodes=pool.max_nodes,
            zones=zones,
            reservation=Reservation(pool.reservation.type, pool.reservation.name),
            queued_provisioning=pool.queued_provisioning,
            compact_placement=pool.compact_placement,
            local_ssd_count=local_ssds,
            disk_size_gb=pool.disk_size_gb,
            disk_type=disk_type,
            labels=dict(pool.labels),
            taints=tuple(Taint(t.key, t.value, t.effect) for t in pool.taints),
        )

    def _machine(self, pool: GpuPoolConfig, path: str, accelerator: Accelerator) -> MachineType | None:
        if pool.machine_type is None:
            count = pool.gpus_per_node or accelerator.allowed_counts[0]
            name = accelerator.default_machine_types.get(count)
            if name is None:
                self.problems.add(
                    f"{path}.gpusPerNode",
                    f"{count} is not offered for {accelerator.name}; allowed: "
                    f"{_listing(accelerator.allowed_counts)}",
                )
                return None
            machine = accelerator.machine_type(name)
            assert machine is not None, f"catalog default {name} missing for {accelerator.name}"
            return machine
        machine = accelerator.machine_type(pool.machine_type)
        if machine is None:
            self.problems.add(
                f"{path}.machineType",
                f"{pool.machine_type!r} cannot carry {accelerator.name}; allowed: "
                f"{_listing(accelerator.machine_type_examples())}",
            )
        return machine

    def _gpu_count(
        self, pool: GpuPoolConfig, path: str, accelerator: Accelerator, machine: MachineType
    ) -> int:
        allowed = accelerator.counts_for(machine)
        if not allowed:
            limits = ", ".join(
                f"{n} GPU(s): <= {lim.max_vcpus} vCPUs and {lim.max_memory_gb:g} GB"
                for n, lim in sorted(accelerator.attach_limits.items())
            )
            self.problems.add(
                f"{path}.machineType",
                f"{machine.name!r} ({machine.vcpus} vCPUs, {machine.memory_gb:g} GB) is too large "
                f"for any count of {accelerator.name}; N1 limits: {limits}",
            )
            return pool.gpus_per_node or 0
        if pool.gpus_per_node is None:
            return allowed[0]
        if pool.gpus_per_node not in allowed:
            self.problems.add(
                f"{path}.gpusPerNode",
                f"{pool.gpus_per_node} is not allowed for {accelerator.name} on {machine.name}; "
                f"allowed: {_listing(allowed)}",
            )
        return pool.gpus_per_node

    def _zones(
        self, pool: GpuPoolConfig, path: str, accelerator: Accelerator, cluster: ClusterSettings
    ) -> tuple[str, ...]:
        region = self.region or ""
        offered = accelerator.zones.get(region)
        known_region = region in self.catalog.regions
        cluster_zone = cluster.location if _ZONE.fullmatch(cluster.location) else None
        if pool.zones is None:
            if known_region and not offered:
                self._check_region_offers(accelerator, f"{path}.accelerator")
                return ()
            if not known_region:
                self.problems.add(
                    f"{path}.zones",
                    f"required: the catalog has no zone data for region {region}, so it cannot pick "
                    f"zones with {accelerator.name}; catalog regions: "
                    f"{_listing(self.catalog.regions)}",
                )
                return ()
            assert offered is not None
            if cluster_zone:
                if cluster_zone not in offered:
                    self.problems.add(
                        f"{path}.zones",
                        f"required: the cluster's zone {cluster_zone} does not offer "
                        f"{accelerator.name}; zones of {region} that do: {_listing(offered)}",
                    )
                    return ()
                return (cluster_zone,)
            if pool.compact_placement:
                self.problems.add(
                    f"{path}.zones",
                    "required with compactPlacement: compact placement needs exactly one zone; "
                    f"zones with {accelerator.name}: {_listing(offered)}",
                )
            return tuple(offered)
        if not pool.zones:
            self.problems.add(f"{path}.zones", "must not be empty; leave it out to use the catalog")
        if len(set(pool.zones)) != len(pool.zones):
            self.problems.add(f"{path}.zones", f"{pool.zones} lists a zone twice")
        for j, zone in enumerate(pool.zones):
            match = _ZONE.fullmatch(zone)
            if not match or match.group(1) != region:
                self.problems.add(
                    f"{path}.zones[{j}]",
                    f"{zone!r} is not a zone of region {region}; allowed: "
                    f"{_listing(offered or [f'{region}-<a..f>'])}",
                )
            elif known_region and zone not in (offered or ()):
                self.problems.add(
                    f"{path}.zones[{j}]",
                    f"{zone!r} does not offer {accelerator.name}; zones of {region} that do: "
                    f"{_listing(offered or ())}",
                )
        if not known_region and pool.zones:
            self.warnings.append(
                f"{path}.zones: region {region} is not in the accelerator catalog, so "
                f"{_listing(pool.zones)} could not be checked for {accelerator.name}"
            )
        return tuple(pool.zones)

    def _check_capacity_options(
        self, pool: GpuPoolConfig, path: str, machine: MachineType, zones: tuple[str, ...]
    ) -> None:
        res = pool.reservation
        if res.type == "SPECIFIC":
            if not res.name:
                self.problems.add(
                    f"{path}.reservation.name",
                    "required with reservation.type SPECIFIC (the reservation's name, or "
                    "projects/<project>/reservations/<name> for a shared one)",
                )
            elif not _RESERVATION.fullmatch(res.name):
                self.problems.add(
                    f"{path}.reservation.name",
                    f"{res.name!r} is not a reservation name or projects/<project>/reservations/<name>",
                )
        elif res.name is not None:
            self.problems.add(
                f"{path}.reservation.name",
                f"only allowed with reservation.type SPECIFIC (type is {res.type})",
            )
        if res.type == "SPECIFIC" and len(zones) > 1:
            self.problems.add(
                f"{path}.zones",
                f"{list(zones)} has {len(zones)} zones, but a specific reservation is zonal: list "
                "exactly the reservation's zone",
            )
        if pool.spot and res.type != "NONE":
            self.problems.add(
                f"{path}.spot",
                f"true is not allowed with reservation.type {res.type}: Spot VMs do not consume "
                "reservations; use spot: false or reservation.type NONE",
            )
        if pool.queued_provisioning:
            if pool.spot:
                self.problems.add(
                    f"{path}.spot",
                    "true is not allowed with queuedProvisioning: queued provisioning obtains "
                    "on-demand capacity through ProvisioningRequests",
                )
            if res.type != "NONE":
                self.problems.add(
                    f"{path}.reservation.type",
                    f"{res.type!r} is not allowed with queuedProvisioning; allowed: 'NONE'",
                )
            if pool.min_nodes != 0:
                self.problems.add(
                    f"{path}.minNodes",
                    f"{pool.min_nodes} is not allowed with queuedProvisioning; allowed: 0 (nodes "
                    "exist only while a ProvisioningRequest holds them)",
                )
            if pool.compact_placement:
                self.problems.add(
                    f"{path}.compactPlacement",
                    "true is not allowed with queuedProvisioning (GKE refuses compact placement "
                    "for queued GPU pools)",
                )
            if not machine.queued_provisioning:
                self.problems.add(
                    f"{path}.queuedProvisioning",
                    f"true is not allowed: {machine.name} is not offered through queued provisioning",
                )
        if pool.compact_placement:
            if machine.series == "n1":
                self.problems.add(
                    f"{path}.compactPlacement",
                    "true is not allowed on N1 machine types (compact placement needs A2, A3, A4, G2 or G4)",
                )
            if pool.zones is not None and len(zones) != 1:
                self.problems.add(
                    f"{path}.zones",
                    f"{list(zones)} has {len(zones)} zones; compactPlacement needs exactly one",
                )

    def _local_ssds(self, pool: GpuPoolConfig, path: str, machine: MachineType) -> int:
        requested = pool.local_ssd_count
        if machine.bundled_local_ssds:
            if requested is not None and requested != machine.bundled_local_ssds:
                self.problems.add(
                    f"{path}.localSsdCount",
                    f"{requested} is not allowed: {machine.name} comes with "
                    f"{machine.bundled_local_ssds} Local SSDs; allowed: "
                    f"{machine.bundled_local_ssds} (or leave it out)",
                )
            return machine.bundled_local_ssds
        if not requested:
            return 0
        if requested not in machine.local_ssd_counts:
            self.problems.add(
                f"{path}.localSsdCount",
                f"{requested} is not allowed on {machine.name}; allowed: "
                f"{_listing(machine.local_ssd_counts)}",
            )
        return requested

    def _disk_type(self, pool: GpuPoolConfig, path: str, machine: MachineType) -> str | None:
        allowed = self.catalog.boot_disk_types(machine)
        if pool.disk_type is None:
            return allowed[0] if allowed else None
        if allowed and pool.disk_type not in allowed:
            self.problems.add(
                f"{path}.diskType",
                f"{pool.disk_type!r} is not a boot disk type of {machine.name}; allowed: {_listing(allowed)}",
            )
        return pool.disk_type

    # -- monitoring, workloads, existing clusters -------------------------------------------------

    def _monitoring(self, cluster: ClusterSettings, pools: tuple[GpuPool, ...]) -> MonitoringSettings:
        m = self.config.monitoring
        prefix = f"{NAMESPACE}:monitoring"
        generic = cluster.mode == "existing" and cluster.flavor == "generic"
        dcgm = m.dcgm or ("exporter" if generic else "managed")
        if dcgm == "managed":
            if cluster.mode == "existing" and cluster.flavor == "generic":
                self.problems.add(
                    f"{prefix}.dcgm",
                    "'managed' is GKE's DCGM and needs a GKE cluster; on a generic cluster use "
                    "'exporter' or 'none'",
                )
            for i, pool in enumerate(self.config.gpu_pools):
                if pool.driver_version == "INSTALLATION_DISABLED":
                    self.problems.add(
                        f"{NAMESPACE}:gpuPools[{i}].driverVersion",
                        "'INSTALLATION_DISABLED' is not allowed with monitoring.dcgm managed: GKE's "
                        "DCGM needs GKE-installed drivers; use DEFAULT or LATEST, or dcgm: exporter",
                    )
        if dcgm == "exporter" and cluster.autopilot:
            self.problems.add(
                f"{prefix}.dcgm",
                "'exporter' is not allowed on Autopilot (the exporter needs a privileged Pod and "
                "host paths, which Autopilot refuses); allowed: 'managed', 'none'",
            )
        scrape = m.scrape
        if scrape is not None:
            if dcgm != "exporter":
                self.problems.add(f"{prefix}.scrape", f"only allowed with dcgm: exporter (dcgm is {dcgm})")
            elif not generic and scrape != "podMonitoring":
                self.problems.add(
                    f"{prefix}.scrape",
                    f"{scrape!r} is not allowed on GKE, where Managed Prometheus scrapes through a "
                    "PodMonitoring; allowed: 'podMonitoring'",
                )
        elif dcgm == "exporter":
            scrape = "serviceMonitor" if generic else "podMonitoring"

        alerts: AlertSettings | None = None
        a = m.alerts
        if a.enabled and generic:
            self.problems.add(
                f"{prefix}.alerts.enabled",
                "true is not allowed on a generic cluster: the alert policies are Cloud Monitoring "
                "PromQL over Managed Service for Prometheus, and this cluster's exporter is scraped by "
                "your own Prometheus; alert there instead",
            )
        if a.enabled:
            if not a.notification_channels:
                self.problems.add(
                    f"{prefix}.alerts.notificationChannels",
                    "required when alerts.enabled is true: at least one "
                    "projects/<project>/notificationChannels/<id>",
                )
            for j, channel in enumerate(a.notification_channels):
                if not _CHANNEL.fullmatch(channel):
                    self.problems.add(
                        f"{prefix}.alerts.notificationChannels[{j}]",
                        f"{channel!r} is not projects/<project>/notificationChannels/<id>",
                    )
            alerts = AlertSettings(
                tuple(a.notification_channels),
                a.idle_gpu_minutes,
                a.idle_gpu_utilization_percent,
                a.xid_errors and dcgm != "none",
            )
        elif "notification_channels" in a.model_fields_set and a.notification_channels:
            self.warnings.append(
                f"{prefix}.alerts.notificationChannels: set but alerts.enabled is false, so no "
                "alert policy is created"
            )
        scraper_namespace = None
        if dcgm == "exporter":
            scraper_namespace = m.scraper_namespace or ("monitoring" if generic else "gmp-system")
        return MonitoringSettings(dcgm, _dashboard_on(self.config), alerts, scrape, scraper_namespace)

    def _workloads(self, cluster: ClusterSettings, pools: tuple[GpuPool, ...]) -> tuple[Workload, ...]:
        result: list[Workload] = []
        names = [p.name for p in pools]
        seen: set[tuple[str, str | None]] = set()
        for i, w in enumerate(self.config.workloads):
            path = f"{NAMESPACE}:workloads[{i}]"
            if cluster.mode == "existing":
                if w.pool is not None:
                    self.problems.add(
                        f"{path}.pool",
                        "not allowed with cluster.mode existing: workloads land on any GPU node",
                    )
                pool = None
            else:
                if not pools:
                    self.problems.add(
                        f"{path}",
                        f"{w.name!r} needs a GPU pool, and gke-gpu:gpuPools is empty",
                    )
                    continue
                pool_name = w.pool or names[0]
                if pool_name not in names:
                    self.problems.add(
                        f"{path}.pool",
                        f"{pool_name!r} is not a GPU pool of this stack; allowed: {_listing(names)}",
                    )
                    continue
                pool_obj = next(p for p in pools if p.name == pool_name)
                if pool_obj.queued_provisioning:
                    self.problems.add(
                        f"{path}.pool",
                        f"{pool_name!r} uses queued provisioning, whose nodes come only through a "
                        "ProvisioningRequest; choose a pool without queuedProvisioning",
                    )
                    continue
                if (
                    w.name == "pytorch-smoke"
                    and pool_obj.accelerator in BLACKWELL_ACCELERATORS
                    and pool_obj.driver_version != "LATEST"
                ):
                    self.problems.add(
                        f"{path}.pool",
                        f"{pool_name!r} ({pool_obj.accelerator}) runs pytorch-smoke on the CUDA 13 build of "
                        "PyTorch (Blackwell needs it), which needs an R580+ driver: set the pool's "
                        "driverVersion: LATEST",
                    )
                    continue
                if w.name == "sharing-demo" and pool_obj.sharing is None:
                    self.problems.add(
                        f"{path}.pool",
                        f"{pool_name!r} has no sharing; sharing-demo needs a pool with "
                        "sharing (TIME_SHARING or MPS); pools with sharing: "
                        + _listing(p.name for p in pools if p.sharing),
                    )
                    continue
                pool = pool_name
            if w.name == "sharing-demo" and cluster.mode == "existing":
                plugin = self.config.device_plugin
                if cluster.flavor != "generic" or not (plugin and plugin.sharing):
                    self.problems.add(
                        f"{path}.name",
                        "'sharing-demo' on an existing cluster needs flavor generic with "
                        "devicePlugin.sharing.timeSlicing",
                    )
                    continue
            if w.replicas is not None and w.name != "sharing-demo":
                self.problems.add(f"{path}.replicas", "only allowed for sharing-demo")
            if (w.name, pool) in seen:
                self.problems.add(f"{path}", f"{w.name!r} on pool {pool!r} is listed twice")
            seen.add((w.name, pool))
            result.append(Workload(w.name, pool, w.replicas))
        return tuple(result)

    def _existing_gpu_layer(
        self, cluster: ClusterSettings
    ) -> tuple[DevicePluginSettings | None, tuple[str, ...]]:
        cfg = self.config
        generic = cluster.mode == "existing" and cluster.flavor == "generic"
        if not generic:
            for key in ("device_plugin", "gpu_nodes"):
                if key in cfg.model_fields_set:
                    self.problems.add(
                        f"{NAMESPACE}:{to_camel(key)}",
                        "only allowed with cluster.mode existing and cluster.flavor generic "
                        "(GKE ships its own device plugin and labels its GPU nodes)",
                    )
            return None, ()
        plugin = cfg.device_plugin or DevicePluginConfig()
        label = plugin.gpu_node_label
        key, _, value = label.partition("=")
        if "=" not in label or not key or not _valid_label_key(key) or not _LABEL_NAME.fullmatch(value):
            self.problems.add(
                f"{NAMESPACE}:devicePlugin.gpuNodeLabel",
                f"{label!r} is not a Kubernetes label selector of the form key=value (e.g. "
                "nvidia.com/gpu.present=true or gpus=true)",
            )
        nodes = tuple(cfg.gpu_nodes or ())
        for j, node in enumerate(nodes):
            if not _DNS_SUBDOMAIN.fullmatch(node) or len(node) > 253:
                self.problems.add(f"{NAMESPACE}:gpuNodes[{j}]", f"{node!r} is not a Kubernetes node name")
        if len(set(nodes)) != len(nodes):
            self.problems.add(f"{NAMESPACE}:gpuNodes", "lists a node twice")
        replicas = plugin.sharing.time_slicing.replicas if plugin.sharing else None
        if plugin.runtime_class_name is not None and not _K8S_NAME.fullmatch(plugin.runtime_class_name):
            self.problems.add(
                f"{NAMESPACE}:devicePlugin.runtimeClassName",
                f"{plugin.runtime_class_name!r} is not a RuntimeClass name (e.g. nvidia)",
            )
        settings = DevicePluginSettings(
            key,
            value,
            replicas,
            taint_gpu_nodes=plugin.taint_gpu_nodes,
            runtime_class_name=plugin.runtime_class_name,
        )
        return settings, nodes


def _dashboard_on(config: StackConfig) -> bool:
    """The dashboard defaults to on, except on a generic cluster (its metrics are not in Cloud
    Monitoring unless it runs Google's Prometheus collectors)."""
    if config.monitoring.dashboard is not None:
        return config.monitoring.dashboard
    return not (config.cluster.mode == "existing" and config.cluster.flavor == "generic")


def _common_pool_fields(pool: GpuPoolConfig, accelerator: Accelerator, count: int) -> dict[str, Any]:
    """The GpuPool fields that Standard pools and Autopilot profiles resolve the same way."""
    sharing = pool.sharing
    return {
        "name": pool.name,
        "accelerator": accelerator.name,
        "gpus_per_node": count,
        "gpu_memory_gb": accelerator.memory_gb,
        "spot": pool.spot,
        "driver_version": pool.driver_version,
        "sharing": Sharing(sharing.strategy, sharing.max_clients_per_gpu) if sharing else None,
        "mig_partition_size": pool.mig_partition_size,
        "mig_partitions_per_gpu": accelerator.mig_partitions.get(pool.mig_partition_size or "", 1),
    }


def _valid_label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return bool(name) and len(name) <= 63 and bool(_LABEL_NAME.fullmatch(name))


# --------------------------------------------------------------------------------------------------
# Entry points.


def parse_settings(
    raw: Mapping[str, Any],
    *,
    project: str | None,
    region: str | None,
    stack: str,
    catalog: Catalog | None = None,
) -> tuple[Settings, list[str]]:
    """Validate the `gke-gpu:` config (keys without the namespace) and resolve it into Settings.

    Returns the settings and any warnings; raises ConfigError with every problem found.
    """
    unknown = sorted(set(raw) - set(TOP_LEVEL_KEYS))
    problems = [
        f"{NAMESPACE}:{key}: unknown key; allowed keys: "
        + ", ".join(f"{NAMESPACE}:{k}" for k in TOP_LEVEL_KEYS)
        for key in unknown
    ]
    if "cluster" not in raw:
        problems.append(
            f"{NAMESPACE}:cluster: required; at least `{NAMESPACE}:cluster: {{mode: autopilot}}` "
            "(autopilot, standard or existing)"
        )
    try:
        config = StackConfig.model_validate(
            {k: v for k, v in raw.items() if v is not None and k in TOP_LEVEL_KEYS}
        )
    except ValidationError as exc:
        problems += [
            _describe_pydantic_error(e)
            for e in exc.errors()
            if not (e["type"] == "missing" and tuple(e["loc"]) == ("cluster",))
        ]
    if problems:
        raise ConfigError(problems)
    resolver = _Resolver(
        config,
        project=project,
        region=region,
        stack=stack,
        catalog=catalog or load_catalog(),
    )
    settings = resolver.resolve()
    return settings, resolver.warnings


def _all_config_keys() -> set[str]:
    """Every config key the engine passed to this program (set explicitly or via PULUMI_CONFIG)."""
    from pulumi.runtime import config as runtime_config

    return set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())


def load_settings() -> Settings:
    """Read this stack's config from the Pulumi engine and validate it. The only reader of config."""
    from pulumi.runtime import config as runtime_config

    raw: dict[str, Any] = {}
    for key in sorted(_all_config_keys()):
        namespace, _, name = key.partition(":")
        if namespace != NAMESPACE:
            continue
        # Read through the runtime rather than pulumi.Config so that a secret nested in an object
        # (cluster.kubeconfig) does not trigger the "use get_secret" warning; the program wraps it
        # in Output.secret itself before handing it to a provider.
        text = runtime_config.get_config(key)
        if text is None:
            continue
        try:
            raw[name] = json.loads(text)
        except (json.JSONDecodeError, TypeError):
            raw[name] = text
    gcp = pulumi.Config("gcp")
    settings, warnings = parse_settings(
        raw,
        project=gcp.get("project"),
        region=gcp.get("region"),
        stack=pulumi.get_stack(),
    )
    for warning in warnings:
        pulumi.log.warn(warning)
    return settings
