"""The NVIDIA device plugin's section, for an existing generic cluster (`gke-gpu:devicePlugin`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..core.arg_types import K8sName
from ..core.common import (
    MAX_TIME_SLICING_REPLICAS,
)
from ..core.model import (
    StackModel,
    example,
)

# The NVIDIA device plugin only requires >= 2 (api/config/v1/replicas.go); 48 is GKE's limit for
# its own sharing, not the plugin's. The upper bound here only keeps the value sane.
TimeSlicingReplicas = Annotated[int, Field(ge=2, le=MAX_TIME_SLICING_REPLICAS)]


class TimeSlicingConfig(StackModel):
    model_config = example(replicas=4)

    replicas: TimeSlicingReplicas


class DevicePluginSharingConfig(StackModel):
    model_config = example(timeSlicing={"replicas": 4})

    time_slicing: TimeSlicingConfig


class DevicePluginSettings(StackModel):
    """What the stack file's `devicePlugin` section and NvidiaDevicePlugin's args share, written once."""

    # For containerd set up with an `nvidia` runtime class that is not the default runtime.
    runtime_class_name: K8sName | None = None


class _DevicePluginNodes(StackModel):
    gpu_node_label: Annotated[str, Field(max_length=400)] = "nvidia.com/gpu.present=true"
    # Taint the nodes of gpuNodes with nvidia.com/gpu=present:NoSchedule (off for a single-node
    # workstation, whose only node must also run everything else).
    taint_gpu_nodes: bool = True


class DevicePluginConfig(DevicePluginSettings, _DevicePluginNodes):
    """The stack file's `gke-gpu:devicePlugin`: the GPU nodes' label as `key=value` and the sharing in
    the plugin's own config layout (`sharing.timeSlicing.replicas`); the stack turns them into the
    args' `node_selector` and `time_slicing_replicas`."""

    model_config = example(
        gpuNodeLabel="nvidia.com/gpu.present=true", sharing={"timeSlicing": {"replicas": 4}}
    )

    sharing: DevicePluginSharingConfig | None = None

    @property
    def node_label_key(self) -> str:
        return self.gpu_node_label.partition("=")[0]

    @property
    def node_label_value(self) -> str:
        return self.gpu_node_label.partition("=")[2]

    @property
    def time_slicing_replicas(self) -> int | None:
        return self.sharing.time_slicing.replicas if self.sharing else None
