"""The stack file's batch section (`gke-gpu:batch`): Kueue, the teams' shares of the GPU pools (by the
teams' own rules, workloads/batch_teams.py, shared with GpuBatchQueues), their members and training data,
and topology-aware placement."""

from __future__ import annotations

from collections.abc import Sequence

from ..cluster.model import ClusterConfig
from ..core.common import KeyNames, cut
from ..core.messages import cut_key
from ..core.section import SectionContext
from ..gpu.pool import GpuPool
from .batch_teams import (
    ShareEntry,
    check_egress,
    check_members,
    check_queue_names,
    check_shares,
    check_team_names,
    retry_problem,
    topology_problem,
)
from .model import BatchConfig
from .training_data_rules import check_volumes


def check_batch(
    batch: BatchConfig,
    cluster: ClusterConfig,
    pools: Sequence[GpuPool],
    ctx: SectionContext,
    *,
    pools_written: bool,
) -> BatchConfig:
    """Kueue's queues are sized from this stack's Standard GPU pools (maxNodes x their GPUs); teams
    share them, and the chosen pools place a job's Pods by topology (`pools_written`: the stack file
    has a shape-valid GPU pool)."""
    _members(cluster, batch, ctx)
    if not batch.kueue:
        for field in ("teams", "topology", "provisioning_retry"):
            if field in batch.model_fields_set:
                ctx.problems.add(
                    f"{ctx.root}batch.{KeyNames(camel=True).key(field)}",
                    "only allowed with kueue: true (Kueue's queues)",
                )
        return batch
    if cluster.mode != "standard":
        why = (
            "the queues are sized from this stack's gpuPools"
            if cluster.mode == "existing"
            else "each queue's quota is its pool's maxNodes x GPUs, and Autopilot profiles have no maxNodes"
        )
        ctx.problems.add(
            f"{ctx.root}batch.kueue", f"true is not allowed with cluster.mode {cluster.mode}: {why}"
        )
        return batch
    if not pools_written and not ctx.broken.any_pool():
        ctx.problems.add(
            f"{ctx.root}batch.kueue",
            f"true needs at least one GPU pool in {ctx.root}gpuPools (a queue per pool; there is none)",
        )
        return batch
    by_name = {p.name: p for p in pools}
    _teams(batch, by_name, ctx)
    for i, team in enumerate(batch.teams):
        check_volumes(
            team.data,
            KeyNames(camel=True),
            ctx.problems,
            key=f"{ctx.root}batch.teams[{i}].data",
            minimum_version=cluster.minimum_version,
            version_key=f"{ctx.root}cluster.minimumVersion",
        )
    _topology(batch, by_name, ctx)
    _provisioning_retry(batch, pools, ctx)
    return batch


def _members(cluster: ClusterConfig, batch: BatchConfig, ctx: SectionContext) -> None:
    """Team members get RoleBindings on the stack's own GKE cluster only; a Google group is a
    Group subject only with Google Groups for RBAC on it (workloads/team_access.py)."""
    security_group = f"{ctx.root}cluster.rbacSecurityGroup"
    for i, team in enumerate(batch.teams):
        key = f"{ctx.root}batch.teams[{i}].members"
        if not team.members:
            continue
        if cluster.mode == "existing":
            ctx.problems.add(
                key,
                "is not allowed with cluster.mode existing: RBAC on a cluster the program does not "
                "create is that cluster's (which name a Google account or group has there, and Google "
                "Groups for RBAC, are its settings); bind the role gke-gpu-team-member yourself",
            )
            continue
        groups = [j for j, m in enumerate(team.members) if m.startswith("group:")]
        broken = "cluster" in ctx.broken.sections or "rbacSecurityGroup" in ctx.broken.cluster_keys
        if groups and cluster.rbac_security_group is None and not broken:
            ctx.problems.add(
                f"{key}[{groups[0]}]",
                f"{cut(team.members[groups[0]])} is a Google group, which the cluster's RBAC sees only "
                f"with Google Groups for RBAC: set {security_group} to gke-security-groups@<your "
                "domain> (a group of that name, with the team's groups nested in it)",
            )
        check_members(team.members, key, ctx.problems)


def _provisioning_retry(batch: BatchConfig, pools: Sequence[GpuPool], ctx: SectionContext) -> None:
    """Kueue's retries of a failed ProvisioningRequest: for queued-provisioning pools only."""
    retry = batch.provisioning_retry
    if retry is None:
        return
    if not any(p.queued_provisioning for p in pools) and not ctx.broken.any_pool():
        ctx.problems.add(
            f"{ctx.root}batch.provisioningRetry",
            f"only allowed with a queuedProvisioning pool in {ctx.root}gpuPools (it configures "
            "Kueue's ProvisioningRequests; there is none)",
        )
    problem = retry_problem(retry.backoff_base_seconds, retry.backoff_max_seconds, KeyNames(camel=True))
    if problem:
        ctx.problems.add(f"{ctx.root}batch.provisioningRetry.backoffMaxSeconds", problem)


def _teams(batch: BatchConfig, by_name: dict[str, GpuPool], ctx: SectionContext) -> None:
    names = KeyNames(f"{ctx.root}batch", camel=True)
    repeated = check_team_names([(t.name, t.namespace_name) for t in batch.teams], names, ctx.problems)
    entries: list[ShareEntry] = []
    for i, team in enumerate(batch.teams):
        egress = [(e.cidr, e.excluding, e.ports) for e in team.egress]
        check_egress(egress, f"{ctx.root}batch.teams[{i}].egress", ctx.problems)
        if i in repeated:
            continue
        for pool, share in team.pools.items():
            key = f"{ctx.root}batch.teams[{i}].pools.{cut_key(pool)}"
            if ctx.unknown_pool(key, pool, by_name):
                continue
            entries.append(
                ShareEntry(team.name, pool, share.gpus, share.borrow, f"{key}.gpus", f"{key}.borrow")
            )
    check_queue_names(by_name, entries, ctx.problems)
    capacity = {
        p.name: (
            p.max_nodes * p.schedulable_gpus_per_node,
            f"maxNodes {p.max_nodes} x {p.schedulable_gpus_per_node} GPUs",
        )
        for p in by_name.values()
        if p.max_nodes is not None
    }
    check_shares(
        capacity,
        entries,
        ctx.problems,
        pools_key=f"{ctx.root}batch.teams",
        capacity_key="the pool's maxNodes",
    )


def _topology(batch: BatchConfig, by_name: dict[str, GpuPool], ctx: SectionContext) -> None:
    seen: set[str] = set()
    for j, name in enumerate(batch.topology or ()):
        key = f"{ctx.root}batch.topology[{j}]"
        if name in seen:
            ctx.problems.add(key, f"{cut(name)} is listed twice")
            continue
        seen.add(name)
        if ctx.unknown_pool(key, name, by_name):
            continue
        why = topology_problem(by_name[name])
        if why:
            ctx.problems.add(key, f"{cut(name)}: {why}")


def note_served_pools(batch: BatchConfig, served: set[str], ctx: SectionContext) -> None:
    """Kueue counts a team's quota against the pool's capacity, not what is free of it: GPUs the
    model servers hold are still in a team's quota, so a job admitted on it waits for nodes the
    pool cannot add (upstream-review-2026-11, Kueue: 'quotas count node capacity'). `served`: the
    pools model servers use."""
    if not batch.kueue:
        return
    for team in batch.teams:
        for pool in sorted(set(team.pools) & served):
            if team.pools[pool].gpus:
                ctx.notes.append(
                    f"warning: gke-gpu:batch.teams: team {team.name} has {team.pools[pool].gpus} GPUs of "
                    f"quota on pool {pool}, which model servers also use: Kueue admits the team's jobs "
                    "against the pool's size, not what the servers leave free, so an admitted job may "
                    "wait for a node the pool cannot add; serve from a pool of its own"
                )
    if not batch.teams and served:
        ctx.notes.append(
            f"warning: gke-gpu:batch: the default team's queue covers every GPU pool, "
            f"{', '.join(sorted(served))} included, which model servers also use: Kueue admits its "
            "jobs against the pool's size, not what the servers leave free; serve from a pool of its own"
        )
