"""The stack's batch layer (`gke-gpu:batch`): Kueue's queues sized from the stack's GPU pools."""

from typing import Any, cast

import pulumi

from ..core.catalog import load_catalog
from ..dra.claims import GPU_DEVICE_CLASS, is_rack
from ..gpu.pool import GpuPool
from ..gpu.scheduling import QUEUED_TOLERATION, node_selector, tolerations
from ..gpudirect.flavors import FLAVORS, GpuDirectFlavor
from ..gpudirect.g4_network import G4_NIC
from ..serving.pd_pool_rules import uses_pool_nics
from ..workloads.batch_queues import GpuBatchQueues, GpuBatchQueuesArgs
from ..workloads.batch_teams import (
    DEFAULT_TEAM,
    DEFAULT_TEAM_NAMESPACE,
    TOPOLOGY_NAME,
    BatchTeam,
    Quota,
    pool_quota,
    queue_name,
    team_queue_name,
    topology_default,
)
from ..workloads.kueue_config import CHANNEL_RESOURCE, RDMA_NIC_RESOURCE
from ..workloads.model import TeamConfig, TeamShare
from ..workloads.nccl_allreduce import NcclAllReduce
from ..workloads.nccl_allreduce_args import NcclAllReduceArgs
from ..workloads.nccl_allreduce_network import rdma_nic_count
from ..workloads.team_namespaces import gpudirect_namespace
from ..workloads.training_data import DATA_SERVICE_ACCOUNT, DataVolume, TrainingData, TrainingDataArgs
from .declare import declare
from .settings import AdmissionScope, Settings


def nccl_namespace(pool: str) -> str:
    """The namespace of the all-reduce on a pool (each NcclAllReduce creates its own)."""
    return f"gpu-nccl-{pool}"


def nccl_pools(settings: Settings) -> set[str]:
    """The pools an `nccl-allreduce` workload runs on."""
    first = settings.gpu_pools[0].name if settings.gpu_pools else ""
    return {w.pool or first for w in settings.workloads if w.name == "nccl-allreduce"}


def team_pools(settings: Settings) -> list[tuple[str, str, set[str]]]:
    """Each team's name, own namespace and pools (with Kueue and no team listed: the default team, on
    every pool); none without Kueue."""
    if not settings.batch.kueue:
        return []
    return [(t.name, t.namespace_name, set(t.pools)) for t in settings.batch.teams] or [
        (DEFAULT_TEAM, DEFAULT_TEAM_NAMESPACE, {pool.name for pool in settings.gpu_pools})
    ]


def admission_scope(settings: Settings) -> AdmissionScope:
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
      nodes)."""
    pools = {pool.name: pool for pool in settings.gpu_pools}
    with_injector = (GpuDirectFlavor.TCPX, GpuDirectFlavor.TCPXO)
    injector = {p for p, pool in pools.items() if pool.gpudirect_flavor in with_injector}
    gpudirect = {p for p, pool in pools.items() if pool.gpudirect_flavor is not None}
    allreduce = nccl_pools(settings)
    teams = team_pools(settings)
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

    servers = [
        (s.namespace, s.pool)
        for s in settings.serving
        if s.pool in pools and uses_pool_nics(s, pools[s.pool])
    ]

    def allowed(names: set[str]) -> list[str]:
        own = [nccl_namespace(p) for p in sorted(allreduce & names)]
        teams_on = [gpudirect_namespace(name) for name, _, on in teams if on & names]
        return own + teams_on + [namespace for namespace, pool in servers if pool in names]

    networks: dict[str, list[str]] = {}
    for flavor in dict.fromkeys(p.gpudirect_flavor for p in settings.gpu_pools if p.multi_network):
        assert flavor is not None, "multi-networking pools are GPUDirect pools"
        names = {p.name for p in settings.gpu_pools if p.multi_network and p.gpudirect_flavor == flavor}
        networks |= dict.fromkeys((nic.network_name for nic in FLAVORS[flavor].nics), allowed(names))
    second = {p.name for p in settings.gpu_pools if p.second_network}
    if second:
        networks[G4_NIC.network_name] = [namespace for _, namespace, on in teams if on & second]
    dranet = {p.name for p in settings.gpu_pools if p.dranet}
    return AdmissionScope(
        list(dict.fromkeys(confined)),
        list(dict.fromkeys(devices)),
        networks,
        allowed(dranet) if dranet else None,
    )


def team_data_drivers(settings: Settings) -> tuple[bool, bool]:
    """Whether the teams' training data has a bucket, and a Managed Lustre instance: the CSI drivers the
    cluster needs for them."""
    volumes = [v for t in settings.batch.teams for v in t.data] if settings.batch.kueue else []
    return any(v.gcs for v in volumes), any(v.lustre for v in volumes)


def training_data(
    settings: Settings,
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
    prefix: str = "",
) -> dict[str, Any]:
    """Declare each team's training data (after its namespace: `depends_on`); return, per team, its
    claims and the service account its jobs use (stack output `trainingData`)."""
    summary: dict[str, Any] = {}
    gpudirect = {p.name for p in settings.gpu_pools if p.gpudirect_flavor is not None}
    for team in settings.batch.teams if settings.batch.kueue else ():
        if not team.data:
            continue
        args: TrainingDataArgs = {
            "project": settings.project or "",
            "cluster_name": settings.cluster.name or "",
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
        declare(
            TrainingData,
            f"{prefix}data-{team.name}",
            args,
            opts=pulumi.ResourceOptions(provider=provider, depends_on=depends_on),
        )
        summary[team.name] = {
            "namespaces": args["namespaces"],
            "claims": [v.name for v in team.data],
            "serviceAccount": DATA_SERVICE_ACCOUNT if any(v.gcs for v in team.data) else None,
        }
    return summary


def topology_pools(settings: Settings) -> set[str]:
    """The pools whose queue places Pods by topology: as listed, or by default the GPUDirect pools whose
    nodes carry GKE's topology labels."""
    listed = settings.batch.topology
    return set(listed if listed is not None else topology_default(settings.gpu_pools))


def batch_queues(
    settings: Settings,
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
    *,
    local_queue_namespace: str | None,
    prefix: str = "",
    pods_ready_timeout_minutes: int | None = None,
) -> tuple[list[dict[str, Any]], GpuBatchQueues]:
    """Declare Kueue, JobSet and a queue per Standard GPU pool, shared by the teams; return the queues
    as a stack output, and the component (what a queued workload waits for).

    A pool's quota is what it can hold at most: maxNodes x the `nvidia.com/gpu` each node advertises
    (with sharing or MIG, the shares), x the machine's vCPUs, memory and boot disk. Kueue admits only
    Pods whose every request fits, so CPU, memory and ephemeral storage are covered too. A team's share
    is a number of those GPUs, with CPU, memory and storage in proportion (batch_teams.Quota)."""
    catalog = load_catalog()
    queues: list[Any] = []
    summary: list[dict[str, Any]] = []
    batch = settings.batch
    topology = topology_pools(settings)
    # A team on a GPUDirect pool gets a second namespace for its GPUDirect Pods (host paths, the RxDM
    # sidecar); its own namespace stays at its Pod Security level.
    gpudirect_pools = {p.name for p in settings.gpu_pools if p.gpudirect_flavor is not None}
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
    for pool in settings.gpu_pools:
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
            "namespaces": [nccl_namespace(pool.name)] if pool.name in nccl_pools(settings) else [],
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
    if any(pool.dra_gpus for pool in settings.gpu_pools):
        # Kueue counts a DRA pool's claimed GPUs as its quota's nvidia.com/gpu (workloads/kueue_config.py).
        args["dra_device_classes"] = [GPU_DEVICE_CLASS]
    if local_queue_namespace:
        args["local_queue_namespace"] = local_queue_namespace
    if pods_ready_timeout_minutes is not None:
        args["pods_ready_timeout_minutes"] = pods_ready_timeout_minutes
    component = declare(
        GpuBatchQueues,
        f"{prefix}batch",
        args,
        opts=pulumi.ResourceOptions(provider=provider, depends_on=depends_on),
    )
    return summary, component


def dra_quota_per_gpu(pool: GpuPool) -> dict[str, int]:
    """What a pool's Pods claim through DRA besides GPUs, per GPU (workloads/kueue_config.py)."""
    quota = {CHANNEL_RESOURCE: 1} if is_rack(pool.accelerator) else {}
    if pool.dranet and pool.gpudirect_flavor is not None and pool.gpus_per_node:
        quota[RDMA_NIC_RESOURCE] = -(-rdma_nic_count(pool.gpudirect_flavor) // pool.gpus_per_node)
    return quota


def _team_summary(
    pool: str, whole: Quota, shares: list[tuple[TeamConfig, TeamShare]]
) -> list[dict[str, Any]]:
    """Each team's queues of a pool, its quota and what it may borrow (the stack output and render)."""
    rows = []
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


def nccl_allreduce_tests(
    settings: Settings,
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
    prefix: str = "",
) -> dict[str, Any]:
    """The `nccl-allreduce` workloads, each a NcclAllReduce on its pool, queued in the pool's
    ClusterQueue; returns, per test, how to wait for it and read its result (stack output
    `sampleWorkloads`)."""
    commands: dict[str, Any] = {}
    pools = {pool.name: pool for pool in settings.gpu_pools}
    topology = topology_pools(settings)
    for workload in settings.workloads:
        if workload.name != "nccl-allreduce":
            continue
        pool = pools[workload.pool or settings.gpu_pools[0].name]
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
            # The GPUs through a claim: GKE's device plugin is off there (stack/program_dra.py).
            args["dra_gpus"] = True
        if is_rack(pool.accelerator):
            # Within a rack the test runs over multi-node NVLink alone, through a ComputeDomain (the
            # cluster's NvidiaDraDriver has them on: stack/program_dra.py); the rack's RDMA NICs, if
            # the pool has them, carry traffic between racks, which one rack's test cannot measure.
            args["compute_domain"] = True
        elif flavor is not None:
            args["gpudirect"] = flavor
            if pool.dranet:
                args["gpudirect_networking"] = "dranet"
        test = declare(
            NcclAllReduce,
            f"{prefix}nccl-{pool.name}",
            args,
            # After Kueue, JobSet and the pool's ClusterQueue (the CRDs and the webhook) and, with
            # GPUDirect, the flavour's Networks and NCCL plugin.
            opts=pulumi.ResourceOptions(provider=provider, depends_on=depends_on),
        )
        commands[f"nccl-allreduce-{pool.name}"] = test.commands
    return commands
