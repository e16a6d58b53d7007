"""One model per concept: where a stack file's section and a component's args name the same setting,
one model declares it (a base both inherit), so its type, bounds and default cannot drift apart."""

import inspect

import pytest
from pydantic import BaseModel

from gke_gpu.cluster.args import GkeClusterSpec
from gke_gpu.cluster.model import ClusterConfig
from gke_gpu.gpu.compute_class import GpuComputeClassSpec
from gke_gpu.gpu.device_plugin import _NvidiaDevicePluginSpec
from gke_gpu.gpu.device_plugin_config import DevicePluginConfig
from gke_gpu.gpu.node_pool import GpuNodePoolSpec
from gke_gpu.gpu.pool import GpuPool
from gke_gpu.monitoring.gpu_monitoring import _GpuMonitoringSpec
from gke_gpu.monitoring.model import MonitoringConfig
from gke_gpu.network.model import NetworkConfig
from gke_gpu.network.vpc import _GkeNetworkSpec
from gke_gpu.serving.inference_service import InferenceServiceSpec
from gke_gpu.serving.model import ServingConfig

# Settings both name but each side must declare itself, with the reason. The monitoring section leaves
# `dcgm` and `dashboard` unset to take the cluster kind's default (the component needs them decided),
# and its `alerts` adds `enabled` to the one alert-policy model the component takes (AlertPolicyConfig).
# The cluster section's name and location are optional (the stack defaults them to <project>-<stack>
# and the region); GkeCluster needs them. The GPU pool's specs narrow the pool's fields that a
# component needs decided: the GPU count, and for a node pool its name and node limit.
DECLARED_TWICE = {
    (ClusterConfig, GkeClusterSpec): {"name", "location"},
    (MonitoringConfig, _GpuMonitoringSpec): {"dcgm", "dashboard", "alerts"},
    (GpuPool, GpuNodePoolSpec): {"name", "gpus_per_node", "max_nodes"},
    (GpuPool, GpuComputeClassSpec): {"gpus_per_node"},
    # A service's name: the stack file's entry and the component each name it (the component defaults
    # it to the resource name); the stack file's replicas are a range, the component's a count.
    (ServingConfig, InferenceServiceSpec): {"name", "replicas"},
}


def _declared_once(section: type[BaseModel], spec: type[BaseModel], field: str) -> bool:
    """Exactly one class of either model's hierarchy annotates the field, and both models inherit it."""
    classes = set(section.__mro__) | set(spec.__mro__)
    declarers = [c for c in classes if field in inspect.get_annotations(c)]
    return len(declarers) == 1 and issubclass(section, declarers[0]) and issubclass(spec, declarers[0])


@pytest.mark.parametrize(
    ("section", "spec"),
    [
        (ClusterConfig, GkeClusterSpec),
        (NetworkConfig, _GkeNetworkSpec),
        (DevicePluginConfig, _NvidiaDevicePluginSpec),
        (MonitoringConfig, _GpuMonitoringSpec),
        (GpuPool, GpuNodePoolSpec),
        (GpuPool, GpuComputeClassSpec),
        (ServingConfig, InferenceServiceSpec),
    ],
    ids=lambda model: model.__name__,
)
def test_a_setting_both_name_is_declared_once(section: type[BaseModel], spec: type[BaseModel]) -> None:
    allowed = DECLARED_TWICE.get((section, spec), set())
    both = set(section.model_fields) & set(spec.model_fields)
    twice = {f for f in both if not _declared_once(section, spec, f)}
    assert twice == allowed, f"declared on each side: {sorted(twice - allowed)}; allowed: {sorted(allowed)}"
