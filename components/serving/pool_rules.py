"""The rules of a serving entry on its GPU pool (the stack file's `serving[i]` on `gpuPools[j]`): what
the pool must offer a model server (whole GPUs, a driver for the CUDA 13 image, nodes that come by
themselves), a replica spanning nodes, the GPUs' memory (fit.py, through the replica the pool gives),
the file cache, the services' GPUs against the pool's largest size, and what a rollout or a preemption
costs. The stack layer only loops over the entries and calls these (serving/section.py).

Every message names the key the user must change, in the stack file's camelCase (KeyNames)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..core.catalog import load_catalog
from ..core.common import KeyNames, Problems, cut, listing
from ..gpu.pool import GpuPool
from .fit import GIB, Replica, check_fit, tensor_parallel_sizes
from .model import ServingConfig
from .model_catalog import ModelFacts, model_facts, weights_bytes
from .role_views import capacity_views
from .rules import (
    DRA_DUTY_CYCLE_UNKNOWN,
    POPULATOR_MIN_VERSION,
    STANDARD_MIN_VERSION,
    check_hyperdisk_ml_machine,
    check_replica_nodes,
    weights_source,
)
from .sizing import container_size, describe_rollout, surge_services, weights_cache

# CUDA 13 (the vLLM image's) dropped Maxwell, Pascal and Volta: compute capability 7.5 and newer only
# (NVIDIA CUDA 13.0 release notes). T4 is Turing (7.5).
CUDA13_UNSUPPORTED = frozenset(
    {"nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-tesla-p4", "nvidia-tesla-k80"}
)
# A service and the keys its messages name (`gke-gpu:serving[i]`).
Entry = tuple[KeyNames, ServingConfig]


def nodes_per_replica(service: ServingConfig, pool: GpuPool) -> int:
    """The nodes one replica spans: 1, or its GPUs over a node's (a whole multiple: the rules say so)."""
    per_node = pool.gpus_per_node or service.gpus_per_replica
    return max(1, service.gpus_per_replica // per_node)


def pod_gpus(service: ServingConfig, pool: GpuPool) -> int:
    """A Pod's GPUs: the replica's, or one node's of a replica that spans nodes."""
    return service.gpus_per_replica // nodes_per_replica(service, pool)


def check_scaling(service: ServingConfig, names: KeyNames, problems: Problems) -> None:
    """The replicas' range and what scales it; zero replicas is refused with the reason, never ignored."""
    replicas = service.replicas
    if replicas.min > replicas.max:
        problems.add(names.at("replicas.min"), f"{replicas.min} is greater than replicas.max {replicas.max}")
    elif replicas.min == 0:
        problems.add(
            names.at("replicas.min"),
            "0 is not offered: at zero replicas no vLLM metric exists to wake the service, and a Service "
            "does not hold requests while no Pod is ready, so every request until a replica is up (a GPU "
            "node, the image, the weights: minutes) fails; scaling an HTTP server from zero needs a "
            "request-buffering layer GKE does not provide (docs/serving.md, 'Scale to zero'); use 1 (the "
            "pool's nodes still scale to zero when no service uses it)",
        )
    if service.scale_on is not None and replicas.min == replicas.max:
        problems.add(
            names.at("scale_on"),
            f"only allowed when replicas.min is below replicas.max (min and max are {replicas.min})",
        )


def check_pool(
    service: ServingConfig,
    pool: GpuPool,
    names: KeyNames,
    problems: Problems,
    notes: list[str],
    *,
    autopilot: bool,
) -> bool:
    """What the pool must offer the service; whether its replica's GPUs fit the pool's nodes."""
    gpus, sized = service.gpus_per_replica, True
    if pool.sharing:
        problems.add(
            names.at("pool"),
            f"{cut(pool.name)} shares its GPUs ({pool.sharing.strategy}): vLLM takes 92% of a GPU's "
            "memory (--gpu-memory-utilization), so a second server on the same GPU fails; serve from "
            "a pool without sharing (a MIG partition works: it is a GPU of its own)",
        )
    elif pool.mig_partition_size and gpus > 1:
        problems.add(
            names.at("gpus_per_replica"),
            f"{gpus} is not allowed on pool {pool.name}, which partitions each GPU (MIG): a replica "
            "gets one partition there",
        )
        sized = False
    elif pool.gpus_per_node is not None and gpus > pool.gpus_per_node:
        sized = _check_multi_node(service, pool, names, problems, notes, autopilot=autopilot)
    if pool.mig_partition_size and service.scale_on == "gpu":
        problems.add(
            names.at("scale_on"),
            f"gpu is not allowed on pool {pool.name}, which partitions each GPU (MIG): no GKE page says "
            "it reports a duty cycle for a MIG partition's container, and without one the autoscaler "
            "never scales (docs/serving.md, 'Scaling on GPU duty cycle'); use queue (the default)",
        )
    if pool.dra_gpus and service.scale_on == "gpu":
        problems.add(
            names.at("scale_on"),
            f"gpu is not allowed on pool {pool.name}, a draGpus pool: {DRA_DUTY_CYCLE_UNKNOWN}; use queue "
            "(the default)",
        )
    if pool.accelerator in CUDA13_UNSUPPORTED:
        problems.add(
            names.at("pool"),
            f"{cut(pool.name)} has {pool.accelerator} GPUs (Volta or older); the pinned vLLM image is a "
            "CUDA 13 build, which supports compute capability 7.5 (Turing) and newer",
        )
    elif pool.driver_version != "LATEST" and not pool.dra_gpus:
        # A DRA pool's driver is the one the stack's installer DaemonSet puts there: COS's latest,
        # as LATEST (dra/driver_installer.py).
        problems.add(
            names.at("pool"),
            f"{cut(pool.name)} runs driverVersion {pool.driver_version}; the pinned vLLM image is a CUDA "
            "13 build, which needs an R580+ driver: set the pool's driverVersion: LATEST",
        )
    if pool.queued_provisioning:
        problems.add(
            names.at("pool"),
            f"{cut(pool.name)} takes nodes only through queued provisioning (Kueue's "
            "ProvisioningRequests): a Deployment's Pods would wait forever; serve from a pool that "
            "scales by itself",
        )
    return sized


def _machine_gpu_counts(pool: GpuPool) -> list[int]:
    accelerator = load_catalog().accelerator(pool.accelerator)
    return sorted({m.gpus for m in accelerator.machine_types.values()}) if accelerator else []


def _check_multi_node(
    service: ServingConfig,
    pool: GpuPool,
    names: KeyNames,
    problems: Problems,
    notes: list[str],
    *,
    autopilot: bool,
) -> bool:
    """A replica above a node's GPUs spans whole nodes of a Standard pool (a LeaderWorkerSet); whether
    it does."""
    gpus, per_node = service.gpus_per_replica, pool.gpus_per_node or 1
    if autopilot:
        # A profile's gpusPerNode is GPUs per Pod, defaulted to the smallest the GPU offers: a larger
        # replica more often means a profile set too small than a replica meant to span Pods, and
        # Autopilot picks the nodes.
        problems.add(
            names.at("gpus_per_replica"),
            f"{gpus} is more than Autopilot profile {pool.name}'s {per_node} GPUs per Pod "
            f"(gpusPerNode): raise its gpusPerNode to {gpus} if {pool.accelerator} offers it; a replica "
            "spanning nodes (a LeaderWorkerSet) is built on Standard pools only",
        )
        return False
    check_replica_nodes(gpus, per_node, f"pool {pool.name}'s {per_node} GPUs per node", names, problems)
    if gpus % per_node:
        return False
    counts = _machine_gpu_counts(pool)
    if any(count >= gpus for count in counts):
        # Legal, and sometimes meant, but pipeline parallel over the network is slower than one node's
        # tensor parallel: say so rather than split a replica the GPU could keep whole.
        notes.append(
            f"note: {names.at('gpus_per_replica')}: {gpus} spans {gpus // per_node} nodes of pool "
            f"{pool.name} ({per_node} GPUs each), pipeline parallel over the network; {pool.accelerator} "
            f"machines with {min(c for c in counts if c >= gpus)} GPUs would keep a replica on one node "
            "(the pool's gpusPerNode)"
        )
    return True


def pool_replica(service: ServingConfig, pool: GpuPool) -> Replica:
    """The replica the pool gives the service, for the fit rules: its Pods' GPUs (vLLM's tensor-parallel
    size), the GPU, and the disk a Hugging Face model is downloaded to, with how to grow it."""
    gpus, per_node = service.gpus_per_replica, pool.gpus_per_node
    disk = container_size(pool, gpus)["disk_gib"]
    facts = model_facts(service)
    weights = facts.least_weights_bytes if facts else None
    share = gpus / per_node if per_node and gpus < per_node else 1
    need = math.ceil((4 * math.ceil(weights / GIB) + 4) / share) if weights else 0
    of = f"a quarter of the replica's {gpus}/{per_node} share" if share < 1 else "a quarter"
    if pool.local_ssd_count:
        fix = (
            f" ({of} of pool {pool.name}'s {pool.local_ssd_count} Local SSDs, which hold its ephemeral "
            f"storage): give it Local SSDs for at least {need} GiB"
        )
    else:
        fix = (
            f" ({of} of pool {pool.name}'s {pool.disk_size_gb} GB boot disk): raise its diskSizeGb to at "
            f"least {need}"
        )
    if pool.sharing:
        accelerator, why = None, f"pool {pool.name} shares its GPUs"
    else:
        accelerator = load_catalog().accelerator(pool.accelerator)
        why = f"{pool.accelerator} is not a GPU type this package knows"
    return Replica(
        gpus=gpus,
        tensor_parallel=None if pool.mig_partition_size else min(gpus, per_node or gpus),
        accelerator=accelerator,
        unknown_gpu=why,
        download_gib=disk,
        download_fix=fix,
        mig_partition=pool.mig_partition_size,
    )


def check_model_on_pool(
    service: ServingConfig,
    pool: GpuPool,
    names: KeyNames,
    problems: Problems,
    notes: list[str],
    *,
    autopilot: bool,
) -> None:
    """What knowing the model decides on this pool (fit.py), and a replica size that strands GPUs."""
    facts = check_fit(service, pool_replica(service, pool), names, problems, notes)
    check_stranded(service, pool, facts, names, problems, autopilot=autopilot)


def check_stranded(
    service: ServingConfig,
    pool: GpuPool,
    facts: ModelFacts | None,
    names: KeyNames,
    problems: Problems,
    *,
    autopilot: bool,
) -> None:
    gpus, per_node = service.gpus_per_replica, pool.gpus_per_node
    if not per_node or gpus >= per_node or not per_node % gpus or pool.mig_partition_size or autopilot:
        return
    fitting = [n for n in range(1, per_node + 1) if per_node % n == 0]
    if facts is not None and facts.attention_heads is not None:
        fitting = [n for n in fitting if n in tensor_parallel_sizes(facts, per_node)]
    problems.add(
        names.at("gpus_per_replica"),
        f"{gpus} leaves {per_node % gpus} of pool {pool.name}'s {per_node} GPUs a node unused (a replica's "
        f"GPUs are on one node); sizes that use them all: {listing(fitting)}",
    )


def check_weights_cache(service: ServingConfig, pool: GpuPool, names: KeyNames, problems: Problems) -> None:
    """A gs:// model read through Cloud Storage FUSE: its weights fit the file cache a Pod can hold
    (where the size of the weights is known)."""
    if weights_source(service.model) != "gcs" or service.weights.via != "cloudStorageFuse":
        return
    cache = weights_cache(pool, pod_gpus(service, pool), weights_bytes(service))
    if cache.problem:
        problems.add(names.at("model"), cache.problem)


def check_hyperdisk_ml(
    pool: GpuPool, names: KeyNames, problems: Problems, notes: list[str], *, autopilot: bool
) -> None:
    """The pool's nodes attach Hyperdisk ML; the versions it needs, as a note."""
    accelerator = load_catalog().accelerator(pool.accelerator)
    if accelerator is None:  # reported by the pool rules
        return
    machine = accelerator.machine_type(pool.machine_type) if pool.machine_type else None
    # An Autopilot profile's machine is GKE's pick among its GPU's machine series.
    series = (machine.series,) if machine else accelerator.machine_series
    label = f"{pool.name} ({pool.machine_type or pool.accelerator})"
    check_hyperdisk_ml_machine(series, label, names.at("weights.via"), problems)
    standard = "" if autopilot else f", and {STANDARD_MIN_VERSION} for the transfer's node pools"
    notes.append(
        f"note: {names.at('weights.via')}: hyperdiskMl needs GKE {POPULATOR_MIN_VERSION} or later (the "
        f"Volume Populator){standard}; check the cluster's version"
    )


def check_availability(service: ServingConfig, pool: GpuPool, names: KeyNames, notes: list[str]) -> None:
    """A single replica on capacity that Compute Engine may take back at any time is warned about."""
    spot_only = (
        all(step == "spot" for step in pool.capacity_ladder)
        if pool.capacity_ladder
        else pool.spot and not pool.on_demand_fallback
    )
    if spot_only and service.replicas.min < 2:
        notes.append(
            f"warning: {names.at('replicas.min')}: {service.name} runs one replica on pool {pool.name}, "
            "whose nodes are all Spot VMs: a preemption (30 seconds' notice) stops the service until a "
            "new node, the image and the weights are up; run replicas.min 2, or give the pool a "
            "capacity ladder with an on-demand or reservation step (capacityLadder)"
        )


def pool_surges(pool: GpuPool, services: Sequence[ServingConfig]) -> set[str]:
    """The names of the pool's services whose rollouts surge a replica (sizing.surge_services); a
    disaggregated service's where each of its roles does."""
    users = [s for s in services if s.pool == pool.name]
    views = {s.name: capacity_views(s, pool) for s in users}
    surging = surge_services(
        pool, ((v.name, v.replicas.max, v.gpus_per_replica) for s in users for v in views[s.name])
    )
    return {s.name for s in users if all(v.name in surging for v in views[s.name])}


def note_rollouts(entries: Sequence[Entry], pool: GpuPool, notes: list[str]) -> None:
    """Where a rollout of a single replica cannot surge (no room on the pool), the render says a
    rollout takes the service down."""
    surging = pool_surges(pool, [s for _, s in entries])
    for names, service in entries:
        if service.pool == pool.name and service.name not in surging and service.replicas.min < 2:
            notes.append(
                f"note: {names.prefix}: a rollout of {service.name} "
                + describe_rollout(
                    pool, service.gpus_per_replica, service.replicas.min, False, names.key("replicas.min")
                )
            )


def check_capacity(entries: Sequence[Entry], pool: GpuPool, problems: Problems) -> None:
    """The replicas' GPUs fit the pool at its largest (Standard pools with maxNodes), each message
    keyed to what the user must change: a replica larger than the pool, or one spread over more nodes
    than a machine of the GPU needs, is its gpusPerReplica; otherwise the replicas."""
    users = [(n, s) for n, s in entries if s.pool == pool.name]
    if not users or pool.max_nodes is None or not pool.gpus_per_node or pool.sharing:
        return
    per_node = pool.schedulable_gpus_per_node
    capacity = pool.max_nodes * per_node
    largest = f"maxNodes {pool.max_nodes} x {per_node}"
    for names, s in [(n, s) for n, s in users if s.gpus_per_replica > capacity]:
        problems.add(
            names.at("gpus_per_replica"),
            f"{s.gpus_per_replica} is more than pool {pool.name} holds at its largest ({capacity} GPUs: "
            f"{largest}); lower it to {capacity} or less, or raise the pool's maxNodes to "
            f"{-(-s.gpus_per_replica // per_node)}",
        )
    users = [(n, s) for n, s in users if s.gpus_per_replica <= capacity]
    asked = sum(s.replicas.max * s.gpus_per_replica for _, s in users)
    if not users or asked <= capacity:
        return
    terms = " + ".join(f"{s.name} {s.replicas.max} x {s.gpus_per_replica}" for _, s in users)
    need = (
        f"the services on pool {pool.name} need {asked} GPUs ({terms}), more than its {capacity} ({largest})"
    )
    counts = _machine_gpu_counts(pool)
    split = [
        (n, s)
        for n, s in users
        if s.gpus_per_replica > per_node and any(c >= s.gpus_per_replica for c in counts)
    ]
    # A replica spread over nodes where one machine of the GPU would hold it: its size is the mistake.
    for names, s in split:
        machine = min(c for c in counts if c >= s.gpus_per_replica)
        problems.add(
            names.at("gpus_per_replica"),
            f"{s.gpus_per_replica} spans {s.gpus_per_replica // per_node} of pool {pool.name}'s nodes "
            f"({per_node} GPU(s) each), and {need}; lower {names.key('gpus_per_replica')} to {per_node}, "
            f"give the pool machines with {machine} GPUs (its gpusPerNode), or raise its maxNodes",
        )
    if not split:
        problems.add(users[-1][0].at("replicas"), f"{need}; lower the replicas or raise maxNodes")
