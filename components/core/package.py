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
