"""The workloads and batch sections (the stack file's `gke-gpu:workloads` and `gke-gpu:batch`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..core.common import (
    MAX_NODES_PER_POOL,
    MAX_SHARED_CLIENTS,
)
from ..core.model import (
    StackModel,
)


class WorkloadConfig(StackModel):
    name: Literal["nvidia-smi", "cuda-vector-add", "pytorch-smoke", "sharing-demo", "nccl-allreduce"]
    pool: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    replicas: int | None = Field(None, ge=2, le=MAX_SHARED_CLIENTS)
    # nccl-allreduce only: how many nodes (one Pod each, every GPU of its node) the all-reduce spans.
    nodes: int | None = Field(None, ge=2, le=MAX_NODES_PER_POOL)


class BatchConfig(StackModel):
    # Kueue and JobSet from their Helm charts, a ResourceFlavor and a ClusterQueue per GPU pool.
    kueue: bool = False
