"""NVIDIA's DRA driver, once per cluster that has a GB200/GB300 rack (ComputeDomains) or a pool with
DRA GPUs (GPU allocation, and the NVIDIA driver GKE does not install on those pools)."""

from __future__ import annotations

from typing import cast

import pulumi

from ..core.k8s import Toleration
from ..dra.claims import ARM64_TOLERATION, is_rack
from ..dra.driver import NvidiaDraDriver, NvidiaDraDriverArgs
from ..dra.driver_installer import InstallerVariant, installer_variant
from ..gpu.scheduling import tolerations, union_tolerations
from .declare import declare
from .settings import Settings


def needs_dra_driver(settings: Settings) -> bool:
    return settings.cluster.mode == "standard" and any(
        p.dra_gpus or is_rack(p.accelerator) for p in settings.gpu_pools
    )


def dra_driver(
    settings: Settings,
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
    prefix: str = "",
) -> NvidiaDraDriver | None:
    if not needs_dra_driver(settings):
        return None
    dra_pools = [p for p in settings.gpu_pools if p.dra_gpus]
    racks = sorted({p.accelerator for p in settings.gpu_pools if is_rack(p.accelerator)})
    served = [p for p in settings.gpu_pools if p.dra_gpus or is_rack(p.accelerator)]
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
            pools = [name for name, v in variants.items() if v is variant]
            if pools:
                args[key] = pools  # type: ignore[literal-required]
    if racks:
        args["accelerators"] = racks
    return declare(
        NvidiaDraDriver,
        f"{prefix}dra-driver",
        args,
        opts=pulumi.ResourceOptions(provider=provider, depends_on=depends_on),
        section="gpuPools",
    )
