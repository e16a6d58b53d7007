"""What the stack's GPUDirect pools ask of its network (`gke-gpu:network.gpudirectCidr`): one range per
stack, every flavour's subnets in it, clear of the cluster's ranges, and one zone for each RDMA
flavour's pools (the stack creates one zonal RoCE VPC per flavour). Typed on `GpuDirectPool`, what this
domain reads of a GPU pool (gpu/pool.py's GpuPool is one), so that gpudirect imports no gpu module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..core.common import cut
from ..core.section import SectionContext
from ..network.model import NetworkConfig
from .flavors import DEFAULT_GPUDIRECT_CIDR, FLAVORS, GpuDirectFlavor, check_gpudirect_cidr


class GpuDirectPool(Protocol):
    """What GPUDirect reads of a GPU pool (gpu/pool.py GpuPool)."""

    @property
    def name(self) -> str: ...
    @property
    def zones(self) -> list[str] | None: ...
    @property
    def second_network(self) -> bool: ...
    @property
    def gpudirect_flavor(self) -> GpuDirectFlavor | None: ...
    @property
    def multi_network(self) -> bool: ...
    @property
    def dranet(self) -> bool: ...
    @property
    def stack_networks(self) -> bool: ...


def check_gpudirect_range(
    network: NetworkConfig,
    written: Sequence[tuple[int, GpuDirectPool]],
    pools: Sequence[GpuDirectPool],
    ctx: SectionContext,
) -> NetworkConfig:
    """The GPUDirect range, resolved (its default where a pool needs it) and checked: `written`, the
    shape-valid pools with their index (one that failed its own checks counts), `pools` the resolved
    ones (only they know their machine type, which decides whether a DRANET pool attaches the stack's
    VPCs)."""
    key = ctx.key("network.gpudirectCidr")
    if not any(p.multi_network or p.second_network for _, p in written) and not any(
        p.stack_networks for p in pools
    ):
        # A pool that failed its own checks may be the one with gpudirect: not judged then.
        if network.gpudirect_cidr is not None and not ctx.broken.any_pool():
            ctx.problems.add(
                key,
                f"{cut(network.gpudirect_cidr)} would be ignored: no GPU pool has gpudirect: true on "
                "networks this program creates (multi-networking, or DRANET on A4X Max; elsewhere "
                "GKE's DRANET makes its own networks); remove it or turn GPUDirect on for a pool",
            )
        return network
    cidr = network.gpudirect_cidr or DEFAULT_GPUDIRECT_CIDR
    ranges = (
        []
        if network.existing
        else [
            (ctx.key(f"network.{name}"), value)
            for name, value in (
                ("subnetCidr", network.subnet_cidr),
                ("podsCidr", network.pods_cidr),
                ("servicesCidr", network.services_cidr),
            )
        ]
    )
    shown_key = key if network.gpudirect_cidr else f"{key} (default {DEFAULT_GPUDIRECT_CIDR})"
    check_gpudirect_cidr(cidr, ranges, shown_key, ctx.problems)
    if network.existing:
        ctx.notes.append(
            f"{key}: the GPUDirect subnets take {cidr}; the existing VPC's ranges could not be "
            "checked against it, so make sure none of them overlaps it"
        )
    resolved = {p.name: p for p in pools}
    # Per RDMA flavour (each has its own RoCE VPC), its first pool's index and zone.
    firsts: dict[str, tuple[int, str]] = {}
    for i, each in written:
        pool = resolved.get(each.name)
        flavor = pool.gpudirect_flavor if pool is not None else None
        if pool is None or flavor is None or not FLAVORS[flavor].roce or not pool.stack_networks:
            continue
        if len(pool.zones or []) != 1:
            continue  # reported by the pool's own rules
        zone = (pool.zones or [""])[0]
        first_rdma = firsts.setdefault(flavor, (i, zone))
        if zone != first_rdma[1]:
            ctx.problems.add(
                ctx.key(f"gpuPools[{i}].zones"),
                f"{[zone]} differs from gpuPools[{first_rdma[0]}]'s zone {first_rdma[1]}: this program "
                f"creates one RoCE VPC per stack for {flavor}, and its network profile is zonal; put the "
                f"stack's {flavor} pools in one zone, or those of another zone in a stack of their own",
            )
    return network.model_copy(update={"gpudirect_cidr": cidr})
