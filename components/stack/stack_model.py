"""Pass 1: the shape of the whole stack file (pydantic; camelCase keys; unknown keys forbidden).

Each section's model belongs to its domain (cluster/model.py, network/model.py, gpu/pool.py,
monitoring/model.py, workloads/model.py, gpu/device_plugin_config.py); this module composes them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator

from ..cluster.model import ClusterConfig
from ..core.common import MAX_POOLS
from ..core.image_digests import ImagesConfig
from ..core.model import StackModel
from ..fleet.model import FleetConfig
from ..gpu.device_plugin_config import DevicePluginConfig
from ..gpu.pool import GpuPool
from ..monitoring.model import MonitoringConfig
from ..network.model import NetworkConfig
from ..serving.model import MAX_SERVICES, ServingConfig
from ..workloads.model import BatchConfig, WorkloadConfig


class StackConfig(StackModel):
    """All `gke-gpu:` keys of one stack file."""

    network: NetworkConfig | None = None
    cluster: ClusterConfig
    gpu_pools: Annotated[list[GpuPool], Field(max_length=MAX_POOLS)] = []
    monitoring: MonitoringConfig = MonitoringConfig.model_construct()
    workloads: Annotated[list[WorkloadConfig], Field(max_length=64)] = []
    device_plugin: DevicePluginConfig | None = None
    # mypy's pydantic plugin reads `teams` (its default_factory inside Annotated) as required here.
    batch: BatchConfig = BatchConfig.model_construct()  # type: ignore[call-arg]
    serving: Annotated[list[ServingConfig], Field(max_length=MAX_SERVICES)] = []
    gpu_nodes: Annotated[list[Annotated[str, Field(max_length=253)]], Field(max_length=5000)] | None = None
    # A MultiKueue fleet: this stack's cluster is its manager (docs/fleet.md).
    fleet: FleetConfig | None = None
    # Digests of the images run privileged or as root on the nodes (stack/images_section.py).
    images: ImagesConfig = ImagesConfig.model_construct()

    @field_validator("workloads", mode="before")
    @classmethod
    def _names_as_objects(cls, value: Any) -> Any:
        """`- nvidia-smi` is shorthand for `- {name: nvidia-smi}`."""
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value


def dashboard_on(config: StackConfig) -> bool:
    """The dashboard defaults to on, except on a generic cluster (its metrics are not in Cloud
    Monitoring unless it runs Google's Prometheus collectors)."""
    if config.monitoring.dashboard is not None:
        return config.monitoring.dashboard
    return not (config.cluster.mode == "existing" and config.cluster.flavor == "generic")
