"""Pass 1: the shape of the whole stack file (pydantic; camelCase keys; unknown keys forbidden).

Each section's model belongs to its domain (cluster/model.py, network/model.py, gpu/pool.py,
monitoring/model.py, workloads/model.py, gpu/device_plugin_config.py); this module composes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, field_validator

from ..cluster.model import ClusterConfig
from ..core.catalog import Catalog
from ..core.common import MAX_POOLS, Problems, cut, listing
from ..core.image_digests import ImagesConfig
from ..core.model import StackModel
from ..fleet.model import FleetConfig
from ..gpu.device_plugin_config import DevicePluginConfig
from ..gpu.pool import GpuPool
from ..monitoring.model import MonitoringConfig
from ..network.model import NetworkConfig
from ..serving.model import MAX_SERVICES, ServingConfig
from ..workloads.model import BatchConfig, WorkloadConfig
from .broken import Broken


class StackConfig(StackModel):
    """All `gke-gpu:` keys of one stack file."""

    network: NetworkConfig | None = None
    cluster: ClusterConfig
    gpu_pools: Annotated[list[GpuPool], Field(max_length=MAX_POOLS)] = []
    monitoring: MonitoringConfig = MonitoringConfig()
    workloads: Annotated[list[WorkloadConfig], Field(max_length=64)] = []
    device_plugin: DevicePluginConfig | None = None
    batch: BatchConfig = BatchConfig()
    serving: Annotated[list[ServingConfig], Field(max_length=MAX_SERVICES)] = []
    gpu_nodes: Annotated[list[Annotated[str, Field(max_length=253)]], Field(max_length=5000)] | None = None
    # A MultiKueue fleet: this stack's cluster is its manager (docs/fleet.md).
    fleet: FleetConfig | None = None
    # Digests of the images run privileged or as root on the nodes (stack/images_section.py).
    images: ImagesConfig = ImagesConfig()

    @field_validator("workloads", mode="before")
    @classmethod
    def _names_as_objects(cls, value: Any) -> Any:
        """`- nvidia-smi` is shorthand for `- {name: nvidia-smi}`."""
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value


class RuleBase:
    """State shared by the rule mixins: the shape-valid config, GCP context, problems, warnings."""

    config: StackConfig
    # Where this file's keys start: `gke-gpu:` for a stack file, `gke-gpu:fleet.workers[1].` for a
    # fleet worker's sections (checked by these rules, keyed where the user wrote them).
    root: str
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
    # The config keys the engine holds as secrets (None: not known to the caller, e.g. a test that
    # hands parse_settings a dict; the plain-text credential check then does not run).
    secret_keys: frozenset[str] | None

    def indexed_pools(self) -> list[tuple[int, GpuPool]]:
        """The shape-valid pools with their index in the stack file (for the key paths)."""
        return list(zip(self.broken.pool_indexes, self.config.gpu_pools, strict=True))

    def indexed_workloads(self) -> list[tuple[int, WorkloadConfig]]:
        return list(zip(self.broken.workload_indexes, self.config.workloads, strict=True))

    def indexed_services(self) -> list[tuple[int, ServingConfig]]:
        return list(zip(self.broken.serving_indexes, self.config.serving, strict=True))

    def unknown_pool(self, key: str, name: str, by_name: Mapping[str, GpuPool]) -> bool:
        """True when `name` is not a resolved GPU pool of the stack; reported under `key` only when
        every pool is known (a pool that failed its own checks is not named twice)."""
        if name in by_name:
            return False
        if not self.broken.any_pool() and "gpuPools" not in self.broken.sections:
            self.problems.add(key, f"{cut(name)} is not a GPU pool of this stack; pools: {listing(by_name)}")
        return True


def dashboard_on(config: StackConfig) -> bool:
    """The dashboard defaults to on, except on a generic cluster (its metrics are not in Cloud
    Monitoring unless it runs Google's Prometheus collectors)."""
    if config.monitoring.dashboard is not None:
        return config.monitoring.dashboard
    return not (config.cluster.mode == "existing" and config.cluster.flavor == "generic")
