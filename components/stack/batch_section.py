"""Pass 2 rules for the batch section (`gke-gpu:batch`): Kueue, the teams' shares of the GPU pools,
and topology-aware placement."""

from __future__ import annotations

from ..cluster.model import ClusterConfig
from ..core.common import KeyNames, cut
from ..core.messages import cut_key
from ..gpu.pool import GpuPool
from ..workloads.batch_teams import (
    ShareEntry,
    check_queue_names,
    check_shares,
    check_team_names,
    egress_problems,
    member_problems,
    retry_problem,
    topology_problem,
)
from ..workloads.model import BatchConfig
from ..workloads.training_data_rules import check_volumes
from .schema import RuleBase


class BatchRules(RuleBase):
    def _batch(self, cluster: ClusterConfig, pools: tuple[GpuPool, ...]) -> BatchConfig:
        """Kueue's queues are sized from this stack's Standard GPU pools (maxNodes x their GPUs); teams
        share them, and the chosen pools place a job's Pods by topology."""
        batch = self.config.batch
        self._members(cluster, batch)
        if not batch.kueue:
            for field in ("teams", "topology", "provisioning_retry"):
                if field in batch.model_fields_set:
                    self.problems.add(
                        f"{self.root}batch.{KeyNames(camel=True).key(field)}",
                        "only allowed with kueue: true (Kueue's queues)",
                    )
            return batch
        if cluster.mode != "standard":
            why = (
                "the queues are sized from this stack's gpuPools"
                if cluster.mode == "existing"
                else "each queue's quota is its pool's maxNodes x GPUs, and Autopilot profiles have no "
                "maxNodes"
            )
            self.problems.add(
                f"{self.root}batch.kueue", f"true is not allowed with cluster.mode {cluster.mode}: {why}"
            )
            return batch
        if not self.config.gpu_pools and not self.broken.any_pool():
            self.problems.add(
                f"{self.root}batch.kueue",
                f"true needs at least one GPU pool in {self.root}gpuPools (a queue per pool; there is none)",
            )
            return batch
        by_name = {p.name: p for p in pools}
        self._teams(batch, by_name)
        for i, team in enumerate(batch.teams):
            check_volumes(
                team.data,
                KeyNames(camel=True),
                self.problems,
                key=f"{self.root}batch.teams[{i}].data",
                minimum_version=cluster.minimum_version,
                version_key=f"{self.root}cluster.minimumVersion",
            )
        self._topology(batch, by_name)
        self._provisioning_retry(batch, pools)
        return batch

    def _members(self, cluster: ClusterConfig, batch: BatchConfig) -> None:
        """Team members get RoleBindings on the stack's own GKE cluster only; a Google group is a
        Group subject only with Google Groups for RBAC on it (workloads/team_access.py)."""
        security_group = f"{self.root}cluster.rbacSecurityGroup"
        for i, team in enumerate(batch.teams):
            key = f"{self.root}batch.teams[{i}].members"
            if not team.members:
                continue
            if cluster.mode == "existing":
                self.problems.add(
                    key,
                    "is not allowed with cluster.mode existing: RBAC on a cluster the program does not "
                    "create is that cluster's (which name a Google account or group has there, and Google "
                    "Groups for RBAC, are its settings); bind the role gke-gpu-team-member yourself",
                )
                continue
            groups = [j for j, m in enumerate(team.members) if m.startswith("group:")]
            broken = "cluster" in self.broken.sections or "rbacSecurityGroup" in self.broken.cluster_keys
            if groups and cluster.rbac_security_group is None and not broken:
                self.problems.add(
                    f"{key}[{groups[0]}]",
                    f"{cut(team.members[groups[0]])} is a Google group, which the cluster's RBAC sees only "
                    f"with Google Groups for RBAC: set {security_group} to gke-security-groups@<your "
                    "domain> (a group of that name, with the team's groups nested in it)",
                )
            for problem in member_problems(team.members, key):
                self.problems.add(problem.path, problem.reason)

    def _provisioning_retry(self, batch: BatchConfig, pools: tuple[GpuPool, ...]) -> None:
        """Kueue's retries of a failed ProvisioningRequest: for queued-provisioning pools only."""
        retry = batch.provisioning_retry
        if retry is None:
            return
        if not any(p.queued_provisioning for p in pools) and not self.broken.any_pool():
            self.problems.add(
                f"{self.root}batch.provisioningRetry",
                f"only allowed with a queuedProvisioning pool in {self.root}gpuPools (it configures "
                "Kueue's ProvisioningRequests; there is none)",
            )
        problem = retry_problem(retry.backoff_base_seconds, retry.backoff_max_seconds, KeyNames(camel=True))
        if problem:
            self.problems.add(f"{self.root}batch.provisioningRetry.backoffMaxSeconds", problem)

    def _teams(self, batch: BatchConfig, by_name: dict[str, GpuPool]) -> None:
        names = KeyNames(f"{self.root}batch", camel=True)
        repeated = check_team_names([(t.name, t.namespace_name) for t in batch.teams], names, self.problems)
        entries: list[ShareEntry] = []
        for i, team in enumerate(batch.teams):
            egress = [(e.cidr, e.excluding, e.ports) for e in team.egress]
            egress_problems(egress, f"{self.root}batch.teams[{i}].egress", self.problems)
            if i in repeated:
                continue
            for pool, share in team.pools.items():
                key = f"{self.root}batch.teams[{i}].pools.{cut_key(pool)}"
                if self.unknown_pool(key, pool, by_name):
                    continue
                entries.append(
                    ShareEntry(team.name, pool, share.gpus, share.borrow, f"{key}.gpus", f"{key}.borrow")
                )
        check_queue_names(by_name, entries, self.problems)
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
            self.problems,
            pools_key=f"{self.root}batch.teams",
            capacity_key="the pool's maxNodes",
        )

    def _topology(self, batch: BatchConfig, by_name: dict[str, GpuPool]) -> None:
        seen: set[str] = set()
        for j, name in enumerate(batch.topology or ()):
            key = f"{self.root}batch.topology[{j}]"
            if name in seen:
                self.problems.add(key, f"{cut(name)} is listed twice")
                continue
            seen.add(name)
            if self.unknown_pool(key, name, by_name):
                continue
            why = topology_problem(by_name[name])
            if why:
                self.problems.add(key, f"{cut(name)}: {why}")
