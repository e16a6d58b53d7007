"""The fleet's plan: its section and its resolved workers turned into what its components take and
what the stack shows, as data. No resource is declared here; the stack layer wires the plan's args to
the clusters' providers and outputs.

Kueue v0.19.2 is kubernetes-sigs/kueue@8eab6877 (K@ below).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, NotRequired, TypedDict

from ..core.catalog import Catalog, load_catalog
from ..workloads.batch_teams import Quota, gpudirect_namespace, pool_quota
from .manager_args import ManagerQueue, ManagerQuota, ManagerTeam
from .model import KUEUE_NAMESPACE, FleetConfig
from .rules import FleetQueue, ResolvedWorker, capacity, most_gpus

AdmissionCheck = Literal["ProvisioningRequest", "waitForPodsReady"]
# What MultiKueue writes on the job it creates on a worker (K@ pkg/controller/jobframework/utils.go:231-259,
# SetMultiKueueMeta, called by the Job and JobSet adapters: job_multikueue_adapter.go:101,
# jobset_multikueue_adapter.go:68): the origin label, also on the remote Workload (K@
# apis/kueue/v1beta2/multikueue_types.go:29; workload.go cloneForCreate), and the Workload's name as
# the prebuilt-workload-name **annotation**, since the gate WorkloadIdentifierAnnotations is Beta and on
# (K@ pkg/features/kube_features.go:884-886; the label only with the gate off, or for a name over 63
# characters: constants.go:29-39). The remote job keeps its name, labels and annotations
# (K@ pkg/util/api/api.go:50-57).
PREBUILT_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/prebuilt-workload-name"
MULTIKUEUE_ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
# The manager's MultiKueueManager resource: its Kueue release is `<name>-kueue` (fleet/manager.py), whose
# controller Deployment is `<fullname>-controller-manager` (manager_access.kueue_fullname; a test holds
# the two together).
MANAGER_RESOURCE = "fleet"
MANAGER_KUEUE_CONTROLLER = "fleet-kueue-controller-manager"
CLUSTER_PROFILE_CRD = "clusterprofiles.multicluster.x-k8s.io"


class WorkerAccess(TypedDict):
    """How the manager reaches a worker (the stack output `fleet.workers[].access`): its fleet
    membership, or for a token the commands the user runs and the endpoint the kubeconfig names."""

    mode: Literal["fleet", "token"]
    membership: NotRequired[Any]
    note: NotRequired[str]
    createToken: NotRequired[str]
    storeKubeconfig: NotRequired[str]
    endpoint: NotRequired[Any]


class PoolAdmission(NamedTuple):
    """How a worker's pool behind a fleet queue admits a job only when it can run it, and why."""

    worker: str
    pool: str
    check: AdmissionCheck
    why: str


class FleetPlan(NamedTuple):
    """The fleet, resolved: its queues, each worker's admission guarantees, the dispatcher."""

    queues: tuple[FleetQueue, ...]
    dispatcher: str
    admissions: tuple[PoolAdmission, ...]
    workers: tuple[ResolvedWorker, ...]
    credentials_plugin_image: str | None = None
    # Each team's members, bound on the manager (FleetTeamConfig.members); teams without any left out.
    members: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def worker(self, name: str) -> ResolvedWorker:
        return next(w for w in self.workers if w.name == name)

    def job_namespaces(self, worker: str) -> list[str]:
        """Where MultiKueue creates jobs on the worker: the namespaces of the queues it serves (a job is
        created in the namespace it was submitted from, K@ site/.../setup_multikueue.md)."""
        found: list[str] = []
        for queue in self.queues:
            if worker in queue.workers:
                found += [queue.namespace, *([gpudirect_namespace(queue.team)] if queue.gpudirect else [])]
        return list(dict.fromkeys(found))

    def through_fleet(self) -> list[str]:
        """The workers the manager reaches through GKE's fleet (no stored credential)."""
        return [w.name for w in self.workers if w.access == "fleet"]


def admission(worker: ResolvedWorker, pool_name: str) -> PoolAdmission:
    """How the worker's pool admits a fleet job only when it can run it, and why: on a
    queued-provisioning pool, once Dynamic Workload Scheduler has its nodes; on any other, Kueue's
    readiness timeout, which every worker has (Kueue v0.19.2 turns it on by default; the fleet writes
    it into each worker's Configuration, docs/fleet.md "Admission means capacity")."""
    pool = worker.pool(pool_name)
    assert pool is not None
    if pool.queued_provisioning:
        return PoolAdmission(
            worker.name,
            pool_name,
            "ProvisioningRequest",
            f"{capacity(pool)}: the worker's ClusterQueue admits a job only once Dynamic Workload Scheduler "
            f"has provisioned its nodes (admission check dws-{pool_name}), so the first worker to admit is "
            "one that can run it",
        )
    minutes = worker.readiness_timeout_minutes
    source = (
        "podsReadyTimeoutMinutes"
        if worker.pods_ready_timeout_minutes is not None
        else "Kueue's default, written into the worker's Configuration"
    )
    later = (
        "its flex-start nodes come after admission, when GKE finds them"
        if pool.flex_start
        else "no capacity check exists for such a pool"
    )
    return PoolAdmission(
        worker.name,
        pool_name,
        "waitForPodsReady",
        f"{capacity(pool)}: {later}; the worker's Kueue evicts a job whose Pods are not all ready "
        f"{minutes} minutes after admission ({source}), and the manager dispatches it again "
        "(MultiKueueRedoAdmissionOnEvictionInWorker, GA in Kueue 0.18)"
        + (
            "; queuedProvisioning: true would admit it only once its nodes are coming"
            if pool.flex_start
            else ""
        ),
    )


def plan_fleet(
    fleet: FleetConfig, workers: Sequence[ResolvedWorker], queues: Sequence[FleetQueue]
) -> FleetPlan:
    by_name = {w.name: w for w in workers}
    admissions: dict[tuple[str, str], PoolAdmission] = {}
    for queue in queues:
        for name in queue.workers:
            admissions.setdefault((name, queue.pool), admission(by_name[name], queue.pool))
    return FleetPlan(
        tuple(queues),
        fleet.dispatcher,
        tuple(admissions.values()),
        tuple(workers),
        fleet.credentials_plugin_image,
        tuple((t.name, tuple(t.members)) for t in fleet.teams if t.members),
    )


def manager_teams(plan: FleetPlan) -> list[ManagerTeam]:
    """The teams with members, as MultiKueueManager takes them (their RoleBindings on the manager)."""
    return [{"name": team, "members": list(members)} for team, members in plan.members]


def team_quotas(
    worker: ResolvedWorker, team: str, pool_name: str, catalog: Catalog | None = None
) -> tuple[Quota, Quota | None]:
    """The team's share of the worker's pool, and what it may borrow beyond it (None: any idle quota)."""
    pool = worker.pool(pool_name)
    found = worker.team(team)
    assert pool is not None and found is not None
    share = found.pools[pool_name]
    whole = pool_quota(pool, catalog or load_catalog())
    return whole.part(share.gpus), None if share.borrow is None else whole.part(share.borrow)


def _as_args(quota: Quota) -> ManagerQuota:
    return {
        "gpus": quota.gpus,
        "cpus": quota.cpus,
        "memory_gib": quota.memory_gib,
        "ephemeral_storage_gib": quota.ephemeral_storage_gib,
    }


def manager_queues(plan: FleetPlan, catalog: Catalog | None = None) -> list[ManagerQueue]:
    """Each team queue on the manager: the sum of the team's shares on its workers, and of what it may
    borrow there (Kueue's docs: the manager's quota should equal the workers' total, K@
    site/content/en/docs/concepts/multikueue.md:34-38), in a cohort per pool as on the workers."""
    catalog = catalog or load_catalog()
    queues: list[ManagerQueue] = []
    for queue in plan.queues:
        parts = [team_quotas(plan.worker(w), queue.team, queue.pool, catalog) for w in queue.workers]
        entry: ManagerQueue = {
            "team": queue.team,
            "namespace": queue.namespace,
            "pool": queue.pool,
            "workers": list(queue.workers),
            "quota": _as_args(Quota.total(nominal for nominal, _ in parts)),
        }
        limits = [limit for _, limit in parts]
        if all(limit is not None for limit in limits):
            entry["borrowing_limit"] = _as_args(Quota.total(limit for limit in limits if limit is not None))
        if queue.gpudirect:
            entry["gpudirect"] = True
        queues.append(entry)
    return queues


def team_rows(plan: FleetPlan, catalog: Catalog | None = None) -> list[dict[str, Any]]:
    """Per team queue: the queue on the manager and the workers it can run on, each with its GPUs, its
    capacity and the check that makes its admission mean capacity (the stack output and the render's
    summary)."""
    catalog = catalog or load_catalog()
    admissions = {(a.worker, a.pool): a for a in plan.admissions}
    rows = []
    for queue, quota in zip(plan.queues, manager_queues(plan, catalog), strict=True):
        workers = []
        for name in queue.workers:
            worker = plan.worker(name)
            pool = worker.pool(queue.pool)
            assert pool is not None
            team_gpus = team_quotas(worker, queue.team, queue.pool, catalog)[0].gpus
            workers.append(
                {
                    "worker": name,
                    "region": worker.region,
                    "accelerator": pool.accelerator,
                    "gpusPerNode": pool.schedulable_gpus_per_node,
                    "teamGpus": team_gpus,
                    "mayBorrowGpus": most_gpus(worker, queue.team, queue.pool) - team_gpus,
                    "capacity": capacity(pool),
                    "admission": admissions[(name, queue.pool)].check,
                    "admissionWhy": admissions[(name, queue.pool)].why,
                }
            )
        rows.append(
            {
                "team": queue.team,
                "localQueue": f"{queue.namespace}/{queue.local_queue}",
                # Where its GPUDirect jobs are submitted (the workers run their Pods there).
                **(
                    {"gpudirectLocalQueue": f"{gpudirect_namespace(queue.team)}/{queue.local_queue}"}
                    if queue.gpudirect
                    else {}
                ),
                "clusterQueue": queue.cluster_queue,
                "admissionCheck": queue.check,
                "gpus": quota["quota"]["gpus"],
                "workers": workers,
            }
        )
    return rows


def follow_commands(plan: FleetPlan, worker: ResolvedWorker) -> dict[str, str]:
    """How to follow a job from the manager to this worker's Pods: on the manager (kubectl's context:
    the manager's cluster), then on the worker. `<namespace>` is the job's (the worker's job
    namespaces are listed beside), `<workload>` its Workload on the manager."""
    cluster = worker.cluster
    queued = any(a.check == "ProvisioningRequest" for a in plan.admissions if a.worker == worker.name)
    commands = {
        # Quoted: the shell would take the filters' parentheses as its own.
        "managerWorkloads": (
            "kubectl -n <namespace> get workloads -o custom-columns='NAME:.metadata.name,"
            "WORKER:.status.clusterName,NOMINATED:.status.nominatedClusterNames,"
            'ADMITTED:.status.conditions[?(@.type=="Admitted")].status\''
        ),
        "managerWorkerActive": (
            f"kubectl get multikueuecluster {worker.name} -o jsonpath="
            '\'{range .status.conditions[?(@.type=="Active")]}{.status} {.reason} {.message}{"\\n"}{end}\''
        ),
        "workerCredentials": (
            f"gcloud container clusters get-credentials {cluster.name} --location {cluster.location} "
            f"--project {worker.project} --dns-endpoint"
        ),
        "workerWorkloads": (
            f"kubectl -n <namespace> get workloads -l {MULTIKUEUE_ORIGIN_LABEL} -o custom-columns="
            "'NAME:.metadata.name,QUEUE:.spec.queueName,"
            'ADMITTED:.status.conditions[?(@.type=="Admitted")].status,'
            'PODS_READY:.status.conditions[?(@.type=="PodsReady")].status\''
        ),
        # The jobs MultiKueue created, each with its manager's Workload (an annotation: no label selects it).
        "workerJobs": (
            f"kubectl -n <namespace> get jobs,jobsets -l {MULTIKUEUE_ORIGIN_LABEL} -o custom-columns="
            "'KIND:.kind,NAME:.metadata.name,WORKLOAD:.metadata.annotations."
            + PREBUILT_WORKLOAD_ANNOTATION.replace(".", "\\.")
            + "'"
        ),
        "workerPods": "kubectl -n <namespace> get pods -o wide -l batch.kubernetes.io/job-name=<job>",
    }
    if worker.access == "fleet":
        # Kueue reads ClusterProfiles only if their CRD existed when it started (K@
        # pkg/config/config.go:254-259); GKE's sync installs it some time after the manager exists.
        controller = f"deployment/{MANAGER_KUEUE_CONTROLLER}"
        commands["managerClusterProfiles"] = (
            f"kubectl get crd {CLUSTER_PROFILE_CRD} && kubectl -n {KUEUE_NAMESPACE} get clusterprofiles"
        )
        commands["managerKueueSkippedClusterProfiles"] = (
            f"kubectl -n {KUEUE_NAMESPACE} logs {controller} | grep -e 'Skipping MultiKueue ClusterProfile' "
            "-e 'if kind is a CRD'"
        )
        commands["managerKueueRestart"] = f"kubectl -n {KUEUE_NAMESPACE} rollout restart {controller}"
    if queued:
        commands["workerProvisioningRequests"] = "kubectl -n <namespace> get provisioningrequests"
    return commands


def needs_peering(worker: ResolvedWorker) -> bool:
    """Whether the manager reaches the worker over VPC peering: a token-access worker's endpoint, read
    from a kubeconfig Secret; a fleet-access worker is reached through Connect Gateway, with no peering."""
    return worker.access == "token"


def access_summary(worker: ResolvedWorker, *, membership: Any, endpoint: Any) -> WorkerAccess:
    """How the manager reaches the worker (its fleet `membership`, or for a token what the user does:
    the worker's private `endpoint` over VPC peering), as the stack output `fleet.workers[].access`."""
    if worker.access == "fleet":
        return {"mode": "fleet", "membership": membership}
    from .worker_access import ACCOUNT

    secret = f"multikueue-{worker.name}"
    context = f"gke_{worker.project}_{worker.cluster.location}_{worker.cluster.name}"
    return {
        "mode": "token",
        "note": (
            f"the manager's Kueue reads the worker's kubeconfig from Secret {KUEUE_NAMESPACE}/{secret}, "
            "which the program never holds: create a short-lived token on the worker and store the "
            "kubeconfig on the manager, again before the token expires"
        ),
        "createToken": (
            f"kubectl --context {context} -n {KUEUE_NAMESPACE} create token {ACCOUNT} --duration=24h"
        ),
        "storeKubeconfig": (
            f"kubectl -n {KUEUE_NAMESPACE} create secret generic {secret} --from-file=kubeconfig=<file> "
            "--dry-run=client -o yaml | kubectl apply -f -"
        ),
        # The kubeconfig's server: https://<this>, the control plane's private endpoint, over VPC peering.
        "endpoint": endpoint,
    }
