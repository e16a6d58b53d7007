"""What the stack layer hands the program: one stack file, checked, with every default resolved.

The sections are the stack file's own pydantic models (stack/stack_model.py, gpu/pool.py), returned by
the rules with their cluster-dependent defaults filled in (a cluster's name and location, a pool's
machine type and zones, the DCGM source, a workload's pool): one set of types, not a second copy.
"""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from ..cluster.model import ClusterConfig
from ..gpu.device_plugin_config import DevicePluginConfig
from ..gpu.pool import GpuPool
from ..monitoring.model import MonitoringConfig
from ..network.model import NetworkConfig
from ..serving.model import ServingConfig
from ..workloads.model import BatchConfig, WorkloadConfig

if TYPE_CHECKING:  # the fleet's plan is only read through a fleet's settings
    from ..fleet.plan import FleetPlan
    from ..fleet.rules import ResolvedWorker


@dataclass(frozen=True)
class Settings:
    project: str | None
    region: str | None
    stack: str
    cluster: ClusterConfig
    # None for an existing cluster (no network is declared for it).
    network: NetworkConfig | None
    gpu_pools: tuple[GpuPool, ...]
    monitoring: MonitoringConfig
    workloads: tuple[WorkloadConfig, ...]
    # An existing generic cluster only: the device plugin and the nodes to label.
    device_plugin: DevicePluginConfig | None = None
    gpu_nodes: tuple[str, ...] = ()
    # Kueue and JobSet, with a queue per GPU pool (Standard clusters of this stack only).
    batch: BatchConfig = field(default_factory=BatchConfig)
    # Model servers (gke-gpu:serving).
    serving: tuple[ServingConfig, ...] = ()
    # A MultiKueue fleet whose manager this cluster is (gke-gpu:fleet).
    fleet: "FleetSettings | None" = None
    # Image name (no tag) -> digest, for the images run privileged or as root (gke-gpu:images.digests).
    image_digests: dict[str, str] = field(default_factory=dict)


class FleetWorker(NamedTuple):
    """A fleet worker, resolved: the settings of its cluster (a whole gke-gpu stack, checked by a
    single-cluster stack's rules under its key) and what the fleet's rules read of it."""

    settings: Settings
    resolved: "ResolvedWorker"

    @property
    def name(self) -> str:
        return self.resolved.name


class FleetSettings(NamedTuple):
    """The fleet whose manager the stack's cluster is: its workers and the plan between them."""

    workers: tuple[FleetWorker, ...]
    plan: "FleetPlan"

    @property
    def worker_names(self) -> list[str]:
        return [w.name for w in self.workers]

    @property
    def dispatcher(self) -> str:
        return self.plan.dispatcher
