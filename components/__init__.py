"""gke-gpu: Pulumi components for NVIDIA GPUs on Google Kubernetes Engine.

The public components and their args are importable from the package itself::

    from gke_gpu import GpuNodePool, GpuNodePoolArgs, InvalidArgsError

They are imported on first use (module ``__getattr__``), not when ``gke_gpu`` is: importing
``gke_gpu.stack.config`` (the stack-file reader) or ``gke_gpu.core.catalog`` does not load pulumi_gcp and
pulumi_kubernetes, and the component modules, which import each other through the package, never
see it half-initialised.
"""

import importlib
import sys
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the lazy names are, for type checkers and IDEs
    import pulumi

    from .cluster.gke_cluster import GkeCluster, GkeClusterArgs
    from .core.validation import InvalidArgsError
    from .gpu.capacity_ladder import GpuCapacityLadder, GpuCapacityLadderArgs
    from .gpu.compute_class import GpuComputeClass, GpuComputeClassArgs
    from .gpu.device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
    from .gpu.image_cache_allowlist import ImageCacheAllowlist, ImageCacheAllowlistArgs
    from .gpu.node_pool import GpuNodePool, GpuNodePoolArgs
    from .gpudirect.networks import GpuDirectNetworks, GpuDirectNetworksArgs
    from .gpudirect.software import GpuDirectSoftware, GpuDirectSoftwareArgs
    from .monitoring.dcgm_exporter import DcgmExporter, DcgmExporterArgs
    from .monitoring.gpu_monitoring import GpuMonitoring, GpuMonitoringArgs
    from .network.vpc import GkeNetwork, GkeNetworkArgs
    from .serving.gateway import InferenceGateway, InferenceGatewayArgs
    from .serving.inference_service import InferenceService, InferenceServiceArgs
    from .serving.load_test import ServingLoadTest, ServingLoadTestArgs
    from .serving.lws_controller import LeaderWorkerSetController, LeaderWorkerSetControllerArgs
    from .serving.metrics_adapter import CustomMetricsAdapter, CustomMetricsAdapterArgs
    from .serving.transfer_class import HyperdiskMlTransferClass, HyperdiskMlTransferClassArgs
    from .workloads.batch_queues import GpuBatchQueues, GpuBatchQueuesArgs
    from .workloads.nccl_allreduce import NcclAllReduce, NcclAllReduceArgs
    from .workloads.samples import SampleWorkloads, SampleWorkloadsArgs
    from .workloads.training_data import TrainingData, TrainingDataArgs

# Read from the installed package's metadata on first use (module `__getattr__`): ~1 ms that a render,
# which never reads it, need not pay.
__version__: str

# The public components, by class name, with the module (of this package) that defines each and
# its args TypedDict `<Class>Args`. One list for the package's exports (here), the multi-language
# plugin (provider/__main__.py), the schema tool (tools/schema.py) and the tests. It lives at the
# top of the package, above every layer: it names modules of every domain.
PUBLIC_COMPONENTS: dict[str, str] = {
    "GkeNetwork": "network.vpc",
    "GkeCluster": "cluster.gke_cluster",
    "GpuNodePool": "gpu.node_pool",
    "GpuComputeClass": "gpu.compute_class",
    "GpuCapacityLadder": "gpu.capacity_ladder",
    "ImageCacheAllowlist": "gpu.image_cache_allowlist",
    "GpuMonitoring": "monitoring.gpu_monitoring",
    "DcgmExporter": "monitoring.dcgm_exporter",
    "NvidiaDevicePlugin": "gpu.device_plugin",
    "SampleWorkloads": "workloads.samples",
    "GpuBatchQueues": "workloads.batch_queues",
    "GpuDirectNetworks": "gpudirect.networks",
    "GpuDirectSoftware": "gpudirect.software",
    "NcclAllReduce": "workloads.nccl_allreduce",
    "InferenceService": "serving.inference_service",
    "CustomMetricsAdapter": "serving.metrics_adapter",
    "HyperdiskMlTransferClass": "serving.transfer_class",
    "ServingLoadTest": "serving.load_test",
    "LeaderWorkerSetController": "serving.lws_controller",
    "InferenceGateway": "serving.gateway",
    "ImageMirror": "serving.image_mirror",
    "NvidiaDraDriver": "dra.driver",
    "TrainingData": "workloads.training_data",
}

# Exported name -> the module (of this package) that defines it.
_LAZY: dict[str, str] = {"InvalidArgsError": "core.validation"}
for _cls, _module in PUBLIC_COMPONENTS.items():
    _LAZY[_cls] = _module
    _LAZY[f"{_cls}Args"] = _module
del _cls, _module

# Written out for type checkers and `import *`; tests/test_package_exports.py checks it against _LAZY.
__all__ = [
    "CustomMetricsAdapter",
    "CustomMetricsAdapterArgs",
    "DcgmExporter",
    "DcgmExporterArgs",
    "GkeCluster",
    "GkeClusterArgs",
    "GkeNetwork",
    "GkeNetworkArgs",
    "GpuBatchQueues",
    "GpuBatchQueuesArgs",
    "GpuCapacityLadder",
    "GpuCapacityLadderArgs",
    "GpuComputeClass",
    "GpuComputeClassArgs",
    "GpuDirectNetworks",
    "GpuDirectNetworksArgs",
    "GpuDirectSoftware",
    "GpuDirectSoftwareArgs",
    "GpuMonitoring",
    "GpuMonitoringArgs",
    "GpuNodePool",
    "GpuNodePoolArgs",
    "HyperdiskMlTransferClass",
    "HyperdiskMlTransferClassArgs",
    "ImageCacheAllowlist",
    "ImageCacheAllowlistArgs",
    "ImageMirror",
    "ImageMirrorArgs",
    "InferenceGateway",
    "InferenceGatewayArgs",
    "InferenceService",
    "InferenceServiceArgs",
    "InvalidArgsError",
    "LeaderWorkerSetController",
    "LeaderWorkerSetControllerArgs",
    "NcclAllReduce",
    "NcclAllReduceArgs",
    "NvidiaDevicePlugin",
    "NvidiaDevicePluginArgs",
    "NvidiaDraDriver",
    "NvidiaDraDriverArgs",
    "SampleWorkloads",
    "SampleWorkloadsArgs",
    "ServingLoadTest",
    "ServingLoadTestArgs",
    "TrainingData",
    "TrainingDataArgs",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = version("gke-gpu")
        return globals()[name]
    module = _LAZY.get(name)
    if module is None:
        # AttributeError (not ImportError) so that `from . import images` falls through to the submodule.
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def public_components() -> list[type["pulumi.ComponentResource"]]:
    """The public component classes, in PUBLIC_COMPONENTS order (each module imported on first use)."""
    package = sys.modules[__name__]
    return [getattr(package, name) for name in PUBLIC_COMPONENTS]


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, "__version__"})
