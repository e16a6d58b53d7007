"""GPU pool rules for NVL72 racks (A4X, A4X Max) and NUMA-aligned nodes (G4).

An NVL72 rack is 18 VMs of 4 GPUs joined by NVLink (one NVLink domain, 72 GPUs). Compute Engine
places a managed instance group's VMs in one domain through a workload policy (HIGH_THROUGHPUT,
accelerator topology 1x72), and requires one for A4X and A4X Max groups of more than a single test
instance (Compute Engine "About workload policies in MIGs"; a GKE node pool is such a group). The
pool attaches it as its placement policy (cluster-toolkit modules/compute/resource-policy and
gke-node-pool: placement_policy {type COMPACT, policy_name}).
"""

from ..core.catalog import Accelerator, MachineType
from ..core.common import listing
from .pool import GpuPool
from .rule_base import PoolRuleBase

# Kubernetes' Memory Manager, which the NUMA-aligned kubelet turns on (policy Static), is stable
# from Kubernetes 1.32 (kubernetes.io "Control Memory Management Policies on a Node"). The GKE
# version that first takes GKE's memoryManager field is UNVERIFIED; this is the floor it cannot be under.
NUMA_ALIGNED_MIN_VERSION = "1.32"
# The accelerator whose pools may attach G4's second network (gpudirect/g4_network.py), and the GKE
# version it needs: cluster-toolkit examples/gke-g4/README.md @1047080375, "The required GKE version for
# G4 support is >= 1.32.11-gke.1174000".
G4_ACCELERATOR = "nvidia-rtx-pro-6000"
G4_MIN_VERSION = "1.32.11-gke.1174000"


class RackRules(PoolRuleBase):
    def _check_rack(
        self, pool: GpuPool, path: str, accelerator: Accelerator, machine: MachineType, zones: tuple[str, ...]
    ) -> None:
        if accelerator.gke_min_version:
            self.version_gate(
                path,
                self.at(path, "accelerator"),
                f"a {accelerator.name} node pool",
                accelerator.gke_min_version,
            )
        domain = accelerator.nvlink_domain
        key = self.key("workload_policy")
        if domain is None:
            if pool.workload_policy:
                racks = sorted(
                    m for a in self.catalog.accelerators.values() if a.nvlink_domain for m in a.machine_types
                )
                self.problems.add(
                    self.at(path, "workload_policy"),
                    f"true is not allowed on {machine.name}: a workload policy with an accelerator topology "
                    f"places the VMs of an NVL72 rack; machines in NVL72 racks: {listing(racks)}",
                )
            return
        limit = domain.vms
        gpus = domain.vms * machine.gpus
        if not pool.workload_policy:
            if pool.max_nodes is not None and pool.max_nodes > 1:
                self.problems.add(
                    self.at(path, "workload_policy"),
                    f"required on {machine.name} with {self.key('max_nodes')} {pool.max_nodes}: Compute "
                    "Engine requires a workload policy for A4X and A4X Max node groups other than a single "
                    f"test instance; set {key}: true (its VMs then share one NVLink domain of {gpus} GPUs), "
                    f"or {self.key('max_nodes')}: 1",
                )
            return
        if pool.max_nodes is not None and pool.max_nodes > limit:
            self.problems.add(
                self.at(path, "max_nodes"),
                f"{pool.max_nodes} does not fit one NVLink domain: the workload policy (accelerator topology "
                f"{domain.accelerator_topology}) places {gpus} GPUs, {limit} VMs of {machine.gpus}; allowed: "
                f"1..{limit}; for more racks, add a pool per rack (each gets its own workload policy)",
            )
        if len(zones) != 1 and (pool.zones is not None or self.region_ok):
            self.problems.add(
                self.at(path, "zones"),
                f"{listing(zones) if zones else 'none'}: a workload policy places the VMs within one zone; "
                "list exactly one (the zone of the reservation)",
            )
        if pool.compact_placement:
            self.problems.add(
                self.at(path, "compact_placement"),
                f"true is not allowed with {key}: the workload policy is the pool's placement policy "
                "(a pool takes one)",
            )
        if pool.max_nodes is not None and pool.max_nodes <= limit:
            self.note(
                path,
                f"placement: a workload policy (HIGH_THROUGHPUT, accelerator topology "
                f"{domain.accelerator_topology}) for up to {pool.max_nodes} of one NVLink domain's {limit} "
                "VMs; the reservation must hold them in one block",
            )

    def _numa_aligned(self, pool: GpuPool, path: str, accelerator: Accelerator) -> bool:
        """Whether the pool's kubelet is NUMA-aligned: the pool's own choice, else its GPU's default."""
        aligned = accelerator.numa_aligned_default if pool.numa_aligned is None else pool.numa_aligned
        if aligned:
            self.version_gate(
                path,
                self.at(path, "numa_aligned"),
                f"{self.key('numa_aligned')} (the kubelet's memory manager, policy Static)",
                NUMA_ALIGNED_MIN_VERSION,
            )
        return aligned

    def _check_second_network(self, pool: GpuPool, path: str, accelerator: Accelerator) -> None:
        """G4's second network: on G4 pools only, at a GKE version that runs G4."""
        if not pool.second_network:
            return
        key = self.at(path, "second_network")
        if accelerator.name != G4_ACCELERATOR:
            self.problems.add(
                key,
                f"true is not allowed on {accelerator.name}: it attaches G4's second network "
                f"(cluster-toolkit's examples/gke-g4); allowed on {G4_ACCELERATOR} pools only",
            )
            return
        self.version_gate(path, key, f"{self.key('second_network')} (a G4 node pool)", G4_MIN_VERSION)
