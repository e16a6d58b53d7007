"""InferenceService's args as checked: the model every module of the service's objects reads (the
Deployment, the LeaderWorkerSet, the autoscaler, the rollout, the Pod's parts, the weights' volume and
reader), so that none of them imports the component."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..core.arg_types import K8sName, LabelKey, LabelValue, ProjectId, matching
from ..core.common import K8S_NAME, ZONE_PATTERN
from ..core.k8s import TolerationSpec
from ..core.validation import ArgsModel
from .gpu_nics import GpuNicsSpec
from .model import IMAGE_MEANING, IMAGE_REFERENCE, MAX_SERVICE_NAME, SERVICE_NAME_MEANING, ModelServerSettings

ZoneName = matching(ZONE_PATTERN, "a GCP zone such as us-central1-a", max_length=40)


class _Place(ArgsModel):
    name: matching(K8S_NAME, SERVICE_NAME_MEANING, max_length=MAX_SERVICE_NAME)  # type: ignore[valid-type]
    node_selector: Annotated[dict[LabelKey, LabelValue], Field(min_length=1, max_length=64)]
    tolerations: Annotated[list[TolerationSpec], Field(max_length=32)]
    project: ProjectId
    cluster_name: K8sName
    zones: Annotated[list[ZoneName], Field(min_length=1, max_length=26)] | None = None  # type: ignore[valid-type]
    # The replicas' GPU (an accelerator type: nvidia-l4, nvidia-h100-80gb, ...); default: the node
    # selector's cloud.google.com/gke-accelerator (service_rules.service_replica).
    accelerator: Annotated[str, Field(min_length=1, max_length=100)] | None = None


class PodSizeSpec(ArgsModel):
    """A disaggregated role's Pod size (the service's own where a role has none)."""

    cpu: float | None = Field(None, gt=0, le=1000)
    memory_gib: int | None = Field(None, ge=1, le=10_000)
    shm_gib: int | None = Field(None, ge=1, le=1000)
    disk_gib: int | None = Field(None, ge=5, le=10_000)
    weights_cache_gib: int | None = Field(None, ge=0, le=100_000)
    weights_cache_medium: Literal["memory", "disk"] | None = None


class RoleSizesSpec(ArgsModel):
    prefill: PodSizeSpec | None = None
    decode: PodSizeSpec | None = None


class InferenceServiceSpec(ModelServerSettings, _Place):
    gpus_per_node: int | None = Field(None, ge=1, le=16)
    replicas: int = Field(1, ge=1, le=100)
    max_replicas: int | None = Field(None, ge=1, le=100)
    queue_target: float = Field(5, gt=0, le=10_000)
    duty_cycle_target: float = Field(80, gt=0, le=100)
    surge: bool = False
    cpu: float = Field(4, gt=0, le=1000)
    memory_gib: int = Field(24, ge=1, le=10_000)
    shm_gib: int = Field(4, ge=1, le=1000)
    disk_gib: int = Field(50, ge=5, le=10_000)
    weights_cache_gib: int = Field(0, ge=0, le=100_000)
    weights_cache_medium: Literal["memory", "disk"] = "memory"
    image: matching(IMAGE_REFERENCE, IMAGE_MEANING, max_length=512) | None = None  # type: ignore[valid-type]
    dra_gpus: bool = False
    # The pool's GPUDirect RDMA NICs (serving/gpu_nics.py), for Pods that talk across nodes.
    gpu_nics: GpuNicsSpec | None = None
    # A disaggregated service's Pod sizes per role.
    role_sizes: RoleSizesSpec | None = None

    @property
    def gpus_per_pod(self) -> int:
        """A Pod's GPUs: the replica's, or a node's when the replica spans nodes."""
        return min(self.gpus_per_replica, self.gpus_per_node or self.gpus_per_replica)

    @property
    def nodes_per_replica(self) -> int:
        """1 for a Deployment; above it, the size of each LeaderWorkerSet group."""
        return self.gpus_per_replica // self.gpus_per_pod
