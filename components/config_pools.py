"""Pass 2 rules for GPU pools (Standard node pools and Autopilot profiles), against the catalog."""

from __future__ import annotations

from typing import Any

from pydantic.alias_generators import to_camel

from .catalog import Accelerator, MachineType
from .config_common import (
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    K8S_NAME,
    LABEL_VALUE_PATTERN,
    NAMESPACE,
    cut,
    listing,
    valid_label_key,
)
from .config_placement import PlacementRules
from .config_schema import GpuPoolConfig
from .settings import ClusterSettings, GpuPool, Reservation, Sharing, Taint


class PoolRules(PlacementRules):
    def _pools(self, cluster: ClusterSettings) -> tuple[GpuPool, ...]:
        pools_config = self.config.gpu_pools
        if cluster.mode == "existing":
            if pools_config:
                self.problems.add(
                    f"{NAMESPACE}:gpuPools",
                    "not allowed with cluster.mode existing: node pools of an existing cluster are "
                    "not managed here (use gpuNodes and devicePlugin for a generic cluster)",
                )
            return ()
        seen: dict[str, int] = {}
        resolved: list[GpuPool] = []
        for i, pool in self.indexed_pools():
            path = f"{NAMESPACE}:gpuPools[{i}]"
            if pool.name in seen:
                self.problems.add(
                    f"{path}.name",
                    f"{cut(pool.name)} is already used by gpuPools[{seen[pool.name]}]; pool names must "
                    "be unique",
                )
            seen.setdefault(pool.name, i)
            result = self._pool(pool, path, cluster)
            if result is not None:
                resolved.append(result)
            else:
                self.broken.pools.add(pool.name)
        if cluster.mode == "standard" and cluster.system_pool:
            reserved = {"system", "default-pool"}
            for i, pool in self.indexed_pools():
                if pool.name in reserved:
                    self.problems.add(
                        f"{NAMESPACE}:gpuPools[{i}].name",
                        f"{cut(pool.name)} is reserved for the system pool; choose another name",
                    )
        return tuple(resolved)

    def _pool(self, pool: GpuPoolConfig, path: str, cluster: ClusterSettings) -> GpuPool | None:
        errors_before = len(self.problems.items)
        if not (K8S_NAME.fullmatch(pool.name) and len(pool.name) <= 40):
            self.problems.add(
                f"{path}.name",
                f"{cut(pool.name)} is not a valid node pool name; use at most 40 lowercase letters, "
                "digits and hyphens, starting with a letter",
            )
        accelerator = self.catalog.accelerator(pool.accelerator)
        if accelerator is None:
            self.problems.add(
                f"{path}.accelerator",
                f"{cut(pool.accelerator)} is not a GKE accelerator in the catalog; allowed: "
                f"{listing(sorted(self.catalog.accelerators))}",
            )
            return None
        self._check_mig(pool, path, accelerator)
        self._check_accelerator_limits(pool, path, accelerator)
        self._check_labels_and_taints(pool, path)
        if cluster.autopilot and pool.on_demand_fallback and not pool.spot:
            self.problems.add(
                f"{path}.onDemandFallback",
                "true needs spot: true (the fallback is from Spot to on-demand)",
            )
        if cluster.autopilot:
            result = self._autopilot_profile(pool, path, accelerator)
        else:
            result = self._standard_pool(pool, path, accelerator, cluster)
        return result if len(self.problems.items) == errors_before else None

    def _check_accelerator_limits(self, pool: GpuPoolConfig, path: str, accelerator: Accelerator) -> None:
        if pool.spot and not accelerator.spot:
            self.problems.add(
                f"{path}.spot",
                f"true is not allowed: {accelerator.name} machine types are not sold as Spot VMs; "
                "use spot: false (on-demand or a reservation)",
            )
        sharing = pool.sharing
        if (
            sharing
            and sharing.strategy == "MPS"
            and sharing.max_clients_per_gpu > accelerator.mps_max_clients
        ):
            self.problems.add(
                f"{path}.sharing.maxClientsPerGpu",
                f"{sharing.max_clients_per_gpu} is not allowed with MPS on {accelerator.name}: CUDA MPS "
                f"serves at most {accelerator.mps_max_clients} clients per GPU before Volta; allowed: 2.."
                f"{accelerator.mps_max_clients}",
            )

    def _check_mig(self, pool: GpuPoolConfig, path: str, accelerator: Accelerator) -> None:
        if pool.mig_partition_size is None:
            return
        if not accelerator.mig_partitions:
            self.problems.add(
                f"{path}.migPartitionSize",
                f"{cut(pool.mig_partition_size)} is not allowed: {accelerator.name} has no MIG; "
                "GPUs with MIG: "
                + listing(sorted(a.name for a in self.catalog.accelerators.values() if a.mig_partitions)),
            )
        elif pool.mig_partition_size not in accelerator.mig_partitions:
            self.problems.add(
                f"{path}.migPartitionSize",
                f"{cut(pool.mig_partition_size)} is not a MIG partition of {accelerator.name}; allowed: "
                f"{listing(accelerator.mig_partitions)}",
            )

    def _check_labels_and_taints(self, pool: GpuPoolConfig, path: str) -> None:
        for key, value in pool.labels.items():
            if not valid_label_key(key):
                self.problems.add(
                    f"{path}.labels",
                    f"key {cut(key)} is not a valid Kubernetes label key",
                )
            elif key.split("/")[0].endswith(("kubernetes.io", "k8s.io", "cloud.google.com")):
                self.problems.add(
                    f"{path}.labels",
                    f"key {cut(key)} uses a prefix reserved for Kubernetes and GKE",
                )
            if len(value) > 63 or not LABEL_VALUE_PATTERN.fullmatch(value):
                self.problems.add(
                    f"{path}.labels.{key}",
                    f"{cut(value)} is not a valid Kubernetes label value",
                )
        seen: set[str] = set()
        for j, taint in enumerate(pool.taints):
            tpath = f"{path}.taints[{j}]"
            if taint.key == GPU_TAINT_KEY:
                self.problems.add(
                    f"{tpath}.key",
                    f"{cut(GPU_TAINT_KEY)} is declared on every GPU pool already "
                    f"({GPU_TAINT_KEY}={GPU_TAINT_VALUE}:NoSchedule); remove it",
                )
            elif not valid_label_key(taint.key):
                self.problems.add(f"{tpath}.key", f"{cut(taint.key)} is not a valid taint key")
            if taint.value and (len(taint.value) > 63 or not LABEL_VALUE_PATTERN.fullmatch(taint.value)):
                self.problems.add(f"{tpath}.value", f"{cut(taint.value)} is not a valid taint value")
            if (taint.key, taint.effect) in seen:  # type: ignore[comparison-overlap]
                self.problems.add(f"{tpath}", f"duplicate taint {taint.key}:{taint.effect}")
            seen.add((taint.key, taint.effect))  # type: ignore[arg-type]

    def _autopilot_profile(self, pool: GpuPoolConfig, path: str, accelerator: Accelerator) -> GpuPool | None:
        standard_only = {
            "machine_type": "Autopilot picks the machine for each Pod",
            "zones": "Autopilot places Pods in the region's zones itself",
            "min_nodes": "Autopilot scales nodes with the Pods",
            "max_nodes": "Autopilot scales nodes with the Pods",
            "local_ssd_count": "Autopilot sizes ephemeral storage from Pod requests",
            "disk_size_gb": "Autopilot sizes boot disks itself",
            "disk_type": "Autopilot chooses boot disks itself",
            "taints": "Autopilot taints its nodes itself",
            "labels": "Autopilot node labels come from Pod node selectors",
            "compact_placement": "on Autopilot, compact placement is requested per workload",
            "queued_provisioning": "on Autopilot, queued provisioning is requested per workload "
            "through a ProvisioningRequest",
            "reservation": "on Autopilot, a reservation is consumed per workload with node selectors",
        }
        for key, why in standard_only.items():
            if key in pool.model_fields_set:
                self.problems.add(
                    f"{path}.{to_camel(key)}",
                    f"not allowed on Autopilot ({why}); Standard-only keys: "
                    + listing(to_camel(k) for k in standard_only),
                )
        if pool.driver_version == "INSTALLATION_DISABLED":
            self.problems.add(
                f"{path}.driverVersion",
                "'INSTALLATION_DISABLED' is not allowed on Autopilot (GKE always installs the "
                "driver); allowed: 'DEFAULT', 'LATEST'",
            )
        if not accelerator.autopilot:
            self.problems.add(
                f"{path}.accelerator",
                f"{cut(accelerator.name)} is not offered on Autopilot; Autopilot accelerators: "
                + listing(sorted(a.name for a in self.catalog.accelerators.values() if a.autopilot)),
            )
            return None
        if pool.sharing and pool.sharing.strategy == "MPS":
            self.problems.add(
                f"{path}.sharing.strategy",
                "'MPS' is not allowed on Autopilot (GKE supports MPS on Standard only); "
                "allowed: 'TIME_SHARING'",
            )
        count = pool.gpus_per_node or accelerator.autopilot_counts[0]
        if count not in accelerator.autopilot_counts:
            self.problems.add(
                f"{path}.gpusPerNode",
                f"{count} is not offered for {accelerator.name} on Autopilot; allowed: "
                f"{listing(accelerator.autopilot_counts)}",
            )
        self._check_region_offers(accelerator, f"{path}.accelerator")
        minimum = accelerator.autopilot_min_versions.get(count)
        if minimum:
            self.warnings.append(
                f"note: {path}: {count} x {accelerator.name} on Autopilot needs GKE {minimum} or later; "
                f"check the cluster's version on the {self.config.cluster.release_channel} channel"
            )
        # The Spot-then-on-demand fallback is a ComputeClass; it carries time-sharing and MIG in
        # each priority's gpu.gpuSharing, so shared and partitioned profiles fall back like the rest.
        fallback = pool.spot if pool.on_demand_fallback is None else pool.on_demand_fallback
        if fallback and (pool.sharing is not None or pool.mig_partition_size is not None):
            self.warnings.append(
                f"note: {path}: the on-demand fallback puts sharing/migPartitionSize in a ComputeClass "
                "(gpu.gpuSharing), which needs GKE 1.35.2-gke.1485000 or later (version unverified); "
                f"check the cluster's version on the {self.config.cluster.release_channel} channel, "
                "or set onDemandFallback: false to select Spot nodes directly"
            )
        return GpuPool(
            **common_pool_fields(pool, accelerator, count),
            on_demand_fallback=fallback,
            zones=accelerator.zones.get(self.region or "", ()) if self.region_ok else (),
        )

    def _check_region_offers(self, accelerator: Accelerator, path: str) -> None:
        region = self.region or ""
        if self.region_ok and region in self.catalog.regions and region not in accelerator.zones:
            self.problems.add(
                path,
                f"{cut(accelerator.name)} is not offered in region {region} (catalog); regions with it: "
                f"{listing(sorted(accelerator.zones))}",
            )

    def _standard_pool(
        self, pool: GpuPoolConfig, path: str, accelerator: Accelerator, cluster: ClusterSettings
    ) -> GpuPool | None:
        if "on_demand_fallback" in pool.model_fields_set:
            self.problems.add(
                f"{path}.onDemandFallback",
                "only allowed on Autopilot; on Standard, add a second pool without spot",
            )
        if pool.max_nodes is None:
            self.problems.add(
                f"{path}.maxNodes",
                "required on Standard: every GPU pool autoscales up to an explicit limit "
                f"(it bounds the bill and must fit your {accelerator.name} quota)",
            )
        elif pool.min_nodes > pool.max_nodes:
            self.problems.add(
                f"{path}.minNodes",
                f"{pool.min_nodes} is greater than maxNodes {pool.max_nodes}",
            )
        machine = self._machine(pool, path, accelerator)
        zones = self._zones(pool, path, accelerator, cluster)
        if machine is None:
            # The machine is reported; the pool's other keys are still judged, except what needs it.
            self._check_capacity_options(pool, path, None, zones)
            return None
        count = self._gpu_count(pool, path, accelerator, machine)
        if zones and pool.min_nodes and pool.max_nodes is not None and pool.min_nodes <= pool.max_nodes:
            # A pool starts with the same number of nodes in every zone (initial_node_count is per zone).
            per_zone = -(-pool.min_nodes // len(zones))
            if per_zone * len(zones) > pool.max_nodes:
                self.problems.add(
                    f"{path}.minNodes",
                    f"{pool.min_nodes} over {len(zones)} zones starts {per_zone} node(s) per zone "
                    f"({per_zone * len(zones)} nodes), more than maxNodes {pool.max_nodes}; raise maxNodes, "
                    "make minNodes a multiple of the zone count, or list fewer zones",
                )
        self._check_capacity_options(pool, path, machine, zones)
        local_ssds = self._local_ssds(pool, path, machine)
        disk_type = self._disk_type(pool, path, machine)
        return GpuPool(
            **common_pool_fields(pool, accelerator, count),
            machine_type=machine.name,
            min_nodes=pool.min_nodes,
            max_nodes=pool.max_nodes,
            zones=zones,
            reservation=Reservation(pool.reservation.type, pool.reservation.name),
            queued_provisioning=pool.queued_provisioning,
            compact_placement=pool.compact_placement,
            local_ssd_count=local_ssds,
            disk_size_gb=pool.disk_size_gb,
            disk_type=disk_type,
            labels=dict(pool.labels),
            taints=tuple(Taint(t.key, t.value, t.effect) for t in pool.taints),
        )

    def _machine(self, pool: GpuPoolConfig, path: str, accelerator: Accelerator) -> MachineType | None:
        if pool.machine_type is None:
            count = pool.gpus_per_node or accelerator.allowed_counts[0]
            name = accelerator.default_machine_types.get(count)
            if name is None:
                self.problems.add(
                    f"{path}.gpusPerNode",
                    f"{count} is not offered for {accelerator.name}; allowed: "
                    f"{listing(accelerator.allowed_counts)}",
                )
                return None
            machine = accelerator.machine_type(name)
            assert machine is not None, f"catalog default {name} missing for {accelerator.name}"
            return machine
        machine = accelerator.machine_type(pool.machine_type)
        if machine is None:
            self.problems.add(
                f"{path}.machineType",
                f"{cut(pool.machine_type)} cannot carry {accelerator.name}; allowed: "
                f"{listing(accelerator.machine_type_examples())}",
            )
        return machine

    def _gpu_count(
        self, pool: GpuPoolConfig, path: str, accelerator: Accelerator, machine: MachineType
    ) -> int:
        allowed = accelerator.counts_for(machine)
        if not allowed:
            limits = ", ".join(
                f"{n} GPU(s): <= {lim.max_vcpus} vCPUs and {lim.max_memory_gb:g} GB"
                for n, lim in sorted(accelerator.attach_limits.items())
            )
            self.problems.add(
                f"{path}.machineType",
                f"{cut(machine.name)} ({machine.vcpus} vCPUs, {machine.memory_gb:g} GB) is too large "
                f"for any count of {accelerator.name}; N1 limits: {limits}",
            )
            return pool.gpus_per_node or 0
        if pool.gpus_per_node is None:
            return allowed[0]
        if pool.gpus_per_node not in allowed:
            self.problems.add(
                f"{path}.gpusPerNode",
                f"{pool.gpus_per_node} is not allowed for {accelerator.name} on {machine.name}; "
                f"allowed: {listing(allowed)}",
            )
        return pool.gpus_per_node

    def _local_ssds(self, pool: GpuPoolConfig, path: str, machine: MachineType) -> int:
        requested = pool.local_ssd_count
        if machine.bundled_local_ssds:
            if requested is not None and requested != machine.bundled_local_ssds:
                self.problems.add(
                    f"{path}.localSsdCount",
                    f"{requested} is not allowed: {machine.name} comes with "
                    f"{machine.bundled_local_ssds} Local SSDs; allowed: "
                    f"{machine.bundled_local_ssds} (or leave it out)",
                )
            return machine.bundled_local_ssds
        if not requested:
            return 0
        if requested not in machine.local_ssd_counts:
            self.problems.add(
                f"{path}.localSsdCount",
                f"{requested} is not allowed on {machine.name}; allowed: {listing(machine.local_ssd_counts)}",
            )
        return requested

    def _disk_type(self, pool: GpuPoolConfig, path: str, machine: MachineType) -> str | None:
        allowed = self.catalog.boot_disk_types(machine)
        if pool.disk_type is None:
            return allowed[0] if allowed else None
        if allowed and pool.disk_type not in allowed:
            self.problems.add(
                f"{path}.diskType",
                f"{cut(pool.disk_type)} is not a boot disk type of {machine.name}; "
                f"allowed: {listing(allowed)}",
            )
        return pool.disk_type

    # -- monitoring, workloads, existing clusters -------------------------------------------------


def common_pool_fields(pool: GpuPoolConfig, accelerator: Accelerator, count: int) -> dict[str, Any]:
    """The GpuPool fields that Standard pools and Autopilot profiles resolve the same way."""
    sharing = pool.sharing
    return {
        "name": pool.name,
        "accelerator": accelerator.name,
        "gpus_per_node": count,
        "gpu_memory_gb": accelerator.memory_gb,
        "spot": pool.spot,
        "driver_version": pool.driver_version,
        "sharing": Sharing(sharing.strategy, sharing.max_clients_per_gpu) if sharing else None,
        "mig_partition_size": pool.mig_partition_size,
        "mig_partitions_per_gpu": accelerator.mig_partitions.get(pool.mig_partition_size or "", 1),
    }
