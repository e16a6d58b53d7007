"""The DRA driver's plan: NVIDIA's DRA driver once per Standard cluster that has an NVL72 rack
(ComputeDomains) or a pool with DRA GPUs (GPU allocation, and the NVIDIA driver GKE does not install on
those pools), its args, and the commands that show its devices, as data. Pure: stack/program_pools.py
declares what this plans; the driver's modules are imported by the stacks that have it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from ..gpu.pool import GpuPool
from ..gpu.scheduling import tolerations, union_tolerations
from .claims import ARM64_TOLERATION, GPU_DEVICE_CLASS, is_rack

if TYPE_CHECKING:
    from ..core.k8s import Toleration
    from .driver import NvidiaDraDriverArgs

# A DRA pool's GPUs: one ResourceSlice per node of the driver, its devices the GPUs.
DRA_SLICE_COLUMNS = r"NODE:.spec.nodeName,DRIVER:.spec.driver,GPUS:.spec.devices[*].name"


def needs_dra_driver(pools: Sequence[GpuPool], *, standard: bool) -> bool:
    """A Standard cluster with an NVL72 rack or a `draGpus` pool runs the driver."""
    return standard and any(p.dra_gpus or is_rack(p.accelerator) for p in pools)


def driver_args(pools: Sequence[GpuPool], *, standard: bool) -> NvidiaDraDriverArgs | None:
    """NvidiaDraDriver's args for the cluster's pools, or None where it needs no driver."""
    if not needs_dra_driver(pools, standard=standard):
        return None
    from .driver_installer import InstallerVariant, installer_variant

    dra_pools = [p for p in pools if p.dra_gpus]
    racks = sorted({p.accelerator for p in pools if is_rack(p.accelerator)})
    served = [p for p in pools if p.dra_gpus or is_rack(p.accelerator)]
    args: NvidiaDraDriverArgs = {
        "compute_domains": bool(racks),
        "gpus": bool(dra_pools),
        # The enums' plain values ("Exists"), which the args' check takes as well as the members.
        "tolerations": cast(
            "list[Toleration]",
            union_tolerations(
                [*(tolerations(p, autopilot=False) for p in served), [ARM64_TOLERATION] if racks else []]
            ),
        ),
    }
    if dra_pools:
        args["node_pools"] = [p.name for p in dra_pools]
        # GKE installs no driver on a DRA pool: Google's COS installer does, on those pools only
        # (dra/driver_installer.py; none is published for GB300).
        variants = {p.name: installer_variant(p.accelerator) for p in dra_pools}
        for key, variant in (
            ("driver_installer_pools", InstallerVariant.COS),
            ("driver_installer_a4x_pools", InstallerVariant.COS_A4X),
        ):
            named = [name for name, v in variants.items() if v is variant]
            if named:
                args[key] = named  # type: ignore[literal-required]
    if racks:
        args["accelerators"] = racks
    return args


def dra_checks(pools: Sequence[GpuPool], *, standard: bool) -> dict[str, str]:
    """The commands that show a DRA pool's GPUs (the driver's ResourceSlices and the claims), the
    driver's Pods and a rack's ComputeDomains."""
    checks: dict[str, str] = {}
    if any(p.dra_gpus for p in pools):
        checks["draResourceSlices"] = (
            f"kubectl get resourceslices --field-selector spec.driver={GPU_DEVICE_CLASS} "
            f"-o custom-columns='{DRA_SLICE_COLUMNS}'"
        )
        checks["draResourceClaims"] = "kubectl get resourceclaims -A -o wide"
    if needs_dra_driver(pools, standard=standard):
        from .driver import DRA_DRIVER_NAMESPACE

        checks["draDriverPods"] = f"kubectl get pods -n {DRA_DRIVER_NAMESPACE} -o wide"
    if any(is_rack(p.accelerator) for p in pools):
        checks["computeDomains"] = "kubectl get computedomains -A"
    return checks
