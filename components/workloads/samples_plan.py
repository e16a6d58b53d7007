"""The samples' plan (`gke-gpu:workloads`, but the all-reduce tests and the load tests): where each
sample runs (a GPU pool's target: its node selector, tolerations, GPU request and sharing) and
SampleWorkloads' args, as data. Pure: stack/program_jobs.py declares what this plans."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

from ..gpu.existing_plan import EXISTING_TARGET, ExistingGpuPlan
from ..gpu.pool import GpuPool
from ..gpu.scheduling import GPU_TOLERATION, gpus_per_pod, node_selector, tolerations
from .model import SampleKind, WorkloadConfig

if TYPE_CHECKING:
    from ..core.k8s import Toleration
    from .samples_args import GpuTarget, SampleWorkload, SampleWorkloadsArgs

SAMPLES_NAMESPACE = "gpu-samples"
# The workloads that are not samples: nccl-allreduce is a NcclAllReduce of its own, queued by Kueue
# (workloads/batch_plan.py); serving-load a ServingLoadTest beside its service (serving/plan.py).
NOT_SAMPLES = ("nccl-allreduce", "serving-load")


def gpu_target(pool: GpuPool, *, autopilot: bool) -> GpuTarget:
    """Where a sample runs on a GKE pool or profile (optional keys left out, never None)."""
    from .samples_args import GpuTarget, TargetSharing

    target = GpuTarget(
        name=pool.name,
        accelerator=pool.accelerator,
        node_selector=node_selector(pool, autopilot=autopilot),
        # The enums' plain values ("Exists"), which the args' check takes as well as the members.
        tolerations=cast("list[Toleration]", tolerations(pool, autopilot=autopilot)),
        gpus_per_pod=gpus_per_pod(pool, autopilot=autopilot),
    )
    if pool.sharing:
        target["sharing"] = TargetSharing(pool.sharing.strategy)
        target["shared_clients"] = pool.sharing.max_clients_per_gpu
    if pool.dra_gpus:
        # The DRA driver's kubelet plugin injects the driver (CDI), not GKE's device plugin.
        target["dra_gpus"] = True
        target["gke_driver"] = False
    else:
        target["gke_driver"] = True
    return target


def samples_args(
    workloads: Sequence[WorkloadConfig], targets: Mapping[str, GpuTarget]
) -> SampleWorkloadsArgs | None:
    """SampleWorkloads' args for the opted-in samples, each on its target (by pool name; the first by
    default); None without a sample."""
    listed = [w for w in workloads if w.name not in NOT_SAMPLES]
    if not listed:
        return None
    default = next(iter(targets))
    samples: list[SampleWorkload] = []
    for w in listed:
        target = targets[w.pool or default].copy()
        sample: SampleWorkload = {"kind": SampleKind(w.name), "target": target}
        if w.replicas is not None:
            sample["replicas"] = w.replicas
        samples.append(sample)
    return {"workloads": samples, "namespace": SAMPLES_NAMESPACE}


def existing_target(gpu: ExistingGpuPlan) -> GpuTarget:
    """Where a sample runs on a cluster the program does not manage: the GPU nodes by their label (a
    generic cluster's device plugin's), or by GKE's accelerator label; one GPU a Pod."""
    from .samples_args import GpuTarget, TargetSharing

    # The enums' plain values ("Exists"), which the args' check takes as well as the members.
    gpu_taint = cast("list[Toleration]", [dict(GPU_TOLERATION)])
    if not gpu.generic:
        return GpuTarget(
            name=EXISTING_TARGET,
            node_selector={},
            required_node_labels=list(gpu.required_node_labels),
            tolerations=gpu_taint,
            gpus_per_pod=1,
            gke_driver=True,
        )
    target = GpuTarget(
        name=EXISTING_TARGET,
        node_selector=dict(gpu.node_selector),
        tolerations=gpu_taint,
        gpus_per_pod=1,
        gke_driver=False,
    )
    if gpu.time_slicing_replicas:
        target["sharing"] = TargetSharing.TIME_SLICING
        target["shared_clients"] = gpu.time_slicing_replicas
    if gpu.runtime_class_name is not None:
        target["runtime_class_name"] = gpu.runtime_class_name
    return target
