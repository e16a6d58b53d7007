"""Pass 1: the shape of the stack file (pydantic; camelCase keys; unknown keys forbidden)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, Field, field_validator

from .catalog import Catalog
from .config_broken import Broken
from .config_common import (
    MAX_AUTHORIZED_NETWORKS_PRIVATE,
    MAX_BOOT_DISK_GB,
    MAX_CHANNELS_PER_POLICY,
    MAX_NODES_PER_POOL,
    MAX_POOLS,
    MAX_SHARED_CLIENTS,
    MAX_TIME_SLICING_REPLICAS,
    NAMESPACE,
    Problems,
    cut,
)

# --------------------------------------------------------------------------------------------------
# Pass 1: the shape of the stack file (camelCase keys, unknown keys forbidden).
from .gpu_pool import GpuPool
from .model_base import (
    CHANNEL,
    DNS_LABEL,
    NETWORK_REF,
    PATTERN_MEANINGS,
    PRINTABLE,
    SUBNETWORK_REF,
    Cidr,
    GceName,
    MachineTypeName,
    StackModel,
)

_Model = StackModel


class ExistingNetworkConfig(_Model):
    network: Annotated[str, Field(max_length=200, pattern=NETWORK_REF)]
    subnetwork: Annotated[str, Field(max_length=250, pattern=SUBNETWORK_REF)]
    pods_range_name: GceName
    services_range_name: GceName


class NetworkConfig(_Model):
    subnet_cidr: Cidr = "10.10.0.0/20"
    pods_cidr: Cidr = "10.16.0.0/14"
    services_cidr: Cidr = "10.20.0.0/20"
    # VPC flow logs on the subnet, sampled: 0 turns them off.
    flow_log_sampling: float = Field(0.5, ge=0, le=1)
    existing: ExistingNetworkConfig | None = None
    # The range the GPUDirect NICs' subnets are carved from (gpudirect.py); resolved to
    # 192.168.0.0/16 when a pool has gpudirect: true.
    gpudirect_cidr: Cidr | None = None


class AuthorizedNetworkConfig(_Model):
    cidr_block: Cidr
    display_name: Annotated[str, Field(max_length=100, pattern=PRINTABLE)] = ""


class SystemPoolConfig(_Model):
    machine_type: MachineTypeName = "e2-standard-4"
    min_nodes: int = Field(1, ge=0, le=MAX_NODES_PER_POOL)
    max_nodes: int = Field(3, ge=1, le=MAX_NODES_PER_POOL)
    spot: bool = False
    disk_size_gb: int = Field(100, ge=10, le=MAX_BOOT_DISK_GB)


class ClusterConfig(_Model):
    mode: Literal["autopilot", "standard", "existing"]
    name: Annotated[str, Field(max_length=100)] | None = None
    location: Annotated[str, Field(max_length=40)] | None = None
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED"] = "REGULAR"
    private_nodes: bool = True
    master_authorized_networks: Annotated[
        list[AuthorizedNetworkConfig], Field(max_length=MAX_AUTHORIZED_NETWORKS_PRIVATE)
    ] = []
    deletion_protection: bool = True
    system_pool: SystemPoolConfig | None = None
    # The control plane's IP endpoint is private unless publicEndpoint is true; the DNS-based
    # endpoint (IAM-authorised) is always on, so CI reaches the cluster without an IP allowlist.
    public_endpoint: bool = False
    # Explicitly allow a public IP endpoint with no allowlist or with 0.0.0.0/0.
    public_endpoint_open_to_internet: bool = False
    binary_authorization: bool = False
    # Standard only: opt-in, because turning it on for an existing cluster restarts every node.
    intranode_visibility: bool = False
    # Which endpoint the program's kubeconfig (and so `pulumi up`) uses: the DNS endpoint, or the IP
    # endpoint as before (the first step of moving an existing stack, see README "Upgrading").
    kubeconfig_endpoint: Literal["dns", "ip"] = "dns"
    # mode: existing
    kubeconfig: str | None = Field(None, repr=False, max_length=1_000_000)
    context: Annotated[str, Field(max_length=253, pattern=PRINTABLE)] | None = None
    flavor: Literal["gke", "generic"] | None = None

    @property
    def autopilot(self) -> bool:
        return self.mode == "autopilot"

    @property
    def on_gke(self) -> bool:
        """True when the GPU nodes are GKE nodes (drivers, labels and device plugin from GKE)."""
        return self.mode != "existing" or self.flavor == "gke"


class AlertPolicyConfig(_Model):
    """The alert policies' settings: the stack file's `monitoring.alerts` and GpuMonitoring's `alerts`."""

    notification_channels: Annotated[
        list[Annotated[str, Field(max_length=200, pattern=CHANNEL)]],
        Field(max_length=MAX_CHANNELS_PER_POLICY),
    ] = []
    idle_gpu_minutes: int = Field(120, ge=5, le=1440)
    idle_gpu_utilization_percent: float = Field(5, ge=0, le=100)
    xid_errors: bool = True


class AlertsConfig(AlertPolicyConfig):
    enabled: bool = False


class MonitoringConfig(_Model):
    # Defaults depend on the cluster: managed and a dashboard on GKE; the exporter and no Cloud
    # Monitoring dashboard on a generic cluster.
    dcgm: Literal["managed", "exporter", "none"] | None = None
    dashboard: bool | None = None
    alerts: AlertsConfig = AlertsConfig()
    scrape: Literal["podMonitoring", "serviceMonitor", "annotations"] | None = None
    # The namespace of the Prometheus that scrapes the exporter: the only one a NetworkPolicy lets
    # reach the metrics port (default gmp-system on GKE, monitoring on a generic cluster).
    scraper_namespace: Annotated[str, Field(max_length=63, pattern=DNS_LABEL)] | None = None


class WorkloadConfig(_Model):
    name: Literal["nvidia-smi", "cuda-vector-add", "pytorch-smoke", "sharing-demo", "nccl-allreduce"]
    pool: Annotated[str, Field(max_length=100)] | None = None
    replicas: int | None = Field(None, ge=2, le=MAX_SHARED_CLIENTS)
    # nccl-allreduce only: how many nodes (one Pod each, every GPU of its node) the all-reduce spans.
    nodes: int | None = Field(None, ge=2, le=MAX_NODES_PER_POOL)


class TimeSlicingConfig(_Model):
    # The NVIDIA device plugin only requires >= 2 (api/config/v1/replicas.go); 48 is GKE's limit for
    # its own sharing, not the plugin's. The upper bound here only keeps the value sane.
    replicas: int = Field(ge=2, le=MAX_TIME_SLICING_REPLICAS)


class DevicePluginSharingConfig(_Model):
    time_slicing: TimeSlicingConfig


class DevicePluginConfig(_Model):
    gpu_node_label: Annotated[str, Field(max_length=400)] = "nvidia.com/gpu.present=true"
    # Taint the nodes of gpuNodes with nvidia.com/gpu=present:NoSchedule (off for a single-node
    # workstation, whose only node must also run everything else).
    taint_gpu_nodes: bool = True
    # For containerd set up with an `nvidia` runtime class that is not the default runtime.
    runtime_class_name: Annotated[str, Field(max_length=63)] | None = None
    sharing: DevicePluginSharingConfig | None = None

    @property
    def node_label_key(self) -> str:
        return self.gpu_node_label.partition("=")[0]

    @property
    def node_label_value(self) -> str:
        return self.gpu_node_label.partition("=")[2]

    @property
    def time_slicing_replicas(self) -> int | None:
        return self.sharing.time_slicing.replicas if self.sharing else None


class BatchConfig(_Model):
    # Kueue and JobSet from their Helm charts, a ResourceFlavor and a ClusterQueue per GPU pool.
    kueue: bool = False


class StackConfig(_Model):
    """All `gke-gpu:` keys of one stack file."""

    network: NetworkConfig | None = None
    cluster: ClusterConfig
    gpu_pools: Annotated[list[GpuPool], Field(max_length=MAX_POOLS)] = []
    monitoring: MonitoringConfig = MonitoringConfig()
    workloads: Annotated[list[WorkloadConfig], Field(max_length=64)] = []
    device_plugin: DevicePluginConfig | None = None
    batch: BatchConfig = BatchConfig()
    gpu_nodes: Annotated[list[Annotated[str, Field(max_length=253)]], Field(max_length=5000)] | None = None

    @field_validator("workloads", mode="before")
    @classmethod
    def _names_as_objects(cls, value: Any) -> Any:
        """`- nvidia-smi` is shorthand for `- {name: nvidia-smi}`."""
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value


# --------------------------------------------------------------------------------------------------
# Pass 1 error formatting.


def format_path(loc: Iterable[Any]) -> str:
    parts = [part if isinstance(part, int) else cut_key(str(part)) for part in loc]
    text = f"{NAMESPACE}:{parts[0]}" if parts else NAMESPACE
    for part in parts[1:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_./-]{1,40}$")


def cut_key(key: str) -> str:
    """A user-written key as it appears in a message path: plain keys as written, any other (empty,
    spaced, long, control characters) quoted and cut to about 40 characters."""
    return key if _PLAIN_KEY.fullmatch(key) else cut(key, 40)


def _model_at(model: type[BaseModel], loc: Sequence[Any], *, by_name: bool = False) -> type[BaseModel] | None:
    """The pydantic model class found by walking `loc` (aliases, or field names, and list indexes)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        match = next(
            (f for n, f in current.model_fields.items() if (n if by_name else f.alias) == part),
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


_BOUNDS = {"greater_than_equal": ">=", "less_than_equal": "<=", "greater_than": ">", "less_than": "<"}
_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping (key: value)",
    "model_type": "a mapping (key: value)",
    "model_attributes_type": "a mapping (key: value)",
}


def describe_pydantic_error(
    error: Mapping[str, Any],
    *,
    root: type[BaseModel] | None = None,
    path: Callable[[Sequence[Any]], str] | None = None,
    by_name: bool = False,
) -> str:
    """One line for one pydantic error: the key's path, the bad value (cut short), what is allowed.

    The stack file's keys by default (`gke-gpu:gpuPools[0].gpusPerNode`, against StackConfig); a
    component's args with `root`, `path` and `by_name` (`sharing.max_clients_per_gpu`)."""
    loc = list(error["loc"])
    where = (path or format_path)(loc)
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        parent = _model_at(root or StackConfig, loc[:-1], by_name=by_name)
        names = parent.model_fields.items() if parent else []
        allowed = sorted(n if by_name else (f.alias or n) for n, f in names)
        return f"{where}: unknown key; allowed keys here: {', '.join(allowed)}"
    if kind == "missing":
        return f"{where}: required"
    if kind == "literal_error":
        return f"{where}: {cut(value)} is not allowed; allowed: {ctx['expected']}"
    if kind in _BOUNDS:
        limit = next(iter(ctx.values()))
        return f"{where}: {cut(value)} is not allowed; must be {_BOUNDS[kind]} {limit}"
    if kind == "string_pattern_mismatch":
        meaning = PATTERN_MEANINGS.get(ctx.get("pattern", ""), "the expected format")
        return f"{where}: {cut(value)} is not allowed; expected {meaning}"
    if kind == "string_too_long":
        return f"{where}: {cut(value, 40)} is too long; at most {ctx.get('max_length')} characters"
    if kind == "too_long":
        return f"{where}: has {len(value)} entries; at most {ctx.get('max_length')}"
    if kind in _TYPE_NAMES:
        return f"{where}: {cut(value)} is not allowed; expected {_TYPE_NAMES[kind]}"
    return f"{where}: {cut(value)} is not allowed: {error['msg']}"


class RuleBase:
    """State shared by the rule mixins: the shape-valid config, GCP context, problems, warnings."""

    config: StackConfig
    project: str | None
    region: str | None
    stack: str
    catalog: Catalog
    problems: Problems
    warnings: list[str]
    broken: Broken
    # True once gcp:region is a known Compute Engine region: zone rules run only then.
    region_ok: bool
    # An existing cluster whose flavor is missing (reported): flavor-dependent rules are skipped.
    flavor_unknown: bool

    def indexed_pools(self) -> list[tuple[int, GpuPool]]:
        """The shape-valid pools with their index in the stack file (for the key paths)."""
        return list(zip(self.broken.pool_indexes, self.config.gpu_pools, strict=True))

    def indexed_workloads(self) -> list[tuple[int, WorkloadConfig]]:
        return list(zip(self.broken.workload_indexes, self.config.workloads, strict=True))


def dashboard_on(config: StackConfig) -> bool:
    """The dashboard defaults to on, except on a generic cluster (its metrics are not in Cloud
    Monitoring unless it runs Google's Prometheus collectors)."""
    if config.monitoring.dashboard is not None:
        return config.monitoring.dashboard
    return not (config.cluster.mode == "existing" and config.cluster.flavor == "generic")
