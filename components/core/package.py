"""The Pulumi package the components belong to: one name for the type tokens, the schema and the plugin.

Type tokens are ``gke-gpu:index:<Class>``: the multi-language provider accepts only the module
``index`` and finds a component's class by the token's last part. Before 0.9.0 the tokens had
modules (``gke-gpu:gpu:GpuNodePool``); each component aliases its old token so that stacks created
before 0.9.0 keep their resources (the engine applies a component's aliases to its children too).
"""

import pulumi

PACKAGE = "gke-gpu"

# The type token of each component before 0.9.0, by class name.
LEGACY_TYPES = {
    "GkeNetwork": "gke-gpu:network:GkeNetwork",
    "GkeCluster": "gke-gpu:cluster:GkeCluster",
    "ExistingCluster": "gke-gpu:cluster:ExistingCluster",
    "GpuNodePool": "gke-gpu:gpu:GpuNodePool",
    "GpuComputeClass": "gke-gpu:gpu:GpuComputeClass",
    "GpuNodeLabels": "gke-gpu:gpu:GpuNodeLabels",
    "NvidiaDevicePlugin": "gke-gpu:gpu:NvidiaDevicePlugin",
    "GpuMonitoring": "gke-gpu:monitoring:GpuMonitoring",
    "DcgmExporter": "gke-gpu:monitoring:DcgmExporter",
    "SampleWorkloads": "gke-gpu:workloads:SampleWorkloads",
}


def component_type(class_name: str) -> str:
    """The type token of a component class: ``gke-gpu:index:<class_name>``."""
    return f"{PACKAGE}:index:{class_name}"


def component_options(class_name: str, opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """The caller's options plus an alias to the component's pre-0.9.0 type token (if it had one)."""
    legacy = LEGACY_TYPES.get(class_name)
    if legacy is None:
        return opts or pulumi.ResourceOptions()
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=legacy)]))


# The public components, by class name, with the module (of this package) that defines each and
# its args TypedDict `<Class>Args`. One list for the package's exports (__init__.py), the
# multi-language plugin (provider/__main__.py), the schema tool (tools/schema.py) and the tests.
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
}


def public_components() -> list[type[pulumi.ComponentResource]]:
    """The public component classes, in PUBLIC_COMPONENTS order (imported on first call: the
    component modules import this one)."""
    import importlib

    return [
        getattr(importlib.import_module(f"gke_gpu.{module}"), cls)
        for cls, module in PUBLIC_COMPONENTS.items()
    ]
