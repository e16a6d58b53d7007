"""Pass 2 rules for the serving section (`gke-gpu:serving`): which pool serves each model, and what
this release builds of the serving contract (scale to zero is refused with the reason, not ignored).
The rules themselves are the serving domain's (serving/pool_rules.py, serving/fit.py: the latter shared
with InferenceService); this only loops over the entries and their pools, and checks what spans
sections (names, a cluster that can take a server, the teams' quotas)."""

from __future__ import annotations

from ..cluster.model import ClusterConfig
from ..core.common import NAMESPACE, KeyNames, cut
from ..gpu.pool import GpuPool
from ..serving.fit import check_model
from ..serving.model import ServingConfig
from ..serving.pd_pool_rules import check_disaggregated_on_pool, role_entries
from ..serving.pd_rules import check_disaggregation
from ..serving.pool_rules import (
    Entry,
    check_availability,
    check_capacity,
    check_hyperdisk_ml,
    check_model_on_pool,
    check_pool,
    check_scaling,
    check_weights_cache,
    note_rollouts,
)
from ..serving.rules import check_model_server, weights_source
from .schema import RuleBase

KEY = f"{NAMESPACE}:serving"


class ServingRules(RuleBase):
    def _serving(self, cluster: ClusterConfig, pools: tuple[GpuPool, ...]) -> tuple[ServingConfig, ...]:
        services = self.indexed_services()
        if not services:
            return ()
        if cluster.mode == "existing":
            self.problems.add(
                KEY,
                "not allowed with cluster.mode existing: a service needs the Cloud Storage FUSE driver and "
                "Google Managed Prometheus of a cluster this program manages",
            )
            return ()
        autopilot = cluster.mode == "autopilot"
        by_name = {p.name: p for p in pools}
        seen: dict[str, int] = {}
        sized: list[Entry] = []  # GPUs the pool's nodes can hold: counted below
        for i, service in services:
            key = f"{KEY}[{i}]"
            names = KeyNames(key, camel=True)
            if service.name in seen:
                self.problems.add(
                    f"{key}.name", f"{cut(service.name)} is also serving[{seen[service.name]}]'s name"
                )
            seen.setdefault(service.name, i)
            check_model_server(service, names, self.problems)
            if service.disaggregation is not None:
                sized += self._disaggregated(service, names, by_name, autopilot=autopilot)
                continue
            check_scaling(service, names, self.problems)
            # Expert parallel without disaggregation is refused there (the roles it needs).
            check_disaggregation(service, names, self.problems, gpus_per_node=None, set_fields=set())
            if self.unknown_pool(f"{key}.pool", service.pool, by_name):
                if weights_source(service.model):
                    check_model(service, None, names, self.problems, self.warnings)
                continue
            pool = by_name[service.pool]
            if weights_source(service.model):
                check_model_on_pool(service, pool, names, self.problems, self.warnings, autopilot=autopilot)
            if check_pool(service, pool, names, self.problems, self.warnings, autopilot=autopilot):
                sized.append((names, service))
                check_weights_cache(service, pool, names, self.problems)
            if service.weights.via == "hyperdiskMl" and weights_source(service.model) == "gcs":
                check_hyperdisk_ml(pool, names, self.problems, self.warnings, autopilot=autopilot)
            check_availability(service, pool, names, self.warnings)
        for pool in by_name.values():
            check_capacity(sized, pool, self.problems)
            note_rollouts(sized, pool, self.warnings)
        self._note_team_quotas([service for _, service in sized])
        return tuple(service for _, service in services)

    def _disaggregated(
        self, service: ServingConfig, names: KeyNames, by_name: dict[str, GpuPool], *, autopilot: bool
    ) -> list[Entry]:
        """A disaggregated service's rules (serving/pd_pool_rules.py); its roles, for the pool's capacity."""
        key = names.prefix
        if self.unknown_pool(f"{key}.pool", service.pool, by_name):
            check_disaggregated_on_pool(
                service, None, names, self.problems, self.warnings, autopilot=autopilot
            )
            return []
        pool = by_name[service.pool]
        if not check_disaggregated_on_pool(
            service, pool, names, self.problems, self.warnings, autopilot=autopilot
        ):
            return []
        if service.weights.via == "hyperdiskMl" and weights_source(service.model) == "gcs":
            check_hyperdisk_ml(pool, names, self.problems, self.warnings, autopilot=autopilot)
        entries = role_entries(service, pool, names)
        for role_keys, view in entries:
            check_availability(view, pool, role_keys, self.warnings)
        return entries

    def _note_team_quotas(self, services: list[ServingConfig]) -> None:
        """Kueue counts a team's quota against the pool's capacity, not what is free of it: GPUs the
        model servers hold are still in a team's quota, so a job admitted on it waits for nodes the
        pool cannot add (upstream-review-2026-11, Kueue: 'quotas count node capacity')."""
        batch = self.config.batch
        if not batch.kueue:
            return
        served = {s.pool for s in services}
        for team in batch.teams:
            for pool in sorted(set(team.pools) & served):
                if team.pools[pool].gpus:
                    self.warnings.append(
                        f"warning: gke-gpu:batch.teams: team {team.name} has {team.pools[pool].gpus} GPUs of "
                        f"quota on pool {pool}, which model servers also use: Kueue admits the team's jobs "
                        "against the pool's size, not what the servers leave free, so an admitted job may "
                        "wait for a node the pool cannot add; serve from a pool of its own"
                    )
        if not batch.teams and served:
            self.warnings.append(
                f"warning: gke-gpu:batch: the default team's queue covers every GPU pool, "
                f"{', '.join(sorted(served))} included, which model servers also use: Kueue admits its "
                "jobs against the pool's size, not what the servers leave free; serve from a pool of its own"
            )
