"""The workloads and batch sections (the stack file's `gke-gpu:workloads` and `gke-gpu:batch`)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from ..core.arg_types import ProjectId, enum_values, matching
from ..core.common import (
    K8S_NAME,
    MAX_NODES_PER_POOL,
    MAX_SHARED_CLIENTS,
    ZONE_PATTERN,
)
from ..core.model import (
    DNS_LABEL,
    TEAM_MEMBER,
    Cidr,
    StackModel,
    example,
)

# A team's training-data volumes (workloads/training_data.py; sources in training_data_rules.py).
MAX_VOLUMES = 10
# A Managed Lustre file system name: up to eight letters and digits, starting with a letter (GKE's
# Managed Lustre CSI driver reference, StorageClass `filesystem`).
LUSTRE_FILESYSTEM = r"[A-Za-z][A-Za-z0-9]{0,7}"
IPV4 = r"(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3}"


class BucketAccess(StrEnum):
    """What the team's jobs may do with a bucket's objects (the IAM role on that bucket only)."""

    READ = "read"
    """Read (roles/storage.objectViewer)."""
    READ_WRITE = "readWrite"
    """Read, create, overwrite and delete (roles/storage.objectUser)."""


class BucketProfile(StrEnum):
    """The Cloud Storage FUSE mount options a bucket is mounted with (gcsfuse's GPU samples)."""

    TRAINING = "training"
    """Reading a data set: metadata cached without limit, no file cache."""
    CHECKPOINTS = "checkpoints"
    """Writing and reading checkpoints: the file cache (parallel downloads) and streaming writes."""


VolumeName = matching(
    r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?",
    "lowercase letters, digits and hyphens, starting with a letter",
    max_length=40,
)
ZoneName = matching(ZONE_PATTERN, "a GCP zone such as us-central1-a", max_length=40)


class BucketVolumeConfig(StackModel):
    """An existing Cloud Storage bucket, mounted through GKE's Cloud Storage FUSE CSI driver."""

    model_config = example(bucket="research-training-data", access="read", profile="training")

    # The bucket's name (not gs://...): Cloud Storage's naming rules are checked (serving/bucket_name.py).
    bucket: Annotated[str, Field(min_length=1, max_length=222)]
    access: enum_values(BucketAccess) = "read"  # type: ignore[valid-type]
    profile: enum_values(BucketProfile) = "training"  # type: ignore[valid-type]


class LustreVolumeConfig(StackModel):
    """An existing Managed Lustre instance, mounted through GKE's Managed Lustre CSI driver."""

    model_config = example(
        instance="training-lustre",
        zone="us-central1-a",
        ip="10.90.0.4",
        filesystem="lustrefs",
        capacityGib=18000,
    )

    instance: Annotated[str, Field(max_length=63, pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")]
    # Managed Lustre instances are zonal.
    zone: ZoneName  # type: ignore[valid-type]
    # The instance's project; unset: the stack's (a component's `project`).
    project: ProjectId | None = None
    # The instance's mount point address and file system name (`gcloud lustre instances describe`).
    ip: Annotated[str, Field(max_length=15, pattern=rf"^{IPV4}$")]
    filesystem: Annotated[str, Field(max_length=8, pattern=rf"^{LUSTRE_FILESYSTEM}$")]
    # The instance's capacity, the PersistentVolume's size.
    capacity_gib: int = Field(ge=1, le=100_000_000)


class TeamVolumeConfig(StackModel):
    """One volume of a team's jobs: a bucket or a Lustre instance, claimed in the team's namespace."""

    model_config = example(name="training", gcs={"bucket": "research-training-data"})

    # The claim's name in the team's namespace (its PersistentVolume is `<namespace>-<name>`).
    name: VolumeName  # type: ignore[valid-type]
    gcs: BucketVolumeConfig | None = None
    lustre: LustreVolumeConfig | None = None


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
MAX_MEMBERS = 100
# `group:<email>` or `user:<email>` (workloads/team_access.py binds each to the team's role).
TeamMember = Annotated[str, Field(max_length=330, pattern=TEAM_MEMBER)]


# Kueue v0.19.2 (kubernetes-sigs/kueue@8eab6877) turns waitForPodsReady on by default: a Configuration
# without the block is defaulted to a 30-minute timeout (apis/config/v1beta2/defaults.go:48, 99-108;
# commit f3f98ea5 "enable waitForPodsReady by default"; CHANGELOG/CHANGELOG-0.19.md:215), the config
# file's decoder applying the defaults
# (pkg/config/config.go:55-66, 219-236). Only the alpha feature gate DisableWaitForPodsReady (off,
# pkg/features/kube_features.go:667-669; pkg/util/waitforpodsready/waitforpodsready.go:24-29) turns it
# off, and this program never sets it; a zero timeout is defaulted to 30 minutes too.
KUEUE_DEFAULT_PODS_READY_TIMEOUT_MINUTES = 30


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
    # The team's training data: a PersistentVolume and claim per bucket or Managed Lustre instance, and
    # for buckets a Kubernetes service account its jobs read them as (workloads/training_data.py).
    data: Annotated[list[TeamVolumeConfig], Field(default_factory=list, max_length=MAX_VOLUMES)]
    # Who may run and watch the team's jobs: each gets a RoleBinding in the team's namespaces to the
    # role `gke-gpu-team-member` (workloads/team_access.py); a group needs cluster.rbacSecurityGroup.
    # Unset: no RoleBinding (RBAC is left as it is).
    members: Annotated[list[TeamMember], Field(default_factory=list, max_length=MAX_MEMBERS)]

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
