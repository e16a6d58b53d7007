"""Pass 2 rules for the serving section (`gke-gpu:serving`): which pool serves each model, and what
this release builds of the serving contract (scale to zero is refused with the reason, not
ignored)."""

from __future__ import annotations

import math

from ..cluster.model import ClusterConfig
from ..core.common import NAMESPACE, KeyNames, cut, listing
from ..gpu.pool import GpuPool
from ..serving.model import ServingConfig
from ..serving.model_catalog import weights_bytes
from ..serving.model_rules import (
    GIB,
    GPU_MEMORY_UTILIZATION,
    check_model,
    fits_gpus,
    gib,
    smallest_gpu_count,
    tensor_parallel_sizes,
)
from ..serving.rules import (
    DRA_DUTY_CYCLE_UNKNOWN,
    POPULATOR_MIN_VERSION,
    STANDARD_MIN_VERSION,
    check_hyperdisk_ml_machine,
    check_model_server,
    check_replica_nodes,
    weights_source,
)
from ..serving.sizing import (
    container_size,
    describe_rollout,
    surge_services,
    weights_bytes_of,
    weights_cache,
)
from .schema import RuleBase

KEY = f"{NAMESPACE}:serving"
# CUDA 13 (the vLLM image's) dropped Maxwell, Pascal and Volta: compute capability 7.5 and newer only
# (NVIDIA CUDA 13.0 release notes). T4 is Turing (7.5).
CUDA13_UNSUPPORTED = frozenset(
    {"nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-tesla-p4", "nvidia-tesla-k80"}
)


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
        by_name = {p.name: p for p in pools}
        seen: dict[str, int] = {}
        sized: list[tuple[int, ServingConfig]] = []  # GPUs the pool's nodes can hold: counted below
        for i, service in services:
            key = f"{KEY}[{i}]"
            names = KeyNames(key, camel=True)
            if service.name in seen:
                self.problems.add(
                    f"{key}.name", f"{cut(service.name)} is also serving[{seen[service.name]}]'s name"
                )
            seen.setdefault(service.name, i)
            check_model_server(service, names, self.problems)
            self._check_scaling(service, names)
            if self.unknown_pool(f"{key}.pool", service.pool, by_name):
                if weights_source(service.model):
                    check_model(service, None, names, self.problems, self.warnings)
                continue
            pool = by_name[service.pool]
            if weights_source(service.model):
                self._check_model(service, pool, names, autopilot=cluster.mode == "autopilot")
            if self._check_pool(service, pool, names, autopilot=cluster.mode == "autopilot"):
                sized.append((i, service))
                self._check_weights_cache(service, pool, names)
            if service.weights.via == "hyperdiskMl" and weights_source(service.model) == "gcs":
                self._check_hyperdisk_ml(pool, names, autopilot=cluster.mode == "autopilot")
            self._check_availability(service, pool, names)
        self._check_capacity(sized, by_name)
        self._note_rollouts(sized, by_name)
        self._note_team_quotas(sized)
        return tuple(service for _, service in services)

    def _note_team_quotas(self, services: list[tuple[int, ServingConfig]]) -> None:
        """Kueue counts a team's quota against the pool's capacity, not what is free of it: GPUs the
        model servers hold are still in a team's quota, so a job admitted on it waits for nodes the
        pool cannot add (upstream-review-2026-11, Kueue: 'quotas count node capacity')."""
        batch = self.config.batch
        if not batch.kueue:
            return
        served = {s.pool for _, s in services}
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

    def _check_weights_cache(self, service: ServingConfig, pool: GpuPool, names: KeyNames) -> None:
        """A gs:// model read through Cloud Storage FUSE: its weights fit the file cache a Pod can hold
        (where the stack knows their size)."""
        if weights_source(service.model) != "gcs" or service.weights.via != "cloudStorageFuse":
            return
        per_pod = min(service.gpus_per_replica, pool.gpus_per_node or service.gpus_per_replica)
        cache = weights_cache(pool, per_pod, weights_bytes_of(service))
        if cache.problem:
            self.problems.add(names.at("model"), cache.problem)

    def _check_availability(self, service: ServingConfig, pool: GpuPool, names: KeyNames) -> None:
        """A single replica on capacity that Compute Engine may take back at any time is warned about."""
        spot_only = (
            all(step == "spot" for step in pool.capacity_ladder)
            if pool.capacity_ladder
            else pool.spot and not pool.on_demand_fallback
        )
        if spot_only and service.replicas.min < 2:
            self.warnings.append(
                f"warning: {names.at('replicas.min')}: {service.name} runs one replica on pool {pool.name}, "
                "whose nodes are all Spot VMs: a preemption (30 seconds' notice) stops the service until a "
                "new node, the image and the weights are up; run replicas.min 2, or give the pool a "
                "capacity ladder with an on-demand or reservation step (capacityLadder)"
            )

    def _note_rollouts(self, services: list[tuple[int, ServingConfig]], by_name: dict[str, GpuPool]) -> None:
        """A rollout surges a replica where the pool has room (sizing.surge_services); where it does
        not and the service has one replica, the render says a rollout takes it down."""
        for pool in by_name.values():
            users = [(i, s) for i, s in services if s.pool == pool.name]
            surging = surge_services(pool, ((s.name, s.replicas.max, s.gpus_per_replica) for _, s in users))
            for i, service in users:
                if service.name not in surging and service.replicas.min < 2:
                    self.warnings.append(
                        f"note: {KEY}[{i}]: a rollout of {service.name} "
                        + describe_rollout(pool, service.gpus_per_replica, service.replicas.min, False)
                    )

    def _check_scaling(self, service: ServingConfig, names: KeyNames) -> None:
        """The replicas' range and what scales it; zero replicas is refused with the reason, never
        ignored."""
        replicas = service.replicas
        if replicas.min > replicas.max:
            self.problems.add(
                names.at("replicas.min"), f"{replicas.min} is greater than replicas.max {replicas.max}"
            )
        elif replicas.min == 0:
            self.problems.add(
                names.at("replicas.min"),
                "0 is not offered: at zero replicas no vLLM metric exists to wake the service, and a Service "
                "does not hold requests while no Pod is ready, so every request until a replica is up (a GPU "
                "node, the image, the weights: minutes) fails; scaling an HTTP server from zero needs a "
                "request-buffering layer GKE does not provide (docs/serving.md, 'Scale to zero'); use 1 (the "
                "pool's nodes still scale to zero when no service uses it)",
            )
        if service.scale_on is not None and replicas.min == replicas.max:
            self.problems.add(
                names.at("scale_on"),
                f"only allowed when replicas.min is below replicas.max (min and max are {replicas.min})",
            )

    def _check_pool(self, service: ServingConfig, pool: GpuPool, names: KeyNames, *, autopilot: bool) -> bool:
        """The pool's rules for the service; whether its replica's GPUs fit the pool's nodes."""
        gpus, sized = service.gpus_per_replica, True
        if pool.sharing:
            self.problems.add(
                names.at("pool"),
                f"{cut(pool.name)} shares its GPUs ({pool.sharing.strategy}): vLLM takes 92% of a GPU's "
                "memory (--gpu-memory-utilization), so a second server on the same GPU fails; serve from "
                "a pool without sharing (a MIG partition works: it is a GPU of its own)",
            )
        elif pool.mig_partition_size and gpus > 1:
            self.problems.add(
                names.at("gpus_per_replica"),
                f"{gpus} is not allowed on pool {pool.name}, which partitions each GPU (MIG): a replica "
                "gets one partition there",
            )
            sized = False
        elif pool.gpus_per_node is not None and gpus > pool.gpus_per_node:
            sized = self._check_multi_node(service, pool, names, autopilot)
        if pool.mig_partition_size and service.scale_on == "gpu":
            self.problems.add(
                names.at("scale_on"),
                f"gpu is not allowed on pool {pool.name}, which partitions each GPU (MIG): no GKE page says "
                "it reports a duty cycle for a MIG partition's container, and without one the autoscaler "
                "never scales (docs/serving.md, 'Scaling on GPU duty cycle'); use queue (the default)",
            )
        if pool.dra_gpus and service.scale_on == "gpu":
            self.problems.add(
                names.at("scale_on"),
                f"gpu is not allowed on pool {pool.name}, a draGpus pool: {DRA_DUTY_CYCLE_UNKNOWN}; "
                "use queue (the default)",
            )
        if pool.accelerator in CUDA13_UNSUPPORTED:
            self.problems.add(
                names.at("pool"),
                f"{cut(pool.name)} has {pool.accelerator} GPUs (Volta or older); the pinned vLLM image is a "
                "CUDA 13 build, which supports compute capability 7.5 (Turing) and newer",
            )
        elif pool.driver_version != "LATEST" and not pool.dra_gpus:
            # A DRA pool's driver is the one the stack's installer DaemonSet puts there: COS's latest,
            # as LATEST (dra/driver_installer.py).
            self.problems.add(
                names.at("pool"),
                f"{cut(pool.name)} runs driverVersion {pool.driver_version}; the pinned vLLM image is a CUDA "
                "13 build, which needs an R580+ driver: set the pool's driverVersion: LATEST",
            )
        if pool.queued_provisioning:
            self.problems.add(
                names.at("pool"),
                f"{cut(pool.name)} takes nodes only through queued provisioning (Kueue's "
                "ProvisioningRequests): a Deployment's Pods would wait forever; serve from a pool that "
                "scales by itself",
            )
        return sized

    def _check_multi_node(
        self, service: ServingConfig, pool: GpuPool, names: KeyNames, autopilot: bool
    ) -> bool:
        """A replica above a node's GPUs spans whole nodes of a Standard pool (a LeaderWorkerSet);
        whether it does."""
        gpus, per_node = service.gpus_per_replica, pool.gpus_per_node or 1
        if autopilot:
            # A profile's gpusPerNode is GPUs per Pod, defaulted to the smallest the GPU offers: a
            # larger replica more often means a profile set too small than a replica meant to span
            # Pods, and Autopilot picks the nodes.
            self.problems.add(
                names.at("gpus_per_replica"),
                f"{gpus} is more than Autopilot profile {pool.name}'s {per_node} GPUs per Pod "
                f"(gpusPerNode): raise its gpusPerNode to {gpus} if {pool.accelerator} offers it; a replica "
                "spanning nodes (a LeaderWorkerSet) is built on Standard pools only",
            )
            return False
        whose = f"pool {pool.name}'s {per_node} GPUs per node"
        check_replica_nodes(gpus, per_node, whose, names, self.problems)
        if gpus % per_node:
            return False
        accelerator = self.catalog.accelerator(pool.accelerator)
        counts = sorted({m.gpus for m in accelerator.machine_types.values()}) if accelerator else []
        if any(count >= gpus for count in counts):
            # Legal, and sometimes meant, but pipeline parallel over the network is slower than one
            # node's tensor parallel: say so rather than split a replica the GPU could keep whole.
            self.warnings.append(
                f"note: {names.at('gpus_per_replica')}: {gpus} spans {gpus // per_node} nodes of pool "
                f"{pool.name} ({per_node} GPUs each), pipeline parallel over the network; {pool.accelerator} "
                f"machines with {min(c for c in counts if c >= gpus)} GPUs would keep a replica on one node "
                "(the pool's gpusPerNode)"
            )
        return True

    def _check_model(
        self, service: ServingConfig, pool: GpuPool, names: KeyNames, *, autopilot: bool
    ) -> None:
        """What knowing the model decides on this pool: the tensor-parallel size on its nodes, the boot
        disk a Hugging Face model is downloaded to, the GPUs' memory; a size that strands GPUs."""
        gpus, per_node = service.gpus_per_replica, pool.gpus_per_node
        disk = container_size(pool, gpus)["disk_gib"]
        weights = weights_bytes(service)
        share = gpus / per_node if per_node and gpus < per_node else 1
        need = math.ceil((4 * math.ceil(weights / GIB) + 4) / share) if weights else 0
        of = f"a quarter of the replica's {gpus}/{per_node} share" if share < 1 else "a quarter"
        if pool.local_ssd_count:
            fix = (
                f" ({of} of pool {pool.name}'s {pool.local_ssd_count} Local SSDs, which hold its "
                f"ephemeral storage): give it Local SSDs for at least {need} GiB"
            )
        else:
            fix = (
                f" ({of} of pool {pool.name}'s {pool.disk_size_gb} GB boot disk): raise its diskSizeGb "
                f"to at least {need}"
            )
        tp = min(gpus, per_node or gpus)
        facts = check_model(
            service,
            tp if not pool.mig_partition_size else None,
            names,
            self.problems,
            self.warnings,
            download_gib=disk,
            download_fix=fix,
        )
        if per_node and gpus < per_node and per_node % gpus and not pool.mig_partition_size and not autopilot:
            fitting = [n for n in range(1, per_node + 1) if per_node % n == 0]
            if facts is not None and facts.attention_heads is not None:
                fitting = [n for n in fitting if n in tensor_parallel_sizes(facts, per_node)]
            self.problems.add(
                names.at("gpus_per_replica"),
                f"{gpus} leaves {per_node % gpus} of pool {pool.name}'s {per_node} GPUs a node unused (a "
                f"replica's GPUs are on one node); sizes that use them all: {listing(fitting)}",
            )
        if facts is None or pool.sharing or pool.mig_partition_size:
            return
        accelerator = self.catalog.accelerator(pool.accelerator)
        if accelerator is None:
            return
        utilization = service.gpu_memory_utilization or GPU_MEMORY_UTILIZATION
        short = fits_gpus(facts, service.max_model_len, utilization, gpus, accelerator.gpu_memory_bytes)
        if short is None:
            return
        weights_size, kv, usable = short
        sizes = sorted(
            {n for n in (1, 2, 4, 8) if facts.attention_heads is None or n in tensor_parallel_sizes(facts, 8)}
            | {8 * k for k in range(2, 9)}
        )
        count = smallest_gpu_count(weights_size + kv, accelerator.gpu_memory_bytes, utilization, sizes)
        bigger = [
            a.name
            for a in self.catalog.accelerators.values()
            if a.gpu_memory_bytes > accelerator.gpu_memory_bytes
            and not fits_gpus(facts, service.max_model_len, utilization, gpus, a.gpu_memory_bytes)
        ]
        context = service.max_model_len or facts.max_context
        kv_text = f" + the KV cache of one {context}-token sequence {gib(kv)}" if kv else ""
        more = f"{count} {accelerator.name} GPUs" if count else f"more {accelerator.name} GPUs than 64"
        other = f", or {gpus} GPU(s) of {listing(bigger)}" if bigger else ""
        self.problems.add(
            names.at("gpus_per_replica"),
            f"{gpus} {accelerator.name} GPU(s) ({accelerator.gpu_memory_basis}; {utilization:g} of it for "
            f"vLLM: {gib(usable)}) cannot hold {facts.name}: weights {gib(weights_size)}{kv_text}; use "
            f"{more}{other}{', or a shorter maxModelLen' if kv else ''}",
        )

    def _check_hyperdisk_ml(self, pool: GpuPool, names: KeyNames, *, autopilot: bool) -> None:
        """The pool's nodes attach Hyperdisk ML; the versions it needs, as a note."""
        accelerator = self.catalog.accelerator(pool.accelerator)
        if accelerator is None:  # reported by the pool rules
            return
        machine = accelerator.machine_type(pool.machine_type) if pool.machine_type else None
        # An Autopilot profile's machine is GKE's pick among its GPU's machine series.
        series = (machine.series,) if machine else accelerator.machine_series
        label = f"{pool.name} ({pool.machine_type or pool.accelerator})"
        check_hyperdisk_ml_machine(series, label, names.at("weights.via"), self.problems)
        standard = "" if autopilot else f", and {STANDARD_MIN_VERSION} for the transfer's node pools"
        self.warnings.append(
            f"note: {names.at('weights.via')}: hyperdiskMl needs GKE {POPULATOR_MIN_VERSION} or later (the "
            f"Volume Populator){standard}; check the cluster's version"
        )

    def _check_capacity(self, services: list[tuple[int, ServingConfig]], by_name: dict[str, GpuPool]) -> None:
        """The replicas' GPUs fit their pool at its largest (Standard pools with maxNodes)."""
        for pool in by_name.values():
            users = [(i, s) for i, s in services if s.pool == pool.name]
            if not users or pool.max_nodes is None or not pool.gpus_per_node or pool.sharing:
                continue
            capacity = pool.max_nodes * pool.schedulable_gpus_per_node
            # One replica larger than the whole pool: its GPUs are at fault, not the replica count.
            for i, s in [(i, s) for i, s in users if s.gpus_per_replica > capacity]:
                self.problems.add(
                    f"{KEY}[{i}].gpusPerReplica",
                    f"{s.gpus_per_replica} is more than pool {pool.name} holds at its largest ({capacity} "
                    f"GPUs: maxNodes {pool.max_nodes} x {pool.schedulable_gpus_per_node}); lower it to "
                    f"{capacity} or less, or raise the pool's maxNodes to "
                    f"{-(-s.gpus_per_replica // pool.schedulable_gpus_per_node)}",
                )
            users = [(i, s) for i, s in users if s.gpus_per_replica <= capacity]
            if not users:
                continue
            asked = sum(s.replicas.max * s.gpus_per_replica for _, s in users)
            if asked > capacity:
                terms = " + ".join(f"{s.name} {s.replicas.max} x {s.gpus_per_replica}" for _, s in users)
                self.problems.add(
                    f"{KEY}[{users[-1][0]}].replicas",
                    f"the services on pool {pool.name} need {asked} GPUs ({terms}), more than its {capacity} "
                    f"(maxNodes {pool.max_nodes} x {pool.schedulable_gpus_per_node}); lower the replicas or "
                    "raise maxNodes",
                )
