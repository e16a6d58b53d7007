"""GPU pool rules for the machine: which machine type carries the accelerator, how many GPUs it takes,
its Local SSDs and its boot disk type (against the catalog)."""

from ..core.catalog import Accelerator, MachineType
from ..core.common import cut, listing
from .pool import GpuPool
from .rule_base import PoolRuleBase


class MachineRules(PoolRuleBase):
    def _machine(self, pool: GpuPool, path: str, accelerator: Accelerator) -> MachineType | None:
        if pool.machine_type is None:
            count = pool.gpus_per_node or accelerator.allowed_counts[0]
            name = accelerator.default_machine_types.get(count)
            if name is None:
                self.problems.add(
                    self.at(path, "gpus_per_node"),
                    f"{count} is not offered for {accelerator.name}; allowed: "
                    f"{listing(accelerator.allowed_counts)}",
                )
                return None
            machine = accelerator.machine_type(name)
            assert machine is not None, f"catalog default {name} missing for {accelerator.name}"
            return machine
        machine = accelerator.machine_type(pool.machine_type)
        if machine is None and self._check_fractional(pool, path, accelerator):
            return None
        if machine is None:
            self.problems.add(
                self.at(path, "machine_type"),
                f"{cut(pool.machine_type)} cannot carry {accelerator.name}; allowed: "
                f"{listing(accelerator.machine_type_examples())}",
            )
        return machine

    def _gpu_count(self, pool: GpuPool, path: str, accelerator: Accelerator, machine: MachineType) -> int:
        allowed = accelerator.counts_for(machine)
        if not allowed:
            limits = ", ".join(
                f"{n} GPU(s): <= {lim.max_vcpus} vCPUs and {lim.max_memory_gb:g} GB"
                for n, lim in sorted(accelerator.attach_limits.items())
            )
            self.problems.add(
                self.at(path, "machine_type"),
                f"{cut(machine.name)} ({machine.vcpus} vCPUs, {machine.memory_gb:g} GB) is too large "
                f"for any count of {accelerator.name}; N1 limits: {limits}",
            )
            return pool.gpus_per_node or 0
        if pool.gpus_per_node is None:
            return allowed[0]
        if pool.gpus_per_node not in allowed:
            self.problems.add(
                self.at(path, "gpus_per_node"),
                f"{pool.gpus_per_node} is not allowed for {accelerator.name} on {machine.name}; "
                f"allowed: {listing(allowed)}",
            )
        return pool.gpus_per_node

    def _local_ssds(self, pool: GpuPool, path: str, machine: MachineType) -> int:
        requested = pool.local_ssd_count
        if machine.bundled_local_ssds:
            if requested is not None and requested != machine.bundled_local_ssds:
                self.problems.add(
                    self.at(path, "local_ssd_count"),
                    f"{requested} is not allowed: {machine.name} comes with "
                    f"{machine.bundled_local_ssds} Local SSDs; allowed: "
                    f"{machine.bundled_local_ssds} (or leave it out)",
                )
            return machine.bundled_local_ssds
        if not requested:
            return 0
        if requested not in machine.local_ssd_counts:
            self.problems.add(
                self.at(path, "local_ssd_count"),
                f"{requested} is not allowed on {machine.name}; allowed: {listing(machine.local_ssd_counts)}",
            )
        return requested

    def _disk_type(self, pool: GpuPool, path: str, machine: MachineType) -> str | None:
        allowed = self.catalog.boot_disk_types(machine)
        if pool.disk_type is None:
            return allowed[0] if allowed else None
        if allowed and pool.disk_type not in allowed:
            self.problems.add(
                self.at(path, "disk_type"),
                f"{cut(pool.disk_type)} is not a boot disk type of {machine.name}; "
                f"allowed: {listing(allowed)}",
            )
        return pool.disk_type

    def _check_sale(self, pool: GpuPool, path: str, accelerator: Accelerator, machine: MachineType) -> None:
        """A machine type Compute Engine does not sell on demand needs Spot, flex-start or a specific
        reservation: refused where that is confirmed in Compute Engine's docs, a note where it is only
        reported (the catalog's onDemand and onDemandConfirmed)."""
        consumed = (
            pool.spot or pool.flex_start or pool.queued_provisioning or pool.reservation.type == "SPECIFIC"
        )
        if machine.on_demand or consumed or self.autopilot:
            return
        sold = sorted(m.name for m in accelerator.machine_types.values() if m.on_demand)
        ways = [
            *([f"{self.key('spot')}: true"] if accelerator.spot else []),
            *([f"{self.key('flex_start')}: true"] if accelerator.flex_start else []),
            f"a SPECIFIC {self.key('reservation')}",
        ]
        kinds = ", ".join(
            [*(["Spot"] if accelerator.spot else []), *(["flex-start"] if accelerator.flex_start else [])]
        )
        text = (
            f"{machine.name} is not sold on demand, only as {kinds + ' or ' if kinds else ''}reserved "
            f"capacity: set {', '.join(ways[:-1]) + ' or ' if ways[:-1] else ''}{ways[-1]}"
            + (f", or use a machine sold on demand ({listing(sold)})" if sold else "")
        )
        if machine.on_demand_confirmed:
            self.problems.add(self.at(path, self._sale_key(pool)), text)
        else:
            self.note(
                path, f"{text} (reported, not confirmed in Compute Engine's docs: nodes may never start)"
            )

    @staticmethod
    def _sale_key(pool: GpuPool) -> str:
        """The key that chose how the pool buys its machines: a reservation type the pool gave
        (`ANY` or `NONE`, where only SPECIFIC can hold such a machine), else what chose the machine:
        its machine type, its GPU count, or the accelerator whose one machine it is."""
        if "type" in pool.reservation.model_fields_set:
            return "reservation.type"
        if pool.machine_type:
            return "machine_type"
        return "gpus_per_node" if pool.gpus_per_node is not None else "accelerator"

    def _check_fractional(self, pool: GpuPool, path: str, accelerator: Accelerator) -> bool:
        """A machine type with a fraction of one GPU (G4's vGPU sizes): refused. True when refused."""
        fraction = accelerator.fractional_machine_types.get(pool.machine_type or "")
        if fraction is None:
            return False
        whole = sorted(accelerator.machine_types, key=lambda name: accelerator.machine_types[name].gpus)
        self.problems.add(
            self.at(path, "machine_type"),
            f"{cut(pool.machine_type)} carries {fraction} of one {accelerator.name} (a vGPU); GKE node "
            "pools of fractional machine types are UNVERIFIED, so they are not offered here; whole-GPU "
            f"machine types: {listing(whole)}",
        )
        return True
