"""The stack file's workloads section (`gke-gpu:workloads`): each sample, all-reduce test and load test
resolved onto its pool (or service) and judged against it: the pool's GPUs, architecture, sharing,
queued provisioning and size, Kueue for the all-reduce, and a service for each load test."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..cluster.model import ClusterConfig
from ..core.common import cut, listing
from ..core.images import BLACKWELL_ACCELERATORS
from ..core.section import SectionContext
from ..dra.claims import is_rack
from ..gpu.pool import GpuPool
from .model import WorkloadConfig

# Samples whose image has no linux/arm64 build (pytorch/pytorch publishes amd64 only:
# pytorch/pytorch issues 145716 and 157139, still open 2026-11).
AMD64_ONLY_WORKLOADS = {
    "pytorch-smoke": "pytorch/pytorch",
    # Google's NCCL test images (the gIB diagnostic image, the TCPX/TCPXO plugin images) are amd64
    # builds; their Arm builds are separate images (nccl_allreduce_args.RUNNERS).
    "nccl-allreduce": "us-docker.pkg.dev/gce-ai-infra NCCL test images",
}
# nccl-allreduce's node count when a workload leaves `nodes` out.
NCCL_DEFAULT_NODES = 2


class Around(NamedTuple):
    """What the workloads' rules read of the other sections."""

    cluster: ClusterConfig
    # The shape-valid gpuPools entries (a sample's default pool is the first written) and the resolved.
    written_pools: Sequence[GpuPool]
    pools: Sequence[GpuPool]
    # The names of the serving entries (a load test names one).
    services: Sequence[str]
    # gke-gpu:batch.kueue (the all-reduce is queued by Kueue).
    kueue: bool
    # An existing generic cluster's device plugin shares its GPUs (devicePlugin.sharing).
    plugin_sharing: bool


def check_workloads(
    workloads: Sequence[tuple[int, WorkloadConfig]], around: Around, ctx: SectionContext
) -> tuple[WorkloadConfig, ...]:
    """The workloads section (`workloads`: the shape-valid entries with their index), each resolved onto
    its pool (the first by default) and judged against it; `around`: what they read of the other
    sections."""
    cluster, pools = around.cluster, around.pools
    result: list[WorkloadConfig] = []
    names = [p.name for p in pools]
    seen: set[tuple[str, str | None]] = set()
    on_pools = [w for _, w in workloads if w.name != "serving-load"]
    if cluster.mode != "existing" and on_pools:
        if "gpuPools" in ctx.broken.sections:
            return ()  # the pools' own problem is reported; which pool a sample lands on is unknown
        if not around.written_pools and not ctx.broken.any_pool():
            ctx.problems.add(
                f"{ctx.root}workloads",
                f"{listing(w.name for w in on_pools)} "
                f"{'needs' if len(on_pools) == 1 else 'need'} a GPU pool, and "
                f"{ctx.root}gpuPools is empty",
            )
            return ()
    loaded: set[str] = set()
    for i, w in workloads:
        path = f"{ctx.root}workloads[{i}]"
        if w.name == "serving-load":
            if _serving_load(w, path, around, loaded, ctx):
                result.append(w)
            continue
        for key in ("service", "floors"):
            if getattr(w, key) is not None:
                ctx.problems.add(f"{path}.{key}", f"only allowed for serving-load (name is {w.name})")
        if w.name == "nccl-allreduce":
            if not _nccl_queued(around, path, ctx):
                continue
        elif w.nodes is not None:
            ctx.problems.add(f"{path}.nodes", f"only allowed for nccl-allreduce (name is {w.name})")
        if cluster.mode == "existing":
            if w.pool is not None:
                ctx.problems.add(
                    f"{path}.pool",
                    "not allowed with cluster.mode existing: workloads land on any GPU node",
                )
            pool = None
        else:
            declared = [p.name for p in around.written_pools]
            if w.pool is None and (ctx.broken.pool_indexes[:1] != [0]):
                continue  # the default is the first pool, which failed its own checks
            pool_name = w.pool or declared[0]
            if pool_name in ctx.broken.pools or (w.pool and ctx.broken.unnamed_pools):
                continue  # that pool's own problems are reported; judging the workload would guess
            if pool_name not in names:
                ctx.problems.add(
                    f"{path}.pool",
                    f"{cut(pool_name)} is not a GPU pool of this stack; allowed: {listing(names)}",
                )
                continue
            pool_obj = next(p for p in pools if p.name == pool_name)
            # nccl-allreduce is queued by Kueue, which asks for a queued pool's nodes (its
            # ProvisioningRequest); the other samples are plain Jobs that would wait forever.
            if pool_obj.queued_provisioning and w.name != "nccl-allreduce":
                ctx.problems.add(
                    f"{path}.pool",
                    f"{cut(pool_name)} uses queued provisioning, whose nodes come only through a "
                    "ProvisioningRequest; choose a pool without queuedProvisioning",
                )
                continue
            if (
                w.name == "pytorch-smoke"
                and pool_obj.accelerator in BLACKWELL_ACCELERATORS
                and pool_obj.driver_version != "LATEST"
            ):
                ctx.problems.add(
                    f"{path}.pool",
                    f"{cut(pool_name)} ({pool_obj.accelerator}) runs pytorch-smoke on the CUDA 13 "
                    "build of PyTorch (Blackwell needs it), which needs an R580+ driver: set the pool's "
                    "driverVersion: LATEST",
                )
                continue
            arch = ctx.catalog.accelerators[pool_obj.accelerator].arch
            # A rack's all-reduce runs over NVLink in the Arm build of Google's test image (with or
            # without the rack's RDMA NICs: cluster-toolkit's examples/gke-a4x claims both).
            arm_build = w.name == "nccl-allreduce" and is_rack(pool_obj.accelerator)
            if w.name in AMD64_ONLY_WORKLOADS and arch != "amd64" and not arm_build:
                ctx.problems.add(
                    f"{path}.pool",
                    f"{cut(pool_name)} ({pool_obj.accelerator}) has {arch} hosts, and {w.name}'s image "
                    f"({AMD64_ONLY_WORKLOADS[w.name]}) is published for amd64 only; choose another "
                    "pool or leave this sample out",
                )
                continue
            if w.name == "nccl-allreduce" and not _nccl_pool(w, path, pool_obj, ctx):
                continue
            if w.name == "sharing-demo" and pool_obj.sharing is None:
                ctx.problems.add(
                    f"{path}.pool",
                    f"{cut(pool_name)} has no sharing; sharing-demo needs a pool with "
                    "sharing (TIME_SHARING or MPS); pools with sharing: "
                    + listing(p.name for p in pools if p.sharing),
                )
                continue
            pool = pool_name
        if w.name == "sharing-demo" and cluster.mode == "existing":
            if ctx.flavor_unknown or "devicePlugin" in ctx.broken.sections:
                continue  # judged once the flavor and the device plugin's settings are valid
            if cluster.flavor != "generic" or not around.plugin_sharing:
                ctx.problems.add(
                    f"{path}.name",
                    "'sharing-demo' on an existing cluster needs flavor generic with "
                    "devicePlugin.sharing.timeSlicing",
                )
                continue
        if w.replicas is not None and w.name != "sharing-demo":
            ctx.problems.add(f"{path}.replicas", "only allowed for sharing-demo")
        if (w.name, pool) in seen:
            ctx.problems.add(f"{path}", f"{cut(w.name)} on pool {cut(pool)} is listed twice")
        seen.add((w.name, pool))
        resolved: dict[str, object] = {"pool": pool}
        if w.name == "nccl-allreduce":
            resolved["nodes"] = w.nodes or NCCL_DEFAULT_NODES
        result.append(w.model_copy(update=resolved))
    return tuple(result)


def _serving_load(
    w: WorkloadConfig, path: str, around: Around, loaded: set[str], ctx: SectionContext
) -> bool:
    """serving-load names a service of gke-gpu:serving and nothing of a sample's. False (reported,
    unless the serving section's own problems explain it) when it cannot run."""
    usable = True
    for key, value in (("pool", w.pool), ("replicas", w.replicas), ("nodes", w.nodes)):
        if value is not None:
            usable = False
            ctx.problems.add(
                f"{path}.{key}",
                "not allowed for serving-load: it loads the service named by `service`, from a CPU "
                "node, on the service's own pool and replicas",
            )
    services = list(around.services)
    if w.service is None:
        ctx.problems.add(
            f"{path}.service",
            f"required for serving-load: the {ctx.root}serving entry to load"
            + (f"; services: {listing(services)}" if services else ""),
        )
        return False
    if w.service not in services:
        if not ctx.broken.serving():
            ctx.problems.add(
                f"{path}.service",
                f"{cut(w.service)} is not a service of {ctx.root}serving"
                + (f"; services: {listing(services)}" if services else " (the section is empty)"),
            )
        return False
    if w.service in loaded:
        ctx.problems.add(f"{path}.service", f"{cut(w.service)} is already loaded by another serving-load")
        return False
    loaded.add(w.service)
    # On an existing cluster the serving section refuses the service itself.
    return usable and around.cluster.mode != "existing"


def _nccl_queued(around: Around, path: str, ctx: SectionContext) -> bool:
    """nccl-allreduce's JobSet is queued by Kueue (which also brings JobSet's CRD): a Standard
    cluster with gke-gpu:batch.kueue. False (reported, unless batch is broken) when not."""
    cluster = around.cluster
    if cluster.mode != "standard":
        ctx.problems.add(
            f"{path}.name",
            f"'nccl-allreduce' is not allowed with cluster.mode {cluster.mode}: Kueue queues its JobSet "
            f"on a queue of one of this stack's Standard GPU pools ({ctx.root}batch.kueue)",
        )
        return False
    if "batch" in ctx.broken.sections:
        return False  # the batch section's own problem is reported
    if not around.kueue:
        ctx.problems.add(
            f"{path}.name",
            f"'nccl-allreduce' needs {ctx.root}batch.kueue: true: Kueue admits its JobSet (all its "
            "nodes at once) and installs JobSet, whose CRD the test needs",
        )
        return False
    return True


def _nccl_pool(w: WorkloadConfig, path: str, pool: GpuPool, ctx: SectionContext) -> bool:
    """nccl-allreduce's pool: whole GPUs (each Pod takes every GPU of its node) and room for its
    nodes. False (reported) when not."""
    if pool.sharing or pool.mig_partition_size:
        how = (
            f"shares its GPUs (sharing {pool.sharing.strategy})"
            if pool.sharing
            else f"splits its GPUs (migPartitionSize {pool.mig_partition_size})"
        )
        ctx.problems.add(
            f"{path}.pool",
            f"{cut(pool.name)} {how}; nccl-allreduce takes every whole GPU of each of its nodes: "
            "choose a pool without sharing or MIG",
        )
        return False
    nodes = w.nodes or NCCL_DEFAULT_NODES
    if pool.max_nodes is not None and nodes > pool.max_nodes:
        given = "" if w.nodes else " (the default)"
        ctx.problems.add(
            f"{path}.nodes",
            f"{nodes}{given} is more than the maxNodes {pool.max_nodes} of pool {cut(pool.name)}: the "
            "all-reduce needs that many nodes at once",
        )
        return False
    return True
