"""The workloads and batch sections (the stack file's `gke-gpu:workloads` and `gke-gpu:batch`)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from ..core.arg_types import matching
from ..core.common import (
    K8S_NAME,
    MAX_NODES_PER_POOL,
    MAX_SHARED_CLIENTS,
)
from ..core.model import (
    DNS_LABEL,
    Cidr,
    StackModel,
    example,
)


class LoadFloorsConfig(StackModel):
    """serving-load's floors at its last level; each one unset: the estimate for the pool's GPU."""

    model_config = example(outputTokensPerSecond=500, ttftP99Ms=2000)

    output_tokens_per_second: float | None = Field(None, gt=0, le=1_000_000)
    ttft_p99_ms: float | None = Field(None, gt=0, le=3_600_000)
    tpot_mean_ms: float | None = Field(None, gt=0, le=60_000)


class SampleKind(StrEnum):
    """A sample GPU workload, run as a bounded Job."""

    NVIDIA_SMI = "nvidia-smi"
    """nvidia-smi and nvidia-smi -L: the driver sees the GPU."""
    CUDA_VECTOR_ADD = "cuda-vector-add"
    """CUDA's vectorAdd sample: a kernel runs."""
    PYTORCH_SMOKE = "pytorch-smoke"
    """A PyTorch matrix multiply on the GPU."""
    SHARING_DEMO = "sharing-demo"
    """Several Pods at once, each holding one shared nvidia.com/gpu."""


# The workloads a stack file may run: the samples (SampleWorkloads), then NcclAllReduce and ServingLoadTest.
WORKLOAD_NAMES = (*(kind.value for kind in SampleKind), "nccl-allreduce", "serving-load")


class WorkloadConfig(StackModel):
    model_config = example(name="nvidia-smi", pool="l4")

    name: Literal[WORKLOAD_NAMES]  # type: ignore[valid-type]
    pool: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    # serving-load only: the gke-gpu:serving entry it loads, and the floors its last level must reach.
    service: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    floors: LoadFloorsConfig | None = None
    replicas: int | None = Field(None, ge=2, le=MAX_SHARED_CLIENTS)
    # nccl-allreduce only: how many nodes (one Pod each, every GPU of its node) the all-reduce spans.
    nodes: int | None = Field(None, ge=2, le=MAX_NODES_PER_POOL)


# A team's ClusterQueue is `gpu-<pool>-<team>`, also a label value (at most 63): `gpu-` + a node pool
# name (at most 40) + `-` leaves 18 characters for the team.
MAX_TEAM_NAME = 18
MAX_TEAMS = 50


TeamName = matching(
    K8S_NAME, "lowercase letters, digits and hyphens, starting with a letter", max_length=MAX_TEAM_NAME
)
NamespaceName = matching(
    DNS_LABEL, "a Kubernetes namespace name: lowercase letters, digits and hyphens", max_length=63
)


class TeamShare(StackModel):
    """A team's share of one GPU pool: its nominal GPUs and how many more it may borrow."""

    model_config = example(gpus=8, borrow=4)

    # Nominal quota in nvidia.com/gpu (the pool's schedulable GPUs: with sharing or MIG, the shares);
    # CPU, memory and ephemeral storage are sized in the same proportion of the pool.
    gpus: int = Field(ge=0, le=100_000)
    # The most GPUs beyond its share it may borrow from idle quota in the pool's cohort; unset: any idle
    # GPU of the pool; 0: none.
    borrow: int | None = Field(None, ge=0, le=100_000)


class TeamEgressConfig(StackModel):
    """More egress for a team's Pods (both its namespaces deny egress but to GKE's DNS, their own Pods
    and the metadata server): an IPv4 range, less some blocks of it, on some ports."""

    model_config = example(cidr="0.0.0.0/0", excluding=["10.0.0.0/8"], ports=[443])

    cidr: Cidr
    excluding: Annotated[list[Cidr], Field(default_factory=list, max_length=50)]
    # Unset: every port of the protocol.
    ports: Annotated[list[Annotated[int, Field(ge=1, le=65535)]], Field(default_factory=list, max_length=50)]
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"


class TeamConfig(StackModel):
    """A team: a namespace with a LocalQueue per GPU pool it may use, and its share of each."""

    model_config = example(name="research", pools={"l4": {"gpus": 8, "borrow": 4}})

    name: Annotated[TeamName, Field(min_length=1)]  # type: ignore[valid-type]
    # Defaults to the team's name.
    namespace: Annotated[NamespaceName, Field(min_length=1)] | None = None  # type: ignore[valid-type]
    # False: the namespace exists already (the program creates only its LocalQueues).
    create_namespace: bool = True
    # The Pod Security level the team's namespace enforces (warnings and audit at restricted), whatever
    # its pools: GPUDirect's Pods run in gpudirect-<name> (workloads/team_namespaces.py).
    pod_security: Literal["baseline", "restricted"] = "baseline"
    # More egress than GKE's DNS, the team's own Pods and the metadata server (e.g. HTTPS to Google's
    # APIs for a Cloud Storage volume); unset: none.
    egress: Annotated[list[TeamEgressConfig], Field(default_factory=list, max_length=20)]
    pools: Annotated[
        dict[Annotated[str, Field(min_length=1, max_length=100)], TeamShare], Field(min_length=1)
    ]

    @property
    def namespace_name(self) -> str:
        return self.namespace or self.name


class ProvisioningRetryConfig(StackModel):
    """How Kueue asks GKE again when a ProvisioningRequest fails (ProvisioningRequestConfig
    retryStrategy, Kueue v0.19.2; its defaults here): `backoffLimitCount` retries (0: none), each after
    about base x 2^(n-1) seconds, at most `backoffMaxSeconds`."""

    model_config = example(backoffLimitCount=3, backoffBaseSeconds=60, backoffMaxSeconds=1800)

    backoff_limit_count: int = Field(3, ge=0, le=100)
    backoff_base_seconds: int = Field(60, ge=1, le=86_400)
    backoff_max_seconds: int = Field(1800, ge=1, le=604_800)


class BatchConfig(StackModel):
    model_config = example(kueue=True, teams=[{"name": "research", "pools": {"l4": {"gpus": 8}}}])

    # Kueue and JobSet from their Helm charts, a ResourceFlavor and a ClusterQueue per GPU pool.
    kueue: bool = False
    # Teams sharing the GPU pools; none: a default team (namespace gpu-jobs) on every pool's queue.
    teams: Annotated[list[TeamConfig], Field(default_factory=list, max_length=MAX_TEAMS)]
    # GPU pools whose queue places a job's Pods by GKE's topology node labels (Kueue's Topology);
    # unset: the GPUDirect pools.
    topology: (
        Annotated[list[Annotated[str, Field(min_length=1, max_length=100)]], Field(max_length=100)] | None
    ) = None
    # Queued-provisioning pools: Kueue's retries of a failed ProvisioningRequest; unset: Kueue's defaults.
    provisioning_retry: ProvisioningRetryConfig | None = None
