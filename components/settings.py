"""The resolved settings handed to the components: frozen, every default filled in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .config_schema import ExistingNetworkConfig
from .gpu_pool import GpuPool

# --------------------------------------------------------------------------------------------------
# The resolved settings handed to the components (every default filled in).


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
    intranode_visibility: bool = False
    kubeconfig_endpoint: Literal["dns", "ip"] = "dns"
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
