"""GPU pool rules for GPUDirect networking: which machines have it, in which flavour, and where the
nodes of a pool with it must be."""

from __future__ import annotations

from ..core.catalog import MachineType
from ..core.common import cut, listing
from ..core.gke_version import parse, satisfies
from ..gpudirect.flavors import (
    DRANET_FLAVORS,
    DRANET_MIN_VERSION,
    DRANET_ONLY_FLAVORS,
    MACHINE_FLAVORS,
    UNSUPPORTED_MACHINES,
    UNVERIFIED_MACHINES,
    GpuDirectFlavor,
    GpuDirectNetworking,
)
from .placement_rules import FLEX_COMPACT
from .pool import GpuPool
from .rule_base import PoolRuleBase

# The first patch of each GKE minor that runs the flavour (cluster-toolkit gpu_direct.tf, whose own
# check is disabled by a typo; minors not listed are not gated). RDMA's minimum is unpublished.
MIN_VERSIONS = {
    GpuDirectFlavor.TCPX: ("1.27.16-gke.2874000", "1.28.15-gke.3163000", "1.29.15-gke.2467000"),
    GpuDirectFlavor.TCPXO: (
        "1.28.15-gke.3163000",
        "1.29.15-gke.2467000",
        "1.30.14-gke.1922000",
        "1.31.14-gke.1243000",
        "1.32.11-gke.1174000",
    ),
}


# Flavours without a published minimum, and what is known of theirs.
UNGATED_MINIMUMS = {
    GpuDirectFlavor.RDMA_A4X: "at a version that offers A4X (minimum unpublished; cluster-toolkit's "
    "examples/gke-a4x pins 1.35)",
    GpuDirectFlavor.RDMA_A4X_MAX: "at a version that offers A4X Max (1.34.3-gke.1318000, cluster-toolkit's "
    "examples/gke-a4x-max-bm README, which pins 1.35) and DRANET (1.34.1-gke.1829001)",
}
# The version a cluster-toolkit example runs each of them on: a stack whose minimumVersion is at
# least that gets no note (it has done what the note would ask).
UNGATED_KNOWN_GOOD = {
    # A3 Ultra and A4: cluster-toolkit's blueprints ran 1.31 first (Dec 2024 - May 2025), 1.35 now
    # (../shared/reference/gke-gpu-scale-out.md 1b, "RDMA on A3 Ultra / A4").
    GpuDirectFlavor.RDMA: "1.31",
    GpuDirectFlavor.RDMA_A4X: "1.35",
    GpuDirectFlavor.RDMA_A4X_MAX: "1.34.3-gke.1318000",
}


def minor_gate(versions: tuple[str, ...], cluster_version: str | None) -> str | None:
    """The gate that applies to the cluster's minimum version: its minor's entry, the first entry
    when its minor is older than every listed one, None when it is newer (or no version is set)."""
    if cluster_version is None:
        return None
    minor = parse(cluster_version)[0]
    for version in versions:
        if parse(version)[0] == minor:
            return version
    return versions[0] if minor < parse(versions[0])[0] else None


def gpudirect_machines() -> str:
    return listing(f"{machine} ({flavor})" for machine, flavor in MACHINE_FLAVORS.items())


class GpuDirectRules(PoolRuleBase):
    def _check_gpudirect(
        self, pool: GpuPool, path: str, machine: MachineType | None, zones: tuple[str, ...]
    ) -> None:
        """GPUDirect needs a machine with GPU NICs, one zone (the NICs' subnets and RoCE VPC are zonal,
        and an all-reduce is only as fast as its slowest link), and is best compact-placed."""
        if pool.gpudirect_networking is not None and not pool.gpudirect:
            self.problems.add(
                self.at(path, "gpudirect_networking"),
                f"{cut(str(pool.gpudirect_networking))} is only allowed with {self.key('gpudirect')}: true",
            )
        if not pool.gpudirect or machine is None:
            return
        key = self.at(path, "gpudirect")
        if machine.name in UNSUPPORTED_MACHINES:
            self.problems.add(
                key, f"true is not supported on {machine.name}: {UNSUPPORTED_MACHINES[machine.name]}"
            )
            return
        flavor = MACHINE_FLAVORS.get(machine.name)
        if flavor is None:
            self.problems.add(
                key,
                f"true is not allowed on {machine.name} ({machine.gpus} x {pool.accelerator}): it has no "
                f"GPU-to-GPU NICs; machines with GPUDirect: {gpudirect_machines()}",
            )
            return
        # The machine type may be resolved here only (pool.dranet reads the pool's own field).
        dranet = pool.gpudirect_networking == GpuDirectNetworking.DRANET or (
            pool.gpudirect_networking is None and flavor in DRANET_ONLY_FLAVORS
        )
        if flavor in DRANET_ONLY_FLAVORS and not dranet:
            self.problems.add(
                self.at(path, "gpudirect_networking"),
                f"{cut(str(pool.gpudirect_networking))} is not offered on {machine.name} ({flavor}): its "
                "RDMA NICs reach Pods through GKE's DRANET only (cluster-toolkit's examples/gke-a4x-max-bm "
                "declares no multi-network objects; NVIDIA AI Cluster Runtime, 'GKE A4X Max (GB300) "
                "Networking Prerequisites'); allowed: 'dranet' (the default there)",
            )
        if dranet:
            self._check_dranet(pool, path, machine, flavor)
        if len(zones) != 1:
            given = (
                f"{list(zones)} has {len(zones)} zones"
                if pool.zones is not None
                else (f"unset (the {pool.accelerator} zones of the region: {listing(zones) or 'none'})")
            )
            self.problems.add(
                self.at(path, "zones"),
                f"{given}; {self.key('gpudirect')} needs exactly one zone: the GPU NICs' subnets are "
                "regional but a multi-node NCCL job wants its nodes in one zone, close together (the RoCE "
                "VPC of RDMA is zonal, and cross-zone links are slower and billed)",
            )
        if machine.name in UNVERIFIED_MACHINES:
            self.note(
                path,
                f"{machine.name}'s GPUDirect NIC layout is taken to be A3 High's (4 extra NICs, TCPX); "
                "Google's page is not consistent about it (UNVERIFIED): check before relying on it",
            )
        versions = MIN_VERSIONS.get(flavor)
        gate = minor_gate(versions, self.cluster_version) if versions else None
        if gate is not None:
            self.version_gate(path, key, f"GPUDirect-{flavor}", gate)
        elif (not versions or self.cluster_version is None) and not self._known_good(flavor):
            self.note(
                path,
                f"GPUDirect-{flavor} needs GKE "
                + (
                    f"{listing(versions)} or later in those minors"
                    if versions
                    else UNGATED_MINIMUMS.get(flavor, "1.31 or later (minimum unpublished)")
                )
                + f"; {self.version_hint()}",
            )
        # A workload policy places the pool's VMs in one NVLink domain itself (rack_rules.py). Queued
        # provisioning places the nodes of one request itself and takes no placement policy: nothing
        # for the stack to change, so no note (docs/multi-node-training.md says it).
        placed = pool.compact_placement or pool.reservation.block or pool.workload_policy
        if not placed and not pool.queued_provisioning:
            if pool.flex_start and not machine.name.startswith(FLEX_COMPACT):
                self.note(
                    path,
                    "GPUDirect pool without compact placement (flex-start on this machine cannot take "
                    "it): nodes may land far apart in the zone, which lowers all-reduce bandwidth; A3 "
                    "Ultra and A4 take compact placement with flex-start",
                )
            else:
                self.warnings.append(
                    f"{self.at(path, 'compact_placement')}: a GPUDirect pool without compact placement; "
                    "set it to true so the nodes land close together (lower latency, higher all-reduce "
                    "bandwidth)"
                )

    def _known_good(self, flavor: GpuDirectFlavor) -> bool:
        """The stack's minimum version is at least the one cluster-toolkit runs this flavour on."""
        known = UNGATED_KNOWN_GOOD.get(flavor)
        return (
            known is not None and self.cluster_version is not None and satisfies(self.cluster_version, known)
        )

    def _check_dranet(self, pool: GpuPool, path: str, machine: MachineType, flavor: GpuDirectFlavor) -> None:
        """GKE's managed DRANET claims MRDMA NICs (DeviceClass mrdma.google.com) and needs GKE
        1.34.1-gke.1829001 (gpudirect/dranet.py names the sources). Dataplane V2, its other need, is on
        in every Standard cluster this program creates (cluster/gke_cluster.py)."""
        key = self.at(path, "gpudirect_networking")
        if flavor not in DRANET_FLAVORS:
            self.problems.add(
                key,
                f"'dranet' is not offered on {machine.name} ({flavor}): GKE's DRANET claims RDMA NICs "
                "(DeviceClass mrdma.google.com), which only A3 Ultra, A4, A4X and A4X Max have; allowed "
                "there: 'multiNetwork'",
            )
            return
        self.version_gate(path, key, "GKE managed DRANET", DRANET_MIN_VERSION)
