"""GPU pool rules for DRA GPUs: a Standard pool whose GPUs NVIDIA's DRA driver hands out through
ResourceClaims instead of GKE's device plugin (`dra_gpus`).

GKE's "Prepare GKE infrastructure for DRA workloads" (docs.cloud.google.com/kubernetes-engine/docs/
how-to/set-up-dra, read 2026-11): DRA needs GKE 1.34 or later; node auto-provisioning and Autopilot
clusters do not support it; automatic GPU driver installation is not supported with it (the pool is
created with gpu-driver-version=disabled); and time-sharing GPUs, multi-instance GPUs and MPS cannot
be used with it. Each is refused here under the key that asks for it.
"""

from __future__ import annotations

from .pool import GpuPool
from .rule_base import PoolRuleBase

DRA_GPUS_MIN_VERSION = "1.34"
SET_UP_DRA = "GKE's DRA setup page"


class DraRules(PoolRuleBase):
    def _check_dra_gpus(self, pool: GpuPool, path: str) -> None:
        if not pool.dra_gpus:
            return
        key = self.at(path, "dra_gpus")
        if self.autopilot:
            self.problems.add(
                key, f"not allowed on Autopilot: Autopilot clusters don't support DRA ({SET_UP_DRA})"
            )
            return
        if pool.sharing is not None:
            self.problems.add(
                self.at(path, "sharing"),
                f"not allowed with {self.key('dra_gpus')}: GKE offers no time-sharing or MPS with DRA "
                f"({SET_UP_DRA}); remove sharing or {self.key('dra_gpus')}",
            )
        if pool.mig_partition_size is not None:
            self.problems.add(
                self.at(path, "mig_partition_size"),
                f"not allowed with {self.key('dra_gpus')}: GKE offers no multi-instance GPUs with DRA "
                f"({SET_UP_DRA}); remove {self.key('mig_partition_size')} or {self.key('dra_gpus')}",
            )
        if pool.capacity_ladder is not None:
            self.problems.add(
                self.at(path, "capacity_ladder"),
                f"not allowed with {self.key('dra_gpus')}: GKE creates a ladder's node pools itself "
                f"(node auto-provisioning), which DRA does not support ({SET_UP_DRA})",
            )
        if pool.driver_version != "INSTALLATION_DISABLED":
            self.problems.add(
                self.at(path, "driver_version"),
                f"{pool.driver_version} is not allowed with {self.key('dra_gpus')}: GKE does not install "
                f"the GPU driver on a DRA pool ({SET_UP_DRA}); set 'INSTALLATION_DISABLED': the stack "
                "then installs it with Google's driver installer DaemonSet (none is published for GB300: "
                "there, install the driver yourself)",
            )
        self.version_gate(path, key, self.key("dra_gpus"), DRA_GPUS_MIN_VERSION)
