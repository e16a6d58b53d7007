"""GPU pool rules for a capacity ladder: a Standard pool whose nodes come from a custom ComputeClass
that tries reservation, on-demand, flex-start and Spot in the order listed (gpu/capacity_ladder.py).

The ladder decides where each node comes from, so the pool's own ways (spot, flexStart, queued
provisioning, an on-demand fallback) are refused beside it; each step must be one the pool's GPU
offers; and a GPUDirect pool is refused: a ComputeClass has no field for the extra NICs.
"""

from __future__ import annotations

from ..core.catalog import Accelerator
from ..core.common import COMPUTE_CLASS_POOLS_MIN_VERSION, cut
from .pool import GpuPool
from .pool_args import CapacityStep
from .rule_base import PoolRuleBase


class LadderRules(PoolRuleBase):
    def _check_ladder(self, pool: GpuPool, path: str, accelerator: Accelerator) -> None:
        steps = pool.capacity_ladder
        if steps is None:
            return
        key = self.at(path, "capacity_ladder")
        if self.autopilot:
            self.problems.add(
                key,
                "not allowed on Autopilot: the ladder is a Standard cluster's ComputeClass (an Autopilot "
                "profile already prefers Spot and falls back to on-demand: "
                f"{self.key('on_demand_fallback')})",
            )
            return
        for i, step in enumerate(steps):
            if step in steps[:i]:
                self.problems.add(f"{key}[{i}]", f"{step} is listed twice")
        for name, value in (
            ("spot", pool.spot),
            ("flex_start", pool.flex_start),
            ("queued_provisioning", pool.queued_provisioning),
            ("compact_placement", pool.compact_placement),
            ("workload_policy", pool.workload_policy),
        ):
            if value:
                self.problems.add(
                    self.at(path, name),
                    f"true is not allowed with {self.key('capacity_ladder')}: the ladder decides where "
                    "each node comes from (list spot or flexStart as a step)"
                    if name in ("spot", "flex_start")
                    else f"true is not allowed with {self.key('capacity_ladder')}: GKE creates the "
                    "ladder's node pools itself, without it",
                )
        if pool.min_nodes:
            self.problems.add(
                self.at(path, "min_nodes"),
                f"{pool.min_nodes} is not allowed with {self.key('capacity_ladder')}; allowed: 0 (GKE "
                "creates the ladder's nodes when Pods ask for them and removes them when idle)",
            )
        if pool.gpudirect:
            self.problems.add(
                self.at(path, "gpudirect"),
                f"true is not allowed with {self.key('capacity_ladder')}: a ComputeClass cannot attach "
                "the extra GPU NICs (it has no field for additional node networks), so GKE's node pools "
                "for it would lack GPUDirect; use separate pools for the rungs",
            )
        if pool.second_network:
            self.problems.add(
                self.at(path, "second_network"),
                f"true is not allowed with {self.key('capacity_ladder')}: a ComputeClass cannot attach "
                "additional node networks, so GKE's node pools for it would lack the second NIC; use a "
                "node pool",
            )
        self._check_ladder_steps(pool, path, accelerator, steps)
        if pool.image_cache is not None:
            self.note(
                self.at(path, "image_cache"),
                "GKE creates the ladder's node pools itself and attaches a preloaded disk only for an "
                "image the cluster's GCPResourceAllowlist names: the stack declares one "
                "(ImageCacheAllowlist); a program that uses GpuCapacityLadder alone must declare one too",
            )
        self.version_gate(
            key,
            key,
            "the ladder's node pools, which GKE creates for its ComputeClass (nodePoolAutoCreation),",
            COMPUTE_CLASS_POOLS_MIN_VERSION,
        )
        self.note(
            key,
            f"a ComputeClass has no node limit, so {self.key('max_nodes')} bounds only Kueue's quota and "
            "the cost estimate, and the project's GPU quota bounds the rest",
        )

    def _check_ladder_steps(
        self, pool: GpuPool, path: str, accelerator: Accelerator, steps: list[str]
    ) -> None:
        key = self.at(path, "capacity_ladder")
        reservation = pool.reservation.type
        for i, step in enumerate(steps):
            if step == CapacityStep.SPOT and not accelerator.spot:
                self.problems.add(
                    f"{key}[{i}]",
                    f"spot is not allowed: {accelerator.name} machine types are not sold as Spot VMs",
                )
            if step == CapacityStep.FLEX_START and not accelerator.flex_start:
                self.problems.add(
                    f"{key}[{i}]",
                    f"flexStart is not allowed: {accelerator.name} machine types are not offered as "
                    "flex-start VMs",
                )
            if step == CapacityStep.RESERVATION and reservation == "ANY" and i < len(steps) - 1:
                self.problems.add(
                    f"{key}[{i}]",
                    f"reservation with {self.key('reservation.type')} ANY falls back to on-demand by itself "
                    "(GKE's AnyBestEffort), so the steps after it would never be tried; name the "
                    "reservation (type SPECIFIC) or make it the last step",
                )
            if step == CapacityStep.RESERVATION and reservation == "NONE":
                self.problems.add(
                    f"{key}[{i}]",
                    f"reservation needs the pool's {self.key('reservation')} (type SPECIFIC with a name, "
                    "or ANY): it names what the step consumes",
                )
        if reservation != "NONE" and CapacityStep.RESERVATION not in steps:
            self.problems.add(
                self.at(path, "reservation.type"),
                f"{cut(reservation)} is not used: {self.key('capacity_ladder')} has no reservation step; "
                "add one or leave the reservation out",
            )
