"""The GPU layer's plan on a cluster the program does not manage (`cluster.mode: existing`): on a generic
cluster, the labels of the GPU nodes and NVIDIA's device plugin (`gke-gpu:gpuNodes`,
`gke-gpu:devicePlugin`); on GKE, its own plugin and labels. Where the samples and the exporter find the
GPU nodes, and the commands that show the GPUs are there, as data. Pure: stack/program.py declares
what this plans."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

from ..core import images
from ..core.image_digests import digests_for
from ..core.nodes import ACCELERATOR_LABEL
from .device_plugin_config import DevicePluginConfig

if TYPE_CHECKING:
    from .device_plugin import NvidiaDevicePluginArgs
    from .node_labels import GpuNodeLabelsArgs

# The name sample workloads use for "the GPU nodes" of a cluster the program does not manage.
EXISTING_TARGET = "gpu-nodes"
GKE_DEVICE_PLUGIN_PODS = "kubectl get pods -n kube-system -l k8s-app=nvidia-gpu-device-plugin -o wide"
DEVICE_PLUGIN_PODS = "kubectl get pods -n kube-system -l app.kubernetes.io/name=nvidia-device-plugin -o wide"
DEVICE_PLUGIN_LOGS = (
    "kubectl logs -n kube-system -l app.kubernetes.io/name=nvidia-device-plugin --tail=50 --prefix"
)
# Lines the NVIDIA device plugin logs when it has found the GPUs and registered with the kubelet.
DEVICE_PLUGIN_HEALTHY_LINES = [
    "Retrieving plugins.",
    "Starting GRPC server for 'nvidia.com/gpu'",
    "Starting to serve 'nvidia.com/gpu' on /var/lib/kubelet/device-plugins/nvidia-gpu.sock",
    "Registered device plugin for 'nvidia.com/gpu' with Kubelet",
]
ALLOCATABLE_GPUS_COLUMNS_GENERIC = r"NODE:.metadata.name,GPUS:.status.allocatable.nvidia\.com/gpu"
MANAGED_DCGM_PODS = (
    "kubectl get pods -n gke-managed-system -l app.kubernetes.io/name=gke-managed-dcgm-exporter -o wide"
)


class ExistingGpuPlan(NamedTuple):
    """An existing cluster's GPU nodes: how Pods find them, what the program declares for them (a
    generic cluster's labels and device plugin), and the commands that check them."""

    generic: bool
    node_selector: Mapping[str, str] = MappingProxyType({})
    required_node_labels: Sequence[str] = ()
    runtime_class_name: str | None = None
    time_slicing_replicas: int | None = None
    labels: GpuNodeLabelsArgs | None = None
    plugin: NvidiaDevicePluginArgs | None = None
    checks: Mapping[str, str] = MappingProxyType({})

    @property
    def healthy_log_lines(self) -> list[str]:
        """What the device plugin logs once it serves the GPUs (generic clusters: the program's)."""
        return DEVICE_PLUGIN_HEALTHY_LINES if self.generic else []

    def selector_output(self) -> dict[str, list[str]] | dict[str, str]:
        """The stack output `gpuNodeSelector`: the label selector, or the labels that must exist."""
        return dict(self.node_selector) or {"exists": list(self.required_node_labels)}


def plan_existing(
    plugin: DevicePluginConfig | None, gpu_nodes: Sequence[str], image_digests: Mapping[str, str]
) -> ExistingGpuPlan:
    """A generic cluster's GPU layer (`plugin`: its device plugin's settings, resolved; `gpu_nodes`:
    the nodes to label), or GKE's (`plugin` None: GKE runs its own, and labels its GPU nodes)."""
    checks = {"allocatableGpus": f"kubectl get nodes -o custom-columns='{ALLOCATABLE_GPUS_COLUMNS_GENERIC}'"}
    if plugin is None:
        # GKE: its own device plugin and labels; any node with a GKE accelerator label is a GPU node.
        checks.update(devicePluginPods=GKE_DEVICE_PLUGIN_PODS, managedDcgm=MANAGED_DCGM_PODS)
        return ExistingGpuPlan(generic=False, required_node_labels=[ACCELERATOR_LABEL], checks=checks)
    node_selector = {plugin.node_label_key: plugin.node_label_value}
    labels: GpuNodeLabelsArgs | None = None
    if gpu_nodes:
        labels = {
            "nodes": list(gpu_nodes),
            "label_key": plugin.node_label_key,
            "label_value": plugin.node_label_value,
            "taint": plugin.taint_gpu_nodes,
        }
    plugin_args: NvidiaDevicePluginArgs = {"node_selector": node_selector}
    if plugin.time_slicing_replicas is not None:
        plugin_args["time_slicing_replicas"] = plugin.time_slicing_replicas
    if plugin.runtime_class_name is not None:
        plugin_args["runtime_class_name"] = plugin.runtime_class_name
    if digests := digests_for(dict(image_digests), [images.DEVICE_PLUGIN]):
        plugin_args["image_digests"] = digests
    checks.update(
        gpuNodesByLabel=f"kubectl get nodes -l {plugin.node_label_key}={plugin.node_label_value}",
        devicePluginPods=DEVICE_PLUGIN_PODS,
        devicePluginLogs=DEVICE_PLUGIN_LOGS,
    )
    return ExistingGpuPlan(
        generic=True,
        node_selector=node_selector,
        runtime_class_name=plugin.runtime_class_name,
        time_slicing_replicas=plugin.time_slicing_replicas,
        labels=labels,
        plugin=plugin_args,
        checks=checks,
    )
