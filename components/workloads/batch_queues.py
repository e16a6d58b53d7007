"""Kueue and JobSet, and a queue per GPU pool: gang admission for multi-node GPU jobs."""

from collections.abc import Callable
from typing import Annotated, Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field, model_validator
from pydantic.alias_generators import to_camel

from ..core.arg_types import DeviceClassName, K8sName, LabelKey
from ..core.common import GPU_RESOURCE, KeyNames, Problems, cut, listing
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.k8s import Toleration, TolerationSpec, app_labels, check_toleration
from ..core.validation import ArgsModel
from .batch_teams import (
    TOPOLOGY_LEVELS,
    TOPOLOGY_NAME,
    BatchTeam,
    Quota,
    ShareEntry,
    TeamShare,
    check_egress,
    check_members,
    check_queue_names,
    check_shares,
    check_team_names,
    queue_name,
    retry_problem,
    team_queue_name,
)
from .kueue_config import DraQuotaPerGpu, controller_chart, kueue_values
from .kueue_objects import cluster_queue, flavor
from .model import MAX_TEAMS, NamespaceName, TeamName
from .queue_admission import declare_queue_name_policy, local_queues_by_namespace
from .team_access import declare_team_role
from .team_namespaces import TEAM_LABEL, TeamSpec, declare_team

# Pinned upstream charts (../shared/reference/gke-gpu-scale-out.md, section 4): the real deploy
# installs upstream's own manifests, CRDs included. Offline the charts cannot be expanded; the
# objects declared here are checked against the CRDs vendored from the same versions
# (tests/schemas/crds/).
KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"
KUEUE_VERSION = "0.19.2"
JOBSET_CHART = "oci://registry.k8s.io/jobset/charts/jobset"
JOBSET_VERSION = "0.12.0"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"


def batch_controllers(
    parent: pulumi.Resource, name: str, kueue_values: dict[str, Any] | None
) -> tuple[pulumi.ResourceOptions, Callable[..., pulumi.ResourceOptions]]:
    """Kueue (with these chart values) and JobSet from their pinned charts, children of `parent`.
    Returns the options of an object that needs their CRDs and Kueue's webhook, and `after(*r)`:
    those options, also after the given resources (Kueue's order on create, and its reverse on
    delete: a ClusterQueue after its flavor and admission check, a LocalQueue after its
    ClusterQueue and namespace)."""
    charts = [
        controller_chart(parent, name, "kueue", KUEUE_CHART, KUEUE_VERSION, "kueue-system", kueue_values),
        controller_chart(parent, name, "jobset", JOBSET_CHART, JOBSET_VERSION, "jobset-system"),
    ]
    after_charts = pulumi.ResourceOptions(parent=parent, depends_on=charts)

    def after(*resources: pulumi.Resource) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions.merge(after_charts, pulumi.ResourceOptions(depends_on=list(resources)))

    return after_charts, after


class ProvisioningRetry(TypedDict):
    """Kueue's retries of a failed ProvisioningRequest (ProvisioningRequestConfig retryStrategy)."""

    backoff_limit_count: int
    """Retries before the workload is deactivated; 0 switches retrying off. Kueue's default: 3."""
    backoff_base_seconds: int
    """The base of the exponential backoff (about base x 2^(n-1) seconds). Kueue's default: 60."""
    backoff_max_seconds: int
    """The longest backoff. Kueue's default: 1800."""


class BatchQueue(TypedDict):
    """One GPU pool's queue: a ResourceFlavor (where its Pods go) and a ClusterQueue (how much)."""

    name: str
    """The pool's name; the flavor, ClusterQueue and LocalQueue are `gpu-<name>`."""
    node_labels: dict[str, str]
    """The labels of the pool's nodes (the flavor puts them on admitted Pods as node selectors)."""
    tolerations: list[Toleration]
    """Tolerations for the pool's taints (the flavor adds them to admitted Pods)."""
    gpus: int
    """`nvidia.com/gpu` quota: the pool's nodes at most x what each node advertises."""
    cpus: int
    """CPU quota, in cores (the pool's nodes at most x their vCPUs)."""
    memory_gib: int
    """Memory quota, in GiB (the pool's nodes at most x their memory)."""
    ephemeral_storage_gib: int
    """Ephemeral-storage quota, in GiB (the pool's nodes at most x the ephemeral storage of one: its Local
    SSDs where they back it, else its boot disk)."""
    queued_provisioning: NotRequired[bool]
    """The pool takes nodes only through ProvisioningRequests: the queue gets a
    ProvisioningRequestConfig and an AdmissionCheck. Defaults to false."""
    provisioning_retry: NotRequired[ProvisioningRetry]
    """With queued_provisioning: Kueue's retries of a failed ProvisioningRequest. Defaults to Kueue's
    (3 retries, 60 s base, 1800 s at most)."""
    shares: NotRequired[list[TeamShare]]
    """Teams' shares of the pool: each a ClusterQueue `gpu-<pool>-<team>` in the pool's cohort
    `gpu-<pool>`; the pool's own ClusterQueue keeps the rest. Defaults to none (one ClusterQueue, no
    cohort)."""
    topology: NotRequired[bool]
    """Place a job's Pods by GKE's topology node labels: the flavor points at the Topology
    `gke-default`. Defaults to false."""
    dra_quota_per_gpu: NotRequired[dict[str, int]]
    """DRA claims Kueue counts (kueue_config.py's DRA_QUOTA_CLASSES), each at this many per GPU of quota."""
    namespaces: NotRequired[list[str]]
    """With `shares`: the namespaces besides `local_queue_namespace` whose LocalQueues may use the
    pool's own ClusterQueue (e.g. the all-reduce's). Without shares any namespace may. Defaults to
    none."""


class GpuBatchQueuesArgs(TypedDict):
    queues: list[BatchQueue]
    """A queue per GPU pool (at least one)."""
    local_queue_namespace: NotRequired[str]
    """A namespace (that exists) for a LocalQueue per ClusterQueue, e.g. the samples'. Defaults to
    none."""
    teams: NotRequired[list[BatchTeam]]
    """Teams: each gets its namespace and, per queue where it has a share, a LocalQueue `gpu-<pool>`
    on its ClusterQueue; a team with no share anywhere (a default team) gets a LocalQueue per pool
    on the pool's own ClusterQueue. Defaults to none."""
    dra_device_classes: NotRequired[list[str]]
    """DeviceClasses whose ExactCount claims Kueue counts as `nvidia.com/gpu` quota (the DRA driver's
    `gpu.nvidia.com` where a pool hands out GPUs through DRA): Kueue 0.19.2 never admits a Workload
    claiming an unmapped class. Defaults to none (the chart's default Configuration)."""
    cluster_queue_metrics: NotRequired[bool]
    """Kueue reports each ClusterQueue's resource usage and quota (`metrics.enableClusterQueueResources`).
    Defaults to false."""
    pods_ready_timeout_minutes: NotRequired[int]
    """Kueue evicts and requeues an admitted job whose Pods are not all ready this many minutes after
    admission (`waitForPodsReady`, written out with Kueue's defaults for the rest of the block).
    Defaults to none: Kueue v0.19.2's own default applies, a 30-minute timeout (kueue_config.py)."""


class _ShareSpec(ArgsModel):
    team: TeamName
    gpus: int = Field(ge=0, le=100_000)
    borrowing_limit: int | None = Field(None, ge=0, le=100_000)


class _RetrySpec(ArgsModel):
    backoff_limit_count: int = Field(ge=0, le=100)
    backoff_base_seconds: int = Field(ge=1, le=86_400)
    backoff_max_seconds: int = Field(ge=1, le=604_800)


class _QueueSpec(ArgsModel):
    name: K8sName
    node_labels: dict[LabelKey, Annotated[str, Field(max_length=63)]]
    tolerations: list[TolerationSpec]
    gpus: int = Field(ge=1, le=100_000)
    cpus: int = Field(ge=1, le=10_000_000)
    memory_gib: int = Field(ge=1, le=100_000_000)
    ephemeral_storage_gib: int = Field(ge=1, le=100_000_000)
    queued_provisioning: bool = False
    provisioning_retry: _RetrySpec | None = None
    shares: Annotated[list[_ShareSpec], Field(default_factory=list, max_length=MAX_TEAMS)]
    topology: bool = False
    dra_quota_per_gpu: Annotated[DraQuotaPerGpu, Field(default_factory=dict)]
    namespaces: Annotated[list[NamespaceName], Field(default_factory=list, max_length=100)]

    @property
    def quota(self) -> Quota:
        return Quota(self.gpus, self.cpus, self.memory_gib, self.ephemeral_storage_gib)


class _GpuBatchQueuesSpec(ArgsModel):
    queues: Annotated[list[_QueueSpec], Field(min_length=1, max_length=100)]
    local_queue_namespace: K8sName | None = None
    teams: Annotated[list[TeamSpec], Field(default_factory=list, max_length=MAX_TEAMS)]
    dra_device_classes: Annotated[list[DeviceClassName], Field(max_length=8)] = Field(default_factory=list)
    cluster_queue_metrics: bool = False
    pods_ready_timeout_minutes: int | None = Field(None, ge=1, le=10_080)

    @model_validator(mode="after")
    def _unique_names(self) -> "_GpuBatchQueuesSpec":
        names = [q.name for q in self.queues]
        if len(set(names)) != len(names):
            raise ValueError("queue names must be unique")
        return self


def _queue_rules(spec: _GpuBatchQueuesSpec) -> list[str]:
    problems = Problems()
    names = KeyNames(camel=False)
    for i, queue in enumerate(spec.queues):
        for j, toleration in enumerate(queue.tolerations):
            check_toleration(f"queues[{i}].tolerations[{j}]", toleration, problems)
        retry = queue.provisioning_retry
        if retry is not None and not queue.queued_provisioning:
            problems.add(f"queues[{i}].provisioning_retry", "only allowed with queued_provisioning: true")
        elif retry is not None:
            problem = retry_problem(retry.backoff_base_seconds, retry.backoff_max_seconds, names)
            if problem:
                problems.add(f"queues[{i}].provisioning_retry.backoff_max_seconds", problem)
    check_team_names([(t.name, t.namespace) for t in spec.teams], names, problems)
    for i, team in enumerate(spec.teams):
        egress = [(e.cidr, e.excluding, e.ports) for e in team.egress]
        check_egress(egress, f"teams[{i}].egress", problems)
        check_members(team.members, f"teams[{i}].members", problems)
    teams = {t.name for t in spec.teams}
    entries: list[ShareEntry] = []
    for i, queue in enumerate(spec.queues):
        seen: set[str] = set()
        for j, share in enumerate(queue.shares):
            key = f"queues[{i}].shares[{j}]"
            if share.team not in teams:
                problems.add(
                    f"{key}.team", f"{cut(share.team)} is not a team; teams: {listing(sorted(teams))}"
                )
            elif share.team in seen:
                problems.add(f"{key}.team", f"{cut(share.team)} has two shares of queue {queue.name}")
            seen.add(share.team)
            entries.append(
                ShareEntry(
                    share.team,
                    queue.name,
                    share.gpus,
                    share.borrowing_limit,
                    f"{key}.gpus",
                    f"{key}.borrowing_limit",
                )
            )
    check_queue_names([q.name for q in spec.queues], entries, problems)
    capacity = {q.name: (q.gpus, "its gpus") for q in spec.queues}
    check_shares(capacity, entries, problems, pools_key="queues", capacity_key="the queue's gpus")
    return problems.items


class GpuBatchQueues(GkeGpuComponent[_GpuBatchQueuesSpec]):
    """Kueue and JobSet from their upstream Helm charts, and per GPU pool a ResourceFlavor (the pool's
    node labels and tolerations) and a ClusterQueue whose quota is what the pool can hold at most:
    GPUs, CPU, memory and ephemeral storage (Kueue admits only Pods whose every request is covered).
    A pool with queued provisioning gets a ProvisioningRequestConfig and an AdmissionCheck on its
    ClusterQueue, so Kueue asks GKE for the nodes before it admits a job (all of them at once).

    Jobs and JobSets are queued by the label `kueue.x-k8s.io/queue-name: <LocalQueue>`; Kueue admits a
    JobSet only when the whole of it fits the quota (and, for a queued pool, once GKE has provisioned
    all its nodes). The quota is node capacity, not allocatable: an admitted job can still wait for
    room on its nodes, and Kueue v0.19.2 evicts and requeues a job whose Pods are not all ready 30
    minutes after admission (its default `waitForPodsReady`; `pods_ready_timeout_minutes` sets another
    timeout; kueue_config.py)."""

    cluster_queue_names: pulumi.Output[list[str]]
    """The ClusterQueues, one per pool: `gpu-<pool>`."""
    local_queue_names: pulumi.Output[list[str]]
    """The LocalQueues in `local_queue_namespace` (none without it)."""
    team_local_queue_names: pulumi.Output[list[str]]
    """The teams' LocalQueues, as `<namespace>/<name>`."""

    _args_model = _GpuBatchQueuesSpec
    _args_rules = staticmethod(_queue_rules)

    def __init__(
        self,
        name: str,
        /,
        args: GpuBatchQueuesArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        dra_quota = sorted({r for q in spec.queues for r in q.dra_quota_per_gpu})
        values = kueue_values(
            spec.dra_device_classes, spec.cluster_queue_metrics, dra_quota, spec.pods_ready_timeout_minutes
        )
        after_charts, after = batch_controllers(self, name, values)

        topology = None
        if any(q.topology for q in spec.queues):
            topology = self._object(
                f"{name}-topology",
                "Topology",
                TOPOLOGY_NAME,
                {"levels": [{"nodeLabel": label} for label in TOPOLOGY_LEVELS]},
                after_charts,
            )
        role = declare_team_role(self, name) if any(t.members for t in spec.teams) else None
        team_namespaces = {t.name: declare_team(self, name, t, role) for t in spec.teams}
        cluster_queues: list[str] = []
        local_queues: list[str] = []
        team_local_queues: list[str] = []
        for queue in spec.queues:
            queue_id = queue_name(queue.name)
            prefix = f"{name}-{queue.name}"
            flavor_deps = [topology] if queue.topology and topology is not None else []
            needed = [
                self._object(
                    f"{prefix}-flavor", "ResourceFlavor", queue_id, flavor(queue), after(*flavor_deps)
                )
            ]
            admission: dict[str, object] | None = None
            if queue.queued_provisioning:
                admission_check = self._admission_check(prefix, queue, after_charts, after)
                needed.append(admission_check)
                admission = {"admissionChecks": [{"name": f"dws-{queue.name}"}]}
            parts = [queue.quota.part(share.gpus) for share in queue.shares]
            queue_object = self._object(
                f"{prefix}-cluster-queue",
                "ClusterQueue",
                queue_id,
                cluster_queue(
                    queue,
                    queue.quota.minus(parts),
                    admission=admission,
                    in_cohort=bool(queue.shares),
                    # Shared by teams: only the listed namespaces, so no team bypasses its own queue.
                    namespaces=_own_namespaces(queue, spec.local_queue_namespace) if queue.shares else None,
                    per_gpu=queue.dra_quota_per_gpu,
                ),
                after(*needed),
            )
            cluster_queues.append(queue_id)
            if spec.local_queue_namespace:
                self._object(
                    f"{prefix}-local-queue",
                    "LocalQueue",
                    queue_id,
                    {"clusterQueue": queue_id},
                    after(queue_object),
                    namespace=spec.local_queue_namespace,
                )
                local_queues.append(queue_id)
            for share, part in zip(queue.shares, parts, strict=True):
                team = next(t for t in spec.teams if t.name == share.team)
                team_queue_id = team_queue_name(queue.name, team.name)
                team_queue = self._object(
                    f"{prefix}/{team.name}-cluster-queue",
                    "ClusterQueue",
                    team_queue_id,
                    cluster_queue(
                        queue,
                        part,
                        admission=admission,
                        in_cohort=True,
                        namespaces=team.namespaces,
                        borrowing_limit=None
                        if share.borrowing_limit is None
                        else queue.quota.part(share.borrowing_limit),
                        per_gpu=queue.dra_quota_per_gpu,
                    ),
                    after(*needed),
                )
                cluster_queues.append(team_queue_id)
                for namespace in team.namespaces:
                    self._object(
                        _local_queue_resource(prefix, team, namespace),
                        "LocalQueue",
                        queue_id,
                        {"clusterQueue": team_queue_id},
                        after(team_queue, *team_namespaces[team.name]),
                        namespace=namespace,
                        team=team.name,
                    )
                    team_local_queues.append(f"{namespace}/{queue_id}")
        for team in spec.teams:
            if any(share.team == team.name for q in spec.queues for share in q.shares):
                continue
            # A team with no share (the stack's default team) queues on every pool's own ClusterQueue.
            for queue in spec.queues:
                queue_id = queue_name(queue.name)
                for namespace in team.namespaces:
                    self._object(
                        _local_queue_resource(f"{name}-{queue.name}", team, namespace),
                        "LocalQueue",
                        queue_id,
                        {"clusterQueue": queue_id},
                        after(*team_namespaces[team.name]),
                        namespace=namespace,
                        team=team.name,
                    )
                    team_local_queues.append(f"{namespace}/{queue_id}")
        if team_local_queues:
            # A Job or JobSet in a team's namespace only through one of its LocalQueues (queue_admission.py).
            declare_queue_name_policy(name, local_queues_by_namespace(team_local_queues), after_charts)
        self.cluster_queue_names = pulumi.Output.from_input(cluster_queues)
        self.local_queue_names = pulumi.Output.from_input(local_queues)
        self.team_local_queue_names = pulumi.Output.from_input(team_local_queues)
        self.register_outputs(
            {
                "clusterQueueNames": self.cluster_queue_names,
                "localQueueNames": self.local_queue_names,
                "teamLocalQueueNames": self.team_local_queue_names,
            }
        )

    def _admission_check(
        self,
        prefix: str,
        queue: _QueueSpec,
        after_charts: pulumi.ResourceOptions,
        after: Callable[..., pulumi.ResourceOptions],
    ) -> "k8s.apiextensions.CustomResource":
        """Queued provisioning: Kueue asks GKE for all of a job's nodes before it admits the job."""
        check = f"dws-{queue.name}"
        config = self._object(
            f"{prefix}-provisioning",
            "ProvisioningRequestConfig",
            check,
            {
                "provisioningClassName": QUEUED_PROVISIONING_CLASS,
                "managedResources": [GPU_RESOURCE],
                # Pin each admitted Pod to the nodes provisioned for its own request.
                "podSetUpdates": {
                    "nodeSelector": [
                        {
                            "key": "autoscaling.gke.io/provisioning-request",
                            "valueFromProvisioningClassDetail": "ResizeRequestName",
                        }
                    ]
                },
                **(
                    {"retryStrategy": {to_camel(k): v for k, v in retry.model_dump().items()}}
                    if (retry := queue.provisioning_retry)
                    else {}
                ),
            },
            after_charts,
        )
        admission: dict[str, object] = {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": check},
        }
        return self._object(f"{prefix}-admission-check", "AdmissionCheck", check, admission, after(config))

    def _object(
        self,
        resource_name: str,
        kind: str,
        object_name: str,
        spec: dict[str, object],
        opts: pulumi.ResourceOptions,
        *,
        namespace: str | None = None,
        team: str | None = None,
    ) -> "k8s.apiextensions.CustomResource":
        # A team's LocalQueue carries its name: the policy pack finds team namespaces by it.
        team_label = {TEAM_LABEL: team} if team else {}
        return k8s.apiextensions.CustomResource(
            resource_name,
            api_version=KUEUE_API,
            kind=kind,
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=object_name,
                namespace=namespace,
                labels={**app_labels(object_name, component=kind.lower()), **team_label},
            ),
            spec=spec,
            opts=opts,
        )


def _local_queue_resource(prefix: str, team: TeamSpec, namespace: str) -> str:
    """A team LocalQueue's resource name (the GPUDirect namespace's with its own suffix)."""
    suffix = "-gpudirect" if namespace != team.namespace else ""
    return f"{prefix}/{team.name}{suffix}-local-queue"


def _own_namespaces(queue: _QueueSpec, local_queue_namespace: str | None) -> list[str]:
    """The namespaces that may use a shared pool's own ClusterQueue."""
    listed = [local_queue_namespace] if local_queue_namespace else []
    return list(dict.fromkeys([*listed, *queue.namespaces]))
