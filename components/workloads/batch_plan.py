"""The batch layer's plan (`gke-gpu:batch`, and the all-reduce tests it queues): Kueue's queues sized from
the cluster's GPU pools and shared by the teams, the teams' training data, the all-reduce tests' args,
and the namespaces GPUDirect's admission policies and DRANET's claim templates cover, all as data with
the stack outputs (`batchQueues`, `trainingData`). Pure: stack/program_jobs.py declares what this plans.

A pool's quota is what it can hold at most: maxNodes x the `nvidia.com/gpu` each node advertises (with
sharing or MIG, the shares), x the machine's vCPUs, memory and boot disk. Kueue admits only Pods whose
every request fits, so CPU, memory and ephemeral storage are covered too. A team's share is a number of
those GPUs, with CPU, memory and storage in proportion (batch_teams.Quota)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, NotRequired, TypedDict, cast

from ..core.catalog import load_catalog
from ..dra.claims import GPU_DEVICE_CLASS, is_rack
from ..gpu.pool import GpuPool
from ..gpu.scheduling import QUEUED_TOLERATION, node_selector, tolerations
from ..gpudirect.flavors import FLAVORS, G4_NIC, GpuDirectFlavor, rdma_nic_count
from ..gpudirect.plan import AdmissionScope
from .batch_teams import (
    DEFAULT_TEAM,
    DEFAULT_TEAM_NAMESPACE,
    TOPOLOGY_NAME,
    BatchTeam,
    Quota,
    gpudirect_namespace,
    pool_quota,
    queue_name,
    team_queue_name,
    topology_default,
)
from .model import BatchConfig, TeamConfig, TeamShare, WorkloadConfig

if TYPE_CHECKING:
    from ..serving.model import ServingConfig
    from .batch_queues import GpuBatchQueuesArgs
    from .nccl_allreduce_args import NcclAllReduceArgs
    from .training_data import DataVolume, TrainingDataArgs


class TeamQueues(TypedDict):
    """A team's queues of a pool in the stack output `batchQueues[].teams` (its quota and what it may
    borrow where it has a share of the pool)."""

    team: str
    localQueue: str
    clusterQueue: str
    quota: NotRequired[dict[str, Any]]
    mayBorrowGpus: NotRequired[int]


class PoolQueues(TypedDict):
    """A pool's queues in the stack output `batchQueues`."""

    pool: str
    clusterQueue: str
    localQueue: str | None
    quota: dict[str, Any]
    admissionCheck: str | None
    cohort: str | None
    topology: str | None
    teams: list[TeamQueues]


class TeamDataSummary(TypedDict):
    """A team's row of the stack output `trainingData`."""

    namespaces: list[str]
    claims: list[str]
    serviceAccount: str | None


class BatchPlan(NamedTuple):
    """Kueue with a queue per GPU pool: GpuBatchQueues' args and the stack output `batchQueues`."""

    args: GpuBatchQueuesArgs
    summary: list[PoolQueues]


class TeamData(NamedTuple):
    """A team's training data: TrainingData's args and the team's row of the stack output."""

    team: str
    args: TrainingDataArgs
    summary: TeamDataSummary


def nccl_namespace(pool: str) -> str:
    """The namespace of the all-reduce on a pool (each NcclAllReduce creates its own)."""
    return f"gpu-nccl-{pool}"


def nccl_pools(workloads: Sequence[WorkloadConfig], pools: Sequence[GpuPool]) -> set[str]:
    """The pools an `nccl-allreduce` workload runs on."""
    first = pools[0].name if pools else ""
    return {w.pool or first for w in workloads if w.name == "nccl-allreduce"}


def team_pools(batch: BatchConfig, pools: Sequence[GpuPool]) -> list[tuple[str, str, set[str]]]:
    """Each team's name, own namespace and pools (with Kueue and no team listed: the default team, on
    every pool); none without Kueue."""
    if not batch.kueue:
        return []
    return [(t.name, t.namespace_name, set(t.pools)) for t in batch.teams] or [
        (DEFAULT_TEAM, DEFAULT_TEAM_NAMESPACE, {pool.name for pool in pools})
    ]


def topology_pools(batch: BatchConfig, pools: Sequence[GpuPool]) -> set[str]:
    """The pools whose queue places Pods by topology: as listed, or by default the GPUDirect pools whose
    nodes carry GKE's topology labels."""
    listed = batch.topology
    return set(listed if listed is not None else topology_default(tuple(pools)))


def team_data_drivers(batch: BatchConfig) -> tuple[bool, bool]:
    """Whether the teams' training data has a bucket, and a Managed Lustre instance: the CSI drivers the
    cluster needs for them."""
    volumes = [v for t in batch.teams for v in t.data] if batch.kueue else []
    return any(v.gcs for v in volumes), any(v.lustre for v in volumes)


def admission_scope(
    pools: Sequence[GpuPool],
    workloads: Sequence[WorkloadConfig],
    batch: BatchConfig,
    services: Sequence[ServingConfig] = (),
) -> AdmissionScope:
    """Where GpuDirectAdmission's policies admit what:

    * the namespaces the Pod policy confines: the all-reduce's on GPUDirect pools, each team's GPUDirect
      namespace and, beside it, the team's own (so a privileged Pod is refused there even where the
      namespace exists already and the program sets no Pod Security label on it); the device
      annotations in the all-reduce's and the teams' GPUDirect namespaces on TCPX and TCPXO pools;
    * each GPU Network (multi-networking pools), the namespaces whose Pods may attach it: the
      all-reduce's on a pool that attaches it and the GPUDirect namespace of each team with quota on
      one; G4's second network (its Pods need no privilege): the teams' own namespaces;
    * DRANET's NICs: the all-reduce's namespace on a DRANET pool and the GPUDirect namespace of each
      team with quota on one;
    * and, for both, the namespace of each model server whose Pods get the pool's GPU NICs
      (serving/pd_pool_rules.py `uses_pool_nics`: a disaggregated service's roles, a replica over
      nodes; `services`: the stack's model servers)."""
    by_name = {pool.name: pool for pool in pools}
    with_injector = (GpuDirectFlavor.TCPX, GpuDirectFlavor.TCPXO)
    injector = {p for p, pool in by_name.items() if pool.gpudirect_flavor in with_injector}
    gpudirect = {p for p, pool in by_name.items() if pool.gpudirect_flavor is not None}
    allreduce = nccl_pools(workloads, pools)
    teams = team_pools(batch, pools)
    confined: list[str] = []
    devices: list[str] = []
    for pool in sorted(allreduce & gpudirect):
        confined.append(nccl_namespace(pool))
        if pool in injector:
            devices.append(nccl_namespace(pool))
    for name, namespace, on in teams:
        if on & gpudirect:
            confined += [gpudirect_namespace(name), namespace]
        if on & injector:
            devices.append(gpudirect_namespace(name))

    servers: list[tuple[str, str]] = []
    if services:
        # Imported here: a stack without model servers does not pay for serving's rules.
        from ..serving.pd_pool_rules import uses_pool_nics

        servers = [
            (s.namespace, s.pool)
            for s in services
            if s.pool in by_name and uses_pool_nics(s, by_name[s.pool])
        ]

    def allowed(names: set[str]) -> list[str]:
        own = [nccl_namespace(p) for p in sorted(allreduce & names)]
        teams_on = [gpudirect_namespace(name) for name, _, on in teams if on & names]
        return own + teams_on + [namespace for namespace, pool in servers if pool in names]

    networks: dict[str, list[str]] = {}
    for flavor in dict.fromkeys(p.gpudirect_flavor for p in pools if p.multi_network):
        assert flavor is not None, "multi-networking pools are GPUDirect pools"
        names = {p.name for p in pools if p.multi_network and p.gpudirect_flavor == flavor}
        networks |= dict.fromkeys((nic.network_name for nic in FLAVORS[flavor].nics), allowed(names))
    second = {p.name for p in pools if p.second_network}
    if second:
        networks[G4_NIC.network_name] = [namespace for _, namespace, on in teams if on & second]
    dranet = {p.name for p in pools if p.dranet}
    return AdmissionScope(
        list(dict.fromkeys(confined)),
        list(dict.fromkeys(devices)),
        networks,
        allowed(dranet) if dranet else None,
    )


def dranet_namespaces(batch: BatchConfig, pools: Sequence[GpuPool]) -> list[str]:
    """Each team's GPUDirect namespace whose pools include a DRANET pool (the all-reduce declares its
    own): where the teams' JobSets on those pools claim the RDMA NICs (DranetClaimTemplates)."""
    dranet = {pool.name for pool in pools if pool.dranet}
    if not dranet or not batch.kueue:
        return []
    teams = [(team.name, set(team.pools)) for team in batch.teams] or [
        (DEFAULT_TEAM, {pool.name for pool in pools})
    ]
    return [gpudirect_namespace(name) for name, on in teams if on & dranet]


def training_data(
    batch: BatchConfig, pools: Sequence[GpuPool], *, project: str, cluster_name: str
) -> list[TeamData]:
    """Each team's training data (TrainingData's args) and, per team, its claims and the service account
    its jobs use (stack output `trainingData`)."""
    from .training_data import DATA_SERVICE_ACCOUNT

    planned: list[TeamData] = []
    gpudirect = {p.name for p in pools if p.gpudirect_flavor is not None}
    for team in batch.teams if batch.kueue else ():
        if not team.data:
            continue
        args: TrainingDataArgs = {
            "project": project,
            "cluster_name": cluster_name,
            "team": team.name,
            # A team on a GPUDirect pool runs its GPUDirect jobs in gpudirect-<team>: claims there too.
            "namespaces": [
                team.namespace_name,
                *([gpudirect_namespace(team.name)] if gpudirect & set(team.pools) else []),
            ],
            "volumes": [
                cast("DataVolume", volume.model_dump(exclude_none=True, by_alias=False))
                for volume in team.data
            ],
        }
        summary: TeamDataSummary = {
            "namespaces": args["namespaces"],
            "claims": [v.name for v in team.data],
            "serviceAccount": DATA_SERVICE_ACCOUNT if any(v.gcs for v in team.data) else None,
        }
        planned.append(TeamData(team.name, args, summary))
    return planned


def plan_batch(
    batch: BatchConfig,
    pools: Sequence[GpuPool],
    workloads: Sequence[WorkloadConfig],
    *,
    local_queue_namespace: str | None,
    pods_ready_timeout_minutes: int | None = None,
) -> BatchPlan:
    """Kueue, JobSet and a queue per Standard GPU pool, shared by the teams (`local_queue_namespace`:
    the samples' namespace, which gets a LocalQueue per pool; `pods_ready_timeout_minutes`: a fleet
    worker's Kueue evicts a job whose Pods are not ready in time)."""
    catalog = load_catalog()
    queues: list[Any] = []
    summary: list[PoolQueues] = []
    topology = topology_pools(batch, pools)
    allreduce = nccl_pools(workloads, pools)
    # A team on a GPUDirect pool gets a second namespace for its GPUDirect Pods (host paths, the RxDM
    # sidecar); its own namespace stays at its Pod Security level.
    gpudirect_pools = {p.name for p in pools if p.gpudirect_flavor is not None}
    teams: list[BatchTeam] = [
        {
            "name": team.name,
            "namespace": team.namespace_name,
            "create_namespace": team.create_namespace,
            "pod_security": team.pod_security,
            "gpudirect": bool(gpudirect_pools & set(team.pools)),
            "egress": [
                {"cidr": e.cidr, "excluding": e.excluding, "ports": e.ports, "protocol": e.protocol}
                for e in team.egress
            ],
            # Empty: no RoleBinding (GpuBatchQueues binds only listed members).
            "members": list(team.members),
        }
        for team in batch.teams
    ] or [
        # No teams listed: a default team, queued on every pool's own ClusterQueue.
        {"name": DEFAULT_TEAM, "namespace": DEFAULT_TEAM_NAMESPACE, "gpudirect": bool(gpudirect_pools)}
    ]
    for pool in pools:
        whole = pool_quota(pool, catalog)
        shares = [(team, team.pools[pool.name]) for team in batch.teams if pool.name in team.pools]
        queue = {
            "name": pool.name,
            "node_labels": node_selector(pool, autopilot=False),
            # GKE taints queued-provisioning nodes cloud.google.com/gke-queued=true:NoSchedule.
            "tolerations": [
                *tolerations(pool, autopilot=False),
                *([QUEUED_TOLERATION] if pool.queued_provisioning else []),
            ],
            "gpus": whole.gpus,
            "cpus": whole.cpus,
            "memory_gib": whole.memory_gib,
            "ephemeral_storage_gib": whole.ephemeral_storage_gib,
            "queued_provisioning": pool.queued_provisioning,
            **(
                {"provisioning_retry": batch.provisioning_retry.model_dump()}
                if pool.queued_provisioning and batch.provisioning_retry
                else {}
            ),
            "topology": pool.name in topology,
            # DRA claims Kueue admits only if counted: a rack's ComputeDomain channel, DRANET's NICs.
            "dra_quota_per_gpu": dra_quota_per_gpu(pool),
            # A shared pool's own queue admits only these (and the samples'): the all-reduce's.
            "namespaces": [nccl_namespace(pool.name)] if pool.name in allreduce else [],
            "shares": [
                {
                    "team": team.name,
                    "gpus": share.gpus,
                    **({"borrowing_limit": share.borrow} if share.borrow is not None else {}),
                }
                for team, share in shares
            ],
        }
        queues.append(queue)
        own = whole.minus(whole.part(share.gpus) for _, share in shares)
        summary.append(
            {
                "pool": pool.name,
                "clusterQueue": queue_name(pool.name),
                "localQueue": f"{local_queue_namespace}/{queue_name(pool.name)}"
                if local_queue_namespace
                else None,
                "quota": own.as_resources(),
                "admissionCheck": f"dws-{pool.name}" if pool.queued_provisioning else None,
                "cohort": queue_name(pool.name) if shares else None,
                "topology": TOPOLOGY_NAME if pool.name in topology else None,
                "teams": _team_summary(pool.name, whole, shares)
                if shares
                else [
                    {
                        "team": team["name"],
                        "localQueue": f"{team['namespace']}/{queue_name(pool.name)}",
                        "clusterQueue": queue_name(pool.name),
                    }
                    for team in teams
                    if not batch.teams
                ],
            }
        )
    args: GpuBatchQueuesArgs = {"queues": queues, "teams": teams}
    if any(pool.dra_gpus for pool in pools):
        # Kueue counts a DRA pool's claimed GPUs as its quota's nvidia.com/gpu (workloads/kueue_config.py).
        args["dra_device_classes"] = [GPU_DEVICE_CLASS]
    if local_queue_namespace:
        args["local_queue_namespace"] = local_queue_namespace
    if pods_ready_timeout_minutes is not None:
        args["pods_ready_timeout_minutes"] = pods_ready_timeout_minutes
    return BatchPlan(args, summary)


def dra_quota_per_gpu(pool: GpuPool) -> dict[str, int]:
    """What a pool's Pods claim through DRA besides GPUs, per GPU (workloads/kueue_config.py)."""
    from .kueue_config import CHANNEL_RESOURCE, RDMA_NIC_RESOURCE

    quota = {CHANNEL_RESOURCE: 1} if is_rack(pool.accelerator) else {}
    if pool.dranet and pool.gpudirect_flavor is not None and pool.gpus_per_node:
        quota[RDMA_NIC_RESOURCE] = -(-rdma_nic_count(pool.gpudirect_flavor) // pool.gpus_per_node)
    return quota


def _team_summary(pool: str, whole: Quota, shares: list[tuple[TeamConfig, TeamShare]]) -> list[TeamQueues]:
    """Each team's queues of a pool, its quota and what it may borrow (the stack output and render)."""
    rows: list[TeamQueues] = []
    for team, share in shares:
        others = whole.gpus - share.gpus
        borrow = others if share.borrow is None else share.borrow
        rows.append(
            {
                "team": team.name,
                "localQueue": f"{team.namespace_name}/{queue_name(pool)}",
                "clusterQueue": team_queue_name(pool, team.name),
                "quota": whole.part(share.gpus).as_resources(),
                "mayBorrowGpus": borrow,
            }
        )
    return rows


def nccl_tests(
    workloads: Sequence[WorkloadConfig], pools: Sequence[GpuPool], batch: BatchConfig
) -> list[NcclAllReduceArgs]:
    """The `nccl-allreduce` workloads, each a NcclAllReduce on its pool, queued in the pool's
    ClusterQueue."""
    planned: list[NcclAllReduceArgs] = []
    by_name = {pool.name: pool for pool in pools}
    topology = topology_pools(batch, pools)
    for workload in workloads:
        if workload.name != "nccl-allreduce":
            continue
        pool = by_name[workload.pool or pools[0].name]
        flavor = pool.gpudirect_flavor
        assert pool.machine_type and pool.gpus_per_node, "a resolved Standard pool"
        args: NcclAllReduceArgs = {
            "pool": pool.name,
            "node_selector": node_selector(pool, autopilot=False),
            "tolerations": tolerations(pool, autopilot=False),  # type: ignore[typeddict-item]
            "machine_type": pool.machine_type,
            "accelerator": pool.accelerator,
            "gpus_per_node": pool.gpus_per_node,
            "nodes": workload.nodes or 2,
            "cluster_queue": queue_name(pool.name),
            # One namespace per test: each NcclAllReduce creates its own.
            "namespace": nccl_namespace(pool.name),
            "queued": pool.queued_provisioning,
            "topology": pool.name in topology,
        }
        if pool.max_nodes is not None:
            args["max_nodes"] = pool.max_nodes
        if pool.dra_gpus:
            # The GPUs through a claim: GKE's device plugin is off there (dra/plan.py).
            args["dra_gpus"] = True
        if is_rack(pool.accelerator):
            # Within a rack the test runs over multi-node NVLink alone, through a ComputeDomain (the
            # cluster's NvidiaDraDriver has them on: dra/plan.py); the rack's RDMA NICs, if the pool
            # has them, carry traffic between racks, which one rack's test cannot measure.
            args["compute_domain"] = True
        elif flavor is not None:
            args["gpudirect"] = flavor
            if pool.dranet:
                args["gpudirect_networking"] = "dranet"
        planned.append(args)
    return planned
