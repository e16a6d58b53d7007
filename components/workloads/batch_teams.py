"""Teams sharing GPU pools through Kueue (their args, the quota arithmetic and its rules), and which
pools can place Pods by topology.

Per GPU pool, Kueue gets one cohort (`gpu-<pool>`). Each team with a share of the pool has a
ClusterQueue in it (`gpu-<pool>-<team>`) whose nominal quota is its share; the pool's own ClusterQueue
(`gpu-<pool>`) keeps what no team holds, for the samples and the all-reduce. A ClusterQueue may
borrow what the others leave idle (up to its borrowing limit), and reclaims its own share by
preempting borrowers (`reclaimWithinCohort: Any`): the documented preemption policies, not Kueue's
Fair Sharing, which needs the Kueue Configuration changed through the chart (docs/teams.md).

Pure functions: the stack layer checks a stack file's `batch.teams` with the same rules, under its
own key names.
"""

from collections.abc import Iterable, Sequence
from typing import NamedTuple, NotRequired, TypedDict

from ..core.catalog import Catalog, load_catalog
from ..core.common import GPU_RESOURCE, KeyNames, Problems, cut, network_of
from ..gpu.pool import GpuPool
from .egress_args import TeamEgress
from .model import MAX_TEAM_NAME

# Namespaces a team may not take: Kubernetes' and GKE's own, the batch controllers', the samples'.
RESERVED_NAMESPACES = frozenset(
    {
        "default",
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "gke-managed-system",
        "gmp-system",
        "gmp-public",
        "kueue-system",
        "jobset-system",
        "gpu-samples",
        "gpu-monitoring",
    }
)
# kube-: Kubernetes reserves the prefix; gmp- and gke-managed-: GKE's managed Prometheus and system;
# serve-: the model servers' namespaces (serving/model.py).
# gpudirect-: the teams' GPUDirect namespaces (team_namespaces.py).
RESERVED_NAMESPACE_PREFIXES = ("gpu-nccl-", "gpudirect-", "kube-", "gmp-", "gke-managed-", "serve-")
DEFAULT_TEAM = "default"
DEFAULT_TEAM_NAMESPACE = "gpu-jobs"
# Kueue's Topology over GKE's topology node labels, widest level first (docs/teams.md, sources).
TOPOLOGY_NAME = "gke-default"
TOPOLOGY_LEVELS = (
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    "cloud.google.com/gce-topology-host",
    "kubernetes.io/hostname",
)


class BatchTeam(TypedDict):
    """A team: a namespace whose LocalQueues lead to its ClusterQueues."""

    name: str
    """The team's name (at most 18 lowercase letters, digits and hyphens): its ClusterQueues are
    `gpu-<pool>-<name>`."""
    namespace: str
    """The team's namespace, where its LocalQueues (`gpu-<pool>`) are."""
    create_namespace: NotRequired[bool]
    """Create the namespace (false: it exists). Defaults to true."""
    pod_security: NotRequired[str]
    """The Pod Security level the team's namespace enforces: `baseline` (the default) or
    `restricted`; never `privileged`, whatever its pools."""
    gpudirect: NotRequired[bool]
    """The team uses a GPUDirect pool: its GPUDirect Pods get a namespace of their own,
    `gpudirect-<name>` (Pod Security `privileged`, confined by the cluster's admission policy
    `gke-gpu-gpudirect-pods`), with the same LocalQueues. Defaults to false."""
    egress: NotRequired[list[TeamEgress]]
    """More egress for the team's Pods, in both its namespaces: each denies egress but to GKE's DNS,
    their own Pods and the metadata server (`default-deny-egress`). Defaults to none."""
    members: NotRequired[list[str]]
    """Who may run and watch the team's jobs, each `group:<email>` or `user:<email>`: a RoleBinding
    `gke-gpu-team-members` in each of the team's namespaces to the ClusterRole `gke-gpu-team-member`
    (team_access.py), which cannot edit Namespaces, NetworkPolicies or RBAC. A group needs Google Groups
    for RBAC on the cluster (GkeCluster's `rbac_security_group`). Defaults to none (no RoleBinding)."""


class TeamShare(TypedDict):
    """A team's share of one queue's pool."""

    team: str
    """The team (a `teams` entry's name)."""
    gpus: int
    """Nominal `nvidia.com/gpu` quota; CPU, memory and ephemeral storage in the same proportion."""
    borrowing_limit: NotRequired[int]
    """The most GPUs it may borrow beyond its share from the cohort's idle quota. Defaults to any."""


class Quota(NamedTuple):
    """A queue's quota of each covered resource (GPUs; cores; GiB)."""

    gpus: int
    cpus: int
    memory_gib: int
    ephemeral_storage_gib: int

    def part(self, gpus: int) -> "Quota":
        """`gpus` of this quota's GPUs, with CPU, memory and storage in proportion (rounded down, so
        the parts never add up to more than the whole)."""
        if self.gpus == 0:
            return Quota(0, 0, 0, 0)
        return Quota(
            gpus,
            self.cpus * gpus // self.gpus,
            self.memory_gib * gpus // self.gpus,
            self.ephemeral_storage_gib * gpus // self.gpus,
        )

    def minus(self, parts: Iterable["Quota"]) -> "Quota":
        left = self
        for p in parts:
            left = Quota(
                left.gpus - p.gpus,
                left.cpus - p.cpus,
                left.memory_gib - p.memory_gib,
                left.ephemeral_storage_gib - p.ephemeral_storage_gib,
            )
        return left

    @staticmethod
    def total(quotas: Iterable["Quota"]) -> "Quota":
        """The sum of several queues' quotas (a fleet manager's queue: its workers' shares)."""
        parts = list(quotas)
        return Quota(
            sum(q.gpus for q in parts),
            sum(q.cpus for q in parts),
            sum(q.memory_gib for q in parts),
            sum(q.ephemeral_storage_gib for q in parts),
        )

    def as_resources(self) -> dict[str, object]:
        return {
            GPU_RESOURCE: self.gpus,
            "cpu": self.cpus,
            "memory": f"{self.memory_gib}Gi",
            "ephemeral-storage": f"{self.ephemeral_storage_gib}Gi",
        }


def pool_quota(pool: GpuPool, catalog: Catalog | None = None) -> Quota:
    """What a Standard pool can hold at most: its queue's quota (maxNodes x the `nvidia.com/gpu` each
    node advertises, x the machine's vCPUs, memory and ephemeral storage)."""
    accelerator = (catalog or load_catalog()).accelerator(pool.accelerator)
    machine = accelerator.machine_type(pool.machine_type or "") if accelerator else None
    assert machine is not None and pool.max_nodes is not None, "a resolved Standard pool"
    return Quota(
        gpus=pool.max_nodes * pool.schedulable_gpus_per_node,
        cpus=pool.max_nodes * machine.vcpus,
        memory_gib=int(pool.max_nodes * machine.memory_gb),
        ephemeral_storage_gib=pool.max_nodes * pool.node_ephemeral_storage_gib,
    )


def check_egress(
    entries: Sequence[tuple[str, Sequence[str], Sequence[int]]], key: str, problems: Problems
) -> None:
    """A team's `egress` entries, as (cidr, excluding, ports) under `key`: each range a network (no
    host bits), each excluded block strictly inside its range, no port twice."""
    for i, (cidr, excluding, ports) in enumerate(entries):
        at = f"{key}[{i}]"
        network = network_of(cidr, f"{at}.cidr", problems)
        for j, block in enumerate(excluding):
            inner = network_of(block, f"{at}.excluding[{j}]", problems)
            if (
                network is not None
                and inner is not None
                and not (inner.subnet_of(network) and inner != network)
            ):
                problems.add(
                    f"{at}.excluding[{j}]",
                    f"{cut(block)} is not inside {network} (an excluded block must be a strict part of "
                    "cidr, as Kubernetes' ipBlock.except requires)",
                )
        repeated = sorted({p for p in ports if list(ports).count(p) > 1})
        if repeated:
            problems.add(f"{at}.ports", f"{', '.join(map(str, repeated))} listed twice; list each port once")


def team_queue_name(pool: str, team: str) -> str:
    """A team's ClusterQueue for a pool."""
    return f"gpu-{pool}-{team}"


GPUDIRECT_NAMESPACE_PREFIX = "gpudirect-"


def gpudirect_namespace(team: str) -> str:
    """The namespace of a team's GPUDirect Pods (team_namespaces.py declares it)."""
    return f"{GPUDIRECT_NAMESPACE_PREFIX}{team}"


def namespace_problem(namespace: str) -> str | None:
    """Why a team may not take `namespace`, or None."""
    if namespace in RESERVED_NAMESPACES or namespace.startswith(RESERVED_NAMESPACE_PREFIXES):
        return (
            f"{cut(namespace)} is reserved (Kubernetes', GKE's, the batch controllers' or this "
            "program's own); choose a namespace of the team's own"
        )
    return None


class ShareEntry(NamedTuple):
    """One team's share of one pool, with where the user wrote it (for messages)."""

    team: str
    pool: str
    gpus: int
    borrow: int | None
    gpus_key: str
    borrow_key: str


def check_shares(
    capacity: dict[str, tuple[int, str]],
    shares: Sequence[ShareEntry],
    problems: Problems,
    *,
    pools_key: str,
    capacity_key: str,
) -> None:
    """The quota arithmetic: per pool, the teams' shares add up to at most its GPUs, and a borrowing
    limit is at most what the others hold. `capacity`: pool -> (GPUs, how they are counted);
    `capacity_key`: what the caller writes to give a pool more GPUs (the stack file's `maxNodes`, a
    component's `gpus`), named in the advice."""
    by_pool: dict[str, list[ShareEntry]] = {}
    for share in shares:
        by_pool.setdefault(share.pool, []).append(share)
    for pool, entries in by_pool.items():
        if pool not in capacity:
            continue
        total, how = capacity[pool]
        taken = sum(e.gpus for e in entries)
        if taken > total:
            terms = " + ".join(f"{e.team} {e.gpus}" for e in entries)
            problems.add(
                pools_key,
                f"the teams' shares of pool {pool} add up to {taken} GPUs ({terms}), more than its "
                f"{total} ({how}); lower a share or raise {capacity_key}",
            )
            continue
        for e in entries:
            others = total - e.gpus
            if e.gpus == 0 and e.borrow == 0:
                problems.add(
                    e.borrow_key,
                    f"0 with a share of 0 GPUs: team {e.team} could never run a job on pool {pool}; give "
                    "it a share or let it borrow",
                )
            if e.borrow is not None and e.borrow > others:
                problems.add(
                    e.borrow_key,
                    f"{e.borrow} is more than pool {pool} has beyond the team's share ({total} - "
                    f"{e.gpus} = {others} GPUs); at most {others}",
                )


def check_queue_names(pools: Iterable[str], shares: Sequence[ShareEntry], problems: Problems) -> None:
    """Every ClusterQueue name is the object's own: a team's `gpu-<pool>-<team>` may not be a pool's
    `gpu-<pool>` or another team's (pools `a` and `a-b` with teams `b-c` and `c`)."""
    owners = {queue_name(pool): f"the queue of pool {pool}" for pool in pools}
    for share in shares:
        name = team_queue_name(share.pool, share.team)
        owner = f"team {share.team}'s queue of pool {share.pool}"
        if name in owners:
            problems.add(
                share.gpus_key.rsplit(".", 1)[0],
                f"team {share.team}'s ClusterQueue {name} would be {owners[name]}; rename the team",
            )
        else:
            owners[name] = owner


def check_team_names(
    teams: Sequence[tuple[str, str]], names: KeyNames, problems: Problems, *, key: str = "teams"
) -> set[int]:
    """Team names and namespaces are unique, and no namespace is reserved: `teams` is
    (name, namespace) pairs in order. Returns the indexes of the teams that repeat an earlier team's
    name: what follows from the repeat (the same namespace, the same queues) is not reported again."""
    seen_names: dict[str, int] = {}
    seen_namespaces: dict[str, int] = {}
    repeated: set[int] = set()
    for i, (name, namespace) in enumerate(teams):
        if name in seen_names:
            repeated.add(i)
            other = f"{name}-2"
            example = f" (such as {other})" if len(other) <= MAX_TEAM_NAME and other not in seen_names else ""
            problems.add(
                names.at(f"{key}[{i}].name"),
                f"{cut(name)} is not allowed: it is also {key}[{seen_names[name]}]'s name; each team needs "
                f"a name of its own{example}",
            )
        else:
            seen_names[name] = i
        if namespace in seen_namespaces:
            j = seen_namespaces[namespace]
            if not (i in repeated and seen_names[name] == j):  # the same team twice: one problem
                problems.add(
                    names.at(f"{key}[{i}].namespace"),
                    f"{cut(namespace)} is also {key}[{j}]'s namespace; each team has its own (its "
                    "LocalQueues are named by pool, so two teams in one namespace would share them)",
                )
        else:
            seen_namespaces[namespace] = i
        why = namespace_problem(namespace)
        if why and not (i in repeated and namespace == teams[seen_names[name]][1]):
            problems.add(names.at(f"{key}[{i}].namespace"), why)
    return repeated


def queue_name(pool: str) -> str:
    """The ResourceFlavor, ClusterQueue and LocalQueue of a pool."""
    return f"gpu-{pool}"


# Machine types whose GKE nodes carry the topology labels above: Compute Engine shows the topology of
# A4X, A4, A3 Ultra, A3 Mega and 8-GPU A3 High VMs; Spot ones only with compact placement (GKE's
# "Schedule GKE workloads with Topology Aware Scheduling", docs/teams.md). A node without every level's
# label gives a TAS flavor no capacity (Kueue v0.19.2 pkg/util/tas/node.go): a job would wait forever.
TOPOLOGY_MACHINE_TYPES = (
    "a3-highgpu-8g",
    "a3-megagpu-8g",
    "a3-ultragpu-8g",
    "a4-highgpu-8g",
    "a4x-highgpu-4g",
)
# What the all-reduce asks of Kueue: its Pods as close as the free nodes allow (the lowest level first,
# then up), as GKE's TAS page and cluster-toolkit's A3 Ultra and A4 JobSets do.
PREFERRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
PREFERRED_TOPOLOGY_LEVEL = "kubernetes.io/hostname"


def topology_problem(pool: GpuPool) -> str | None:
    """Why a pool's jobs cannot be placed by topology, or None."""
    machine = pool.machine_type or ""
    if machine not in TOPOLOGY_MACHINE_TYPES:
        return (
            f"its nodes ({machine or pool.accelerator}) carry no GKE topology labels "
            f"(cloud.google.com/gce-topology-*), which only {', '.join(TOPOLOGY_MACHINE_TYPES)} nodes "
            "have; Kueue would admit no job on the pool"
        )
    if pool.spot and not pool.compact_placement:
        return (
            "Spot nodes carry GKE's topology labels only with compact placement; set the pool's "
            "compactPlacement: true or leave the pool out (Kueue would admit no job on it)"
        )
    # Kueue places by topology only nodes that exist, unless a ProvisioningRequest admission check
    # asks for them first (v0.19.2 tas_flavorassigner.go): on a pool that scales up from fewer nodes,
    # a placed job would wait for nodes no one asks for.
    if not pool.queued_provisioning and pool.min_nodes != pool.max_nodes:
        return (
            f"Kueue places jobs by topology only on nodes that exist, or that queued provisioning "
            f"obtains first; the pool scales from {pool.min_nodes} to {pool.max_nodes} nodes without "
            "it, so a placed job would never start. Use queuedProvisioning: true, or minNodes equal "
            "to maxNodes"
        )
    return None


def topology_default(pools: Iterable[GpuPool]) -> list[str]:
    """The pools placed by topology when the stack file does not say: the GPUDirect pools that can be."""
    return [p.name for p in pools if p.gpudirect_flavor is not None and topology_problem(p) is None]


def retry_problem(base_seconds: int, max_seconds: int, names: KeyNames) -> str | None:
    """Why Kueue's ProvisioningRequest retries are inconsistent (the longest backoff below the
    first), or None."""
    if max_seconds < base_seconds:
        return (
            f"{max_seconds} is less than {names.key('backoff_base_seconds')} {base_seconds}: the longest "
            "backoff cannot be shorter than the first"
        )
    return None


def check_members(members: Sequence[str], key: str, problems: Problems) -> None:
    """A team member (`group:<email>` or `user:<email>`, team_access.py) listed twice, each under
    `<key>[i]`; the shape of each is the model's."""
    seen: set[str] = set()
    for i, member in enumerate(members):
        if member in seen:
            problems.add(f"{key}[{i}]", f"{cut(member)} is listed twice")
        seen.add(member)
