"""The fleet section (the stack file's `gke-gpu:fleet`): the GPU workers and the teams' queues the
manager (the stack's own cluster) dispatches to them."""

from typing import Annotated, Any, Literal

from pydantic import Field

from ..core.arg_types import ProjectId, RegionName, matching
from ..core.common import K8S_NAME
from ..core.model import StackModel, example
from ..serving.model import IMAGE_MEANING, IMAGE_REFERENCE
from ..workloads.model import MAX_MEMBERS, MAX_TEAMS, NamespaceName, TeamMember, TeamName

# Kueue's namespace on every cluster of the fleet (its chart's release namespace).
KUEUE_NAMESPACE = "kueue-system"
# MultiKueueConfig.spec.clusters holds 1 to 20 names (Kueue v0.19.2's CRD).
MAX_WORKERS = 20
# A worker's name is its MultiKueueCluster's and part of its cluster's and Secret's names.
WorkerName = matching(
    K8S_NAME, "lowercase letters, digits and hyphens, starting with a letter", max_length=24
)
Dispatcher = Literal["allAtOnce", "incremental"]
# How the manager's Kueue reaches a worker (docs/fleet.md, "Credentials"): `fleet`, through GKE's fleet
# (its ClusterProfile, Connect Gateway, Workload Identity: nothing stored); `token`, the opt-in for a
# worker outside the fleet: a ServiceAccount token the user creates, short-lived, in a Secret the
# program never holds.
WorkerAccess = Literal["fleet", "token"]
# How long a worker's Kueue waits for an admitted job's Pods before it evicts the copy (Kueue's
# waitForPodsReady.timeout), in minutes: at least 1 (Kueue defaults a zero timeout to its 30 minutes,
# K@ apis/config/v1beta2/defaults.go:104-108), at most 7 days, a flex-start node's longest run.
PodsReadyTimeoutMinutes = Annotated[int, Field(ge=1, le=7 * 24 * 60)]
PluginImage = matching(IMAGE_REFERENCE, IMAGE_MEANING, max_length=512)


class FleetQueueConfig(StackModel):
    """A team's queue on the manager: the LocalQueue `gpu-<pool>` in its namespace, dispatched to the
    workers where the team has a share of a pool of that name."""

    model_config = example(pool="h100", workers=["us-east", "eu-west"])

    pool: Annotated[str, Field(min_length=1, max_length=100)]
    # The workers it dispatches to, most preferred first (the order of its MultiKueueConfig, which the
    # incremental dispatcher follows); unset: every worker where the team has a share of the pool, in
    # the order of `workers`.
    workers: Annotated[list[WorkerName], Field(min_length=1, max_length=MAX_WORKERS)] | None = None  # type: ignore[valid-type]


class FleetTeamConfig(StackModel):
    """A team of the fleet: its namespace on the manager, its queues there, and who submits to them."""

    model_config = example(name="research", queues=[{"pool": "h100"}])

    name: Annotated[TeamName, Field(min_length=1)]
    # Defaults to the team's name; the workers' team of the same name must use the same namespace.
    namespace: Annotated[NamespaceName, Field(min_length=1)] | None = None
    queues: Annotated[list[FleetQueueConfig], Field(min_length=1, max_length=100)]
    # Who submits the team's jobs on the manager: `group:<email>` or `user:<email>`, each bound in the
    # team's namespaces there (its own and `gpudirect-<team>`) to the team role `gke-gpu-team-member`,
    # as batch.teams[].members on a cluster (workloads/team_access.py); a group needs the manager's
    # cluster.rbacSecurityGroup. Unset: nobody is bound on the manager.
    members: Annotated[list[TeamMember], Field(default_factory=list, max_length=MAX_MEMBERS)]

    @property
    def namespace_name(self) -> str:
        return self.namespace or self.name


class FleetWorkerConfig(StackModel):
    """A GPU worker: a whole gke-gpu cluster in its region. `cluster`, `network`, `gpuPools`, `batch`,
    `monitoring` and `workloads` take the keys of the stack file's sections of those names and are
    checked by the same rules, as if they were a stack file of their own."""

    model_config = example(
        name="us-east",
        region="us-east4",
        gpuPools=[{"name": "h100", "accelerator": "nvidia-h100-80gb", "gpusPerNode": 8, "maxNodes": 2}],
        batch={"kueue": True, "teams": [{"name": "research", "pools": {"h100": {"gpus": 8}}}]},
    )

    name: Annotated[WorkerName, Field(min_length=1)]  # type: ignore[valid-type]
    region: RegionName
    # The project of the worker's cluster; unset: gcp:project, the fleet's. A worker in another project
    # is outside the fleet: it needs access: token.
    project: ProjectId | None = None
    access: WorkerAccess = "fleet"
    # The worker's Kueue evicts a job whose Pods are not all ready this many minutes after admission,
    # and the manager dispatches it again: the guarantee of a pool with no capacity admission check
    # (on-demand, Spot, reservations, flex-start without queued provisioning; docs/fleet.md, "Admission
    # means capacity"). Unset: Kueue v0.19.2's default, 30 minutes, which the fleet writes into the
    # worker's Configuration.
    pods_ready_timeout_minutes: PodsReadyTimeoutMinutes | None = None
    # Unset keys as for a stack file; the name defaults to `<manager cluster>-<worker>`.
    cluster: Annotated[dict[str, Any], Field(default_factory=dict)]
    network: dict[str, Any] | None = None
    gpu_pools: Annotated[list[dict[str, Any]], Field(min_length=1, max_length=20)]
    batch: Annotated[dict[str, Any], Field(default_factory=dict)]
    # The worker's GPU monitoring (DCGM, its dashboard, its GPU alerts); unset as for a stack file.
    monitoring: dict[str, Any] | None = None
    # Samples and all-reduce tests on the worker's pools, queued by its own Kueue.
    workloads: list[Any] | None = None


class FleetConfig(StackModel):
    """A MultiKueue fleet: the stack's own cluster is the manager (no GPUs), these its workers."""

    model_config = example(
        workers=[
            {
                "name": "us-east",
                "region": "us-east4",
                "gpuPools": [
                    {"name": "h100", "accelerator": "nvidia-h100-80gb", "gpusPerNode": 8, "maxNodes": 2}
                ],
                "batch": {"kueue": True, "teams": [{"name": "research", "pools": {"h100": {"gpus": 8}}}]},
            }
        ],
        teams=[{"name": "research", "queues": [{"pool": "h100"}]}],
    )

    workers: Annotated[list[FleetWorkerConfig], Field(min_length=1, max_length=MAX_WORKERS)]
    teams: Annotated[list[FleetTeamConfig], Field(min_length=1, max_length=MAX_TEAMS)]
    # How the manager picks workers for a job (Kueue's multiKueue.dispatcherName): allAtOnce copies it
    # to every worker of its queue and the first to admit it runs it; incremental offers it to one
    # worker at a time in the queue's order, the next after 5 minutes without admission.
    dispatcher: Dispatcher = "allAtOnce"
    # The image holding Google's gcp-auth-plugin (GoogleCloudPlatform/gke-fleet-management
    # gcp-auth-plugin/, published as source only): the manager's Kueue runs it to reach the workers
    # through Connect Gateway. Required with a worker of access: fleet (docs/fleet.md, "Build the
    # credentials plugin").
    credentials_plugin_image: PluginImage | None = None  # type: ignore[valid-type]
