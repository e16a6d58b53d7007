"""MultiKueue's manager: Kueue and JobSet, the teams' queues, each carrying a MultiKueue admission
check, and a MultiKueueCluster per worker (v1beta2, checked against the CRDs vendored from Kueue
v0.19.2 in tests/schemas/crds/), through its ClusterProfile where the worker is a member of the fleet
(manager_access.py)."""

from typing import Annotated, Any, Literal

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core.arg_types import ClusterName, K8sName, ProjectId
from ..core.common import Problems, cut, listing
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.k8s import app_labels, pod_security_labels
from ..core.validation import ArgsModel, Deferrable
from ..monitoring.kube_state_metrics import MultiKueueStateMetrics
from ..workloads.batch_queues import KUEUE_API, batch_controllers
from ..workloads.batch_teams import Quota, check_members, queue_name, team_queue_name
from ..workloads.kueue_objects import cluster_queue
from ..workloads.model import MAX_MEMBERS, NamespaceName, TeamMember, TeamName
from ..workloads.queue_admission import declare_queue_name_policy
from ..workloads.team_access import declare_team_bindings, declare_team_role
from ..workloads.team_namespaces import (
    GPUDIRECT_TEAM_LABEL,
    declare_namespace,
    gpudirect_namespace,
    team_labels,
)
from .manager_access import MEMBERSHIP, cluster_profile_name, declare_fleet_access
from .manager_args import MultiKueueManagerArgs
from .manager_config import chart_values
from .model import KUEUE_NAMESPACE, MAX_WORKERS, PluginImage, WorkerName

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"


class _WorkerSpec(ArgsModel):
    name: WorkerName
    fleet_membership: Deferrable[Annotated[str, Field(max_length=300, pattern=MEMBERSHIP)]] | None = None


class _FleetAccessSpec(ArgsModel):
    project: ProjectId
    cluster_name: ClusterName
    plugin_image: PluginImage


class _QuotaSpec(ArgsModel):
    gpus: int = Field(ge=0, le=1_000_000)
    cpus: int = Field(ge=0, le=100_000_000)
    memory_gib: int = Field(ge=0, le=1_000_000_000)
    ephemeral_storage_gib: int = Field(ge=0, le=1_000_000_000)

    def as_quota(self) -> Quota:
        return Quota(self.gpus, self.cpus, self.memory_gib, self.ephemeral_storage_gib)


class _QueueSpec(ArgsModel):
    team: TeamName
    namespace: NamespaceName
    pool: K8sName
    workers: Annotated[list[WorkerName], Field(min_length=1, max_length=MAX_WORKERS)]
    quota: _QuotaSpec
    borrowing_limit: _QuotaSpec | None = None
    gpudirect: bool = False

    @property
    def name(self) -> str:
        return self.pool

    @property
    def namespaces(self) -> list[str]:
        """Where its LocalQueues are: the team's namespace and, on a GPUDirect pool, its GPUDirect one."""
        return [self.namespace, *([gpudirect_namespace(self.team)] if self.gpudirect else [])]

    @property
    def check(self) -> str:
        return f"multikueue-{team_queue_name(self.pool, self.team)}"


class _TeamSpec(ArgsModel):
    name: TeamName
    members: Annotated[list[TeamMember], Field(min_length=1, max_length=MAX_MEMBERS)]


class _Spec(ArgsModel):
    workers: Annotated[list[_WorkerSpec], Field(min_length=1, max_length=MAX_WORKERS)]
    queues: Annotated[list[_QueueSpec], Field(min_length=1, max_length=1000)]
    teams: Annotated[list[_TeamSpec], Field(default_factory=list, max_length=1000)]
    dispatcher: Literal["allAtOnce", "incremental"] = "allAtOnce"
    fleet_access: _FleetAccessSpec | None = None

    @property
    def cluster_profiles(self) -> bool:
        return any(w.fleet_membership is not None for w in self.workers)


def _manager_rules(spec: _Spec) -> list[str]:
    problems = Problems()
    names = [w.name for w in spec.workers]
    if spec.cluster_profiles and spec.fleet_access is None:
        problems.add(
            "fleet_access",
            "required with a worker reached through its ClusterProfile (fleet_membership): how Kueue gets "
            "the credentials for it",
        )
    elif spec.fleet_access is not None and not spec.cluster_profiles:
        problems.add("fleet_access", "only allowed with a worker reached through its ClusterProfile")
    for i, name in enumerate(names):
        if name in names[:i]:
            problems.add(f"workers[{i}].name", f"{cut(name)} names two workers")
    queued = {q.team for q in spec.queues}
    for i, team in enumerate(spec.teams):
        if team.name not in queued:
            problems.add(
                f"teams[{i}].name", f"{cut(team.name)} has no queue; teams: {listing(sorted(queued))}"
            )
        elif team.name in [t.name for t in spec.teams[:i]]:
            problems.add(f"teams[{i}].name", f"{cut(team.name)} is listed twice")
        check_members(team.members, f"teams[{i}].members", problems)
    seen: set[tuple[str, str]] = set()
    for i, queue in enumerate(spec.queues):
        if (queue.team, queue.pool) in seen:
            problems.add(f"queues[{i}]", f"team {queue.team} has two queues for pool {queue.pool}")
        seen.add((queue.team, queue.pool))
        for j, worker in enumerate(queue.workers):
            if worker not in names:
                problems.add(
                    f"queues[{i}].workers[{j}]", f"{cut(worker)} is not a worker; workers: {listing(names)}"
                )
            elif worker in queue.workers[:j]:
                problems.add(f"queues[{i}].workers[{j}]", f"{cut(worker)} is listed twice")
    return problems.items


class MultiKueueManager(GkeGpuComponent[_Spec]):
    """On the manager cluster: Kueue (its Configuration with the fleet's dispatcher and its
    ClusterQueue resource metrics) and JobSet from their pinned charts, kube-state-metrics reporting
    each MultiKueueCluster's conditions and where each Workload runs (MultiKueueStateMetrics); per
    worker a MultiKueueCluster, through the worker's ClusterProfile (with `fleet_access`: Kueue's
    Google service account and Workload Identity, the credentials plugin in Kueue's Pod,
    manager_access.py) or a Secret `multikueue-<worker>` the user makes; per team queue a
    MultiKueueConfig listing its workers in order, an AdmissionCheck (controller
    `kueue.x-k8s.io/multikueue`), a ClusterQueue `gpu-<pool>-<team>` in the cohort `gpu-<pool>`
    carrying the check with the workers' summed quota, and the LocalQueue `gpu-<pool>` in the team's
    namespace. In those namespaces a Job or JobSet is admitted only through one of their LocalQueues
    (workloads/queue_admission.py), and each team's `members` are bound to the team role
    (workloads/team_access.py)."""

    worker_names: pulumi.Output[list[str]]
    """The workers, in the fleet's order (the monitoring's per-worker panels take them)."""
    cluster_queue_names: pulumi.Output[list[str]]
    cluster_profiles: pulumi.Output[dict[str, str]]
    """Each worker reached through the fleet: the ClusterProfile (`kueue-system/<name>`) it is reached by."""
    kueue_identity: pulumi.Output[str]
    """With `fleet_access`: the email of Kueue's Google service account (the workers grant it); empty
    otherwise."""

    _args_model = _Spec
    _args_rules = staticmethod(_manager_rules)

    def __init__(
        self,
        name: str,
        /,
        args: MultiKueueManagerArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        values = chart_values(spec.dispatcher, cluster_profiles=spec.cluster_profiles)
        after_charts, after = batch_controllers(self, name, values)
        # What the fleet's dashboard and worker-unreachable alert read on the manager (monitoring/fleet.py).
        MultiKueueStateMetrics(f"{name}-multikueue-state-metrics", {}, opts=after_charts)
        self.kueue_identity = pulumi.Output.from_input("")
        ready: list[pulumi.Resource] = []
        if spec.fleet_access is not None:
            account = declare_fleet_access(
                self,
                name,
                project=spec.fleet_access.project,
                cluster_name=spec.fleet_access.cluster_name,
                plugin_image=spec.fleet_access.plugin_image,
                release=f"{name}-kueue",
                after_charts=after_charts,
            )
            self.kueue_identity = account.email
            ready.append(account)

        clusters: dict[str, pulumi.Resource] = {}
        profiles: dict[str, pulumi.Output[str]] = {}
        for worker in spec.workers:
            source: dict[str, Any] = {
                "kubeConfig": {"locationType": "Secret", "location": f"multikueue-{worker.name}"}
            }
            if worker.fleet_membership is not None:
                profiles[worker.name] = pulumi.Output.from_input(worker.fleet_membership).apply(
                    cluster_profile_name
                )
                source = {"clusterProfileRef": {"name": profiles[worker.name]}}
            clusters[worker.name] = self._object(
                f"{name}-{worker.name}-cluster",
                "MultiKueueCluster",
                worker.name,
                {"clusterSource": source},
                after(*ready),
            )
        namespaces: dict[str, list[pulumi.Resource]] = {}
        for queue in spec.queues:
            if queue.namespace not in namespaces:
                labels = team_labels(queue.namespace, queue.team, "baseline")
                namespaces[queue.namespace] = declare_namespace(
                    self, f"{name}-team-{queue.team}-namespace", queue.namespace, labels
                )
            gpudirect = gpudirect_namespace(queue.team)
            if queue.gpudirect and gpudirect not in namespaces:
                namespaces[gpudirect] = declare_namespace(
                    self,
                    f"{name}-team-{queue.team}-gpudirect-namespace",
                    gpudirect,
                    _manager_gpudirect_labels(gpudirect, queue.team),
                )
        self._bind_members(name, spec, namespaces)
        flavors: dict[str, pulumi.Resource] = {}
        cluster_queues: list[str] = []
        local_queues: dict[str, list[str]] = {}
        for queue in spec.queues:
            flavor_id = queue_name(queue.pool)
            if flavor_id not in flavors:
                # Quota accounting only: the manager runs none of the Pods, so the flavor selects no node.
                flavors[flavor_id] = self._object(
                    f"{name}-{queue.pool}-flavor", "ResourceFlavor", flavor_id, {}, after_charts
                )
            prefix = f"{name}-{queue.pool}/{queue.team}"
            config = self._object(
                f"{prefix}-multikueue-config",
                "MultiKueueConfig",
                queue.check,
                {"clusters": list(queue.workers)},
                after(*(clusters[w] for w in queue.workers)),
            )
            check = self._object(
                f"{prefix}-admission-check",
                "AdmissionCheck",
                queue.check,
                {
                    "controllerName": MULTIKUEUE_CONTROLLER,
                    "parameters": {
                        "apiGroup": "kueue.x-k8s.io",
                        "kind": "MultiKueueConfig",
                        "name": queue.check,
                    },
                },
                after(config),
            )
            queue_id = team_queue_name(queue.pool, queue.team)
            cq = self._object(
                f"{prefix}-cluster-queue",
                "ClusterQueue",
                queue_id,
                cluster_queue(
                    _Flavorless(queue.pool),
                    queue.quota.as_quota(),
                    admission={"admissionChecks": [{"name": queue.check}]},
                    # As on the workers: a team borrows the others' idle quota of the pool, and
                    # reclaims its own.
                    in_cohort=True,
                    namespaces=queue.namespaces,
                    borrowing_limit=queue.borrowing_limit.as_quota() if queue.borrowing_limit else None,
                ),
                after(flavors[flavor_id], check),
            )
            cluster_queues.append(queue_id)
            for namespace in queue.namespaces:
                local_queues.setdefault(namespace, []).append(flavor_id)
            self._object(
                f"{prefix}-local-queue",
                "LocalQueue",
                flavor_id,
                {"clusterQueue": queue_id},
                after(cq, *namespaces[queue.namespace]),
                namespace=queue.namespace,
            )
            if queue.gpudirect:
                gpudirect = gpudirect_namespace(queue.team)
                self._object(
                    f"{prefix}-gpudirect-local-queue",
                    "LocalQueue",
                    flavor_id,
                    {"clusterQueue": queue_id},
                    after(cq, *namespaces[gpudirect]),
                    namespace=gpudirect,
                )
        # A Job or JobSet in a team's namespace only through one of its LocalQueues (queue_admission.py).
        declare_queue_name_policy(name, local_queues, after_charts)
        self.worker_names = pulumi.Output.from_input([w.name for w in spec.workers])
        self.cluster_profiles = pulumi.Output.all(**profiles).apply(
            lambda names: {worker: f"{KUEUE_NAMESPACE}/{name}" for worker, name in names.items()}
        )
        self.cluster_queue_names = pulumi.Output.from_input(cluster_queues)
        self.register_outputs(
            {
                "workerNames": self.worker_names,
                "clusterQueueNames": self.cluster_queue_names,
                "kueueIdentity": self.kueue_identity,
                "clusterProfiles": self.cluster_profiles,
            }
        )

    def _bind_members(self, name: str, spec: _Spec, namespaces: dict[str, list[pulumi.Resource]]) -> None:
        """Each team's members, bound to the team role in its namespaces on the manager."""
        if not spec.teams:
            return
        role = declare_team_role(self, name)
        for team in spec.teams:
            mine = list(dict.fromkeys(n for q in spec.queues if q.team == team.name for n in q.namespaces))
            declare_team_bindings(
                self,
                f"{name}-team-{team.name}",
                mine,
                team.members,
                [role, *(r for n in mine for r in namespaces[n])],
            )

    def _object(
        self,
        resource_name: str,
        kind: str,
        object_name: str,
        spec: dict[str, object],
        opts: pulumi.ResourceOptions,
        *,
        namespace: str | None = None,
    ) -> "k8s.apiextensions.CustomResource":
        return k8s.apiextensions.CustomResource(
            resource_name,
            api_version=KUEUE_API,
            kind=kind,
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=object_name, namespace=namespace, labels=app_labels(object_name, component=kind.lower())
            ),
            spec=spec,
            opts=opts,
        )


def _manager_gpudirect_labels(namespace: str, team: str) -> dict[str, str]:
    """A team's GPUDirect namespace on the manager, named and labelled as on its workers but enforcing
    Pod Security `baseline`: the manager runs none of its Pods (MultiKueue runs the job on a worker),
    and has no admission policy `gke-gpu-gpudirect-pods` to confine a `privileged` namespace.
    Enforcement applies to Pods only, so a GPUDirect Job is still accepted there; warn and audit stay
    at `privileged` so that submitting one does not warn about Pods that never run on the manager."""
    return {
        **app_labels(namespace, component="gpu-team-gpudirect"),
        GPUDIRECT_TEAM_LABEL: team,
        **pod_security_labels("baseline", "privileged"),
    }


class _Flavorless:
    """A manager queue as kueue_objects reads it: its flavor names the pool, and selects no node."""

    def __init__(self, pool: str) -> None:
        self.name = pool
        self.node_labels: dict[str, str] = {}
        self.tolerations: list[Any] = []
        self.topology = False
