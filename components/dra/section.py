"""What the stack's GPU pools ask of the cluster's one DRA driver (`gke-gpu:gpuPools[].draGpus` and the
NVL72 racks): checked once every pool is resolved (gpu/section.py)."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.common import cut
from ..core.section import SectionContext
from ..gpu.pool import GpuPool
from .claims import NO_INSTALLER_ACCELERATORS, is_rack


def check_dra_pools(
    written: Sequence[tuple[int, GpuPool]], pools: Sequence[GpuPool], ctx: SectionContext
) -> None:
    """The cluster's one DRA driver allocates GPUs on every node its kubelet plugin runs on, and must
    not where GKE's device plugin does: a rack pool beside a DRA-GPU pool takes DRA GPUs too. A DRA
    pool's driver comes from Google's installer DaemonSet (dra/driver_installer.py), which Google
    publishes for no GB300 node: the user installs it there (a note)."""
    resolved = {p.name: p for p in pools}
    if any(p.dra_gpus for p in pools):
        for i, rack in written:
            if rack.name in ctx.broken.pools or rack.dra_gpus or not is_rack(rack.accelerator):
                continue
            ctx.problems.add(
                ctx.key(f"gpuPools[{i}].draGpus"),
                f"required on {cut(rack.name)} ({rack.accelerator}) beside a pool with draGpus: the "
                "cluster's one DRA driver, which the rack's ComputeDomains need, then allocates GPUs on "
                "every node it runs on, and must not share a node with GKE's device plugin",
            )
    for i, each in written:
        pool = resolved.get(each.name)
        if pool is None or not pool.dra_gpus or pool.accelerator not in NO_INSTALLER_ACCELERATORS:
            continue
        ctx.notes.append(
            f"{ctx.key(f'gpuPools[{i}].draGpus')}: {cut(pool.name)} ({pool.accelerator}) gets no NVIDIA "
            "driver: GKE installs none on a DRA pool, and Google publishes no driver installer "
            "DaemonSet for GB300; install the driver on its nodes yourself before its Pods claim GPUs"
        )
