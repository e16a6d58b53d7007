"""Pass 1: the shape of the stack file (pydantic; camelCase keys; unknown keys forbidden)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from components.catalog import Catalog
from components.config_common import MAX_SHARED_CLIENTS, NAMESPACE, Problems

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
# Pass 1 error formatting.


def format_path(loc: Iterable[Any]) -> str:
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


def describe_pydantic_error(error: Mapping[str, Any]) -> str:
    loc = list(error["loc"])
    path = format_path(loc)
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


class RuleBase:
    """State shared by the rule mixins: the shape-valid config, GCP context, problems, warnings."""

    config: StackConfig
    project: str | None
    region: str | None
    stack: str
    catalog: Catalog
    problems: Problems
    warnings: list[str]


def dashboard_on(config: StackConfig) -> bool:
    """The dashboard defaults to on, except on a generic cluster (its metrics are not in Cloud
    Monitoring unless it runs Google's Prometheus collectors)."""
    if config.monitoring.dashboard is not None:
        return config.monitoring.dashboard
    return not (config.cluster.mode == "existing" and config.cluster.flavor == "generic")
