"""The catalog rules for one GPU pool: the same checks and derivations for a stack file's `gpuPools`
entry and for `GpuNodePool`'s args.

`GpuPoolRules.check` judges a shape-valid :class:`GpuPool` against the accelerator catalog (does GKE
offer this accelerator, in this count, on this machine, in these zones, with this sharing, MIG
partition and capacity option?) and returns it with every default resolved. Each concern has its
module, a mixin over `rule_base.py`: the machine and GPU count (`machine_rules.py`), zones and capacity
(`placement_rules.py`), GPUDirect (`gpudirect_rules.py`) and a capacity ladder (`ladder_rules.py`).
"""

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..core.catalog import Accelerator, load_catalog
from ..core.common import (
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    K8S_NAME,
    LABEL_VALUE_PATTERN,
    REGION_PATTERN,
    ZONE_PATTERN,
    Problem,
    cut,
    listing,
    valid_label_key,
)
from ..core.validation import validate_named_args, with_outputs
from .dra_rules import DraRules
from .gpudirect_rules import GpuDirectRules
from .ladder_rules import LadderRules
from .machine_rules import MachineRules
from .placement_rules import PlacementRules
from .pool import GpuPool
from .rack_rules import RackRules
from .rule_base import PoolPlace

# GKE's first version with secondary boot disks on COS_CONTAINERD nodes, Standard and Autopilot (GKE
# "Use secondary boot disks to preload data or container images", Requirements; its overview still
# names 1.28.3-gke.1067000 for Standard).
IMAGE_CACHE_MIN_VERSION = "1.30.1-gke.1329000"


class GpuPoolRules(MachineRules, PlacementRules, GpuDirectRules, LadderRules, RackRules, DraRules):
    def check(self, pool: GpuPool, path: str = "") -> GpuPool | None:
        """Check one shape-valid pool; return it with every default resolved, or None when it has a
        problem (recorded in `problems`). `path` prefixes every key (empty for a component's args)."""
        errors_before = len(self.problems.items)
        if not (K8S_NAME.fullmatch(pool.name) and len(pool.name) <= 40):
            self.problems.add(
                self.at(path, "name"),
                f"{cut(pool.name)} is not a valid node pool name; use at most 40 lowercase letters, "
                "digits and hyphens, starting with a letter",
            )
        accelerator = self.catalog.accelerator(pool.accelerator)
        if accelerator is None:
            self.problems.add(
                self.at(path, "accelerator"),
                f"{cut(pool.accelerator)} is not a GKE accelerator in the catalog; allowed: "
                f"{listing(sorted(self.catalog.accelerators))}",
            )
            return None
        self._check_mig(pool, path, accelerator)
        self._check_accelerator_limits(pool, path, accelerator)
        self._check_labels_and_taints(pool, path)
        self._check_ladder(pool, path, accelerator)
        self._check_dra_gpus(pool, path)
        if self.autopilot and pool.on_demand_fallback and not pool.spot:
            self.problems.add(
                self.at(path, "on_demand_fallback"),
                "true needs spot: true (the fallback is from Spot to on-demand)",
            )
        if self.autopilot:
            result = self._autopilot_profile(pool, path, accelerator)
        else:
            result = self._standard_pool(pool, path, accelerator)
        return result if len(self.problems.items) == errors_before else None

    def _check_accelerator_limits(self, pool: GpuPool, path: str, accelerator: Accelerator) -> None:
        if pool.spot and not accelerator.spot:
            self.problems.add(
                self.at(path, "spot"),
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
                self.at(path, "sharing.max_clients_per_gpu"),
                f"{sharing.max_clients_per_gpu} is not allowed with MPS on {accelerator.name}: CUDA MPS "
                f"serves at most {accelerator.mps_max_clients} clients per GPU before Volta; allowed: 2.."
                f"{accelerator.mps_max_clients}",
            )

    def _check_mig(self, pool: GpuPool, path: str, accelerator: Accelerator) -> None:
        if pool.mig_partition_size is None:
            return
        if not accelerator.mig_partitions:
            self.problems.add(
                self.at(path, "mig_partition_size"),
                f"{cut(pool.mig_partition_size)} is not allowed: {accelerator.name} has no MIG; "
                "GPUs with MIG: "
                + listing(sorted(a.name for a in self.catalog.accelerators.values() if a.mig_partitions)),
            )
        elif pool.mig_partition_size not in accelerator.mig_partitions:
            self.problems.add(
                self.at(path, "mig_partition_size"),
                f"{cut(pool.mig_partition_size)} is not a MIG partition of {accelerator.name}; allowed: "
                f"{listing(accelerator.mig_partitions)}",
            )

    def _check_labels_and_taints(self, pool: GpuPool, path: str) -> None:
        for key, value in pool.labels.items():
            if not valid_label_key(key):
                self.problems.add(
                    self.at(path, "labels"),
                    f"key {cut(key)} is not a valid Kubernetes label key",
                )
            elif key.split("/")[0].endswith(("kubernetes.io", "k8s.io", "cloud.google.com")):
                self.problems.add(
                    self.at(path, "labels"),
                    f"key {cut(key)} uses a prefix reserved for Kubernetes and GKE",
                )
            if len(value) > 63 or not LABEL_VALUE_PATTERN.fullmatch(value):
                self.problems.add(
                    f"{self.at(path, 'labels')}.{key}",
                    f"{cut(value)} is not a valid Kubernetes label value",
                )
        seen: set[tuple[str, str]] = set()
        for j, taint in enumerate(pool.taints):
            tpath = f"{self.at(path, 'taints')}[{j}]"
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
            if (taint.key, taint.effect) in seen:
                self.problems.add(f"{tpath}", f"duplicate taint {taint.key}:{taint.effect}")
            seen.add((taint.key, taint.effect))

    def _autopilot_profile(self, pool: GpuPool, path: str, accelerator: Accelerator) -> GpuPool | None:
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
            "flex_start": "on Autopilot, flex-start is requested per workload with a node selector or "
            "a ComputeClass",
            "max_run_duration": "on Autopilot, flex-start is requested per workload",
            "gpudirect": "GKE's Autopilot GPUDirect-TCPX/TCPXO guide requests it per workload; this "
            "program wires GPUDirect into Standard node pools only",
            "gpudirect_networking": "GPUDirect is wired into Standard node pools only",
            "image_cache": "on Autopilot, a workload asks for a preloaded disk itself, with a node "
            "selector and an allowlist of the image; this program preloads Standard pools only",
            "workload_policy": "a workload policy is a Standard node pool's placement policy",
            "numa_aligned": "Autopilot owns its nodes' kubelet settings; this program sets them on Standard "
            "node pools only",
            "second_network": "Autopilot owns its nodes' networks; this program attaches G4's second "
            "network to Standard node pools only",
        }
        for key, why in standard_only.items():
            if key in pool.model_fields_set:
                self.problems.add(
                    self.at(path, key),
                    f"not allowed on Autopilot ({why}); Standard-only keys: "
                    + listing(self.key(k) for k in standard_only),
                )
        if pool.driver_version == "INSTALLATION_DISABLED":
            self.problems.add(
                self.at(path, "driver_version"),
                "'INSTALLATION_DISABLED' is not allowed on Autopilot (GKE always installs the "
                "driver); allowed: 'DEFAULT', 'LATEST'",
            )
        if not accelerator.autopilot:
            self.problems.add(
                self.at(path, "accelerator"),
                f"{cut(accelerator.name)} is not offered on Autopilot; Autopilot accelerators: "
                + listing(sorted(a.name for a in self.catalog.accelerators.values() if a.autopilot)),
            )
            return None
        if pool.sharing and pool.sharing.strategy == "MPS":
            self.problems.add(
                self.at(path, "sharing.strategy"),
                "'MPS' is not allowed on Autopilot (GKE supports MPS on Standard only); "
                "allowed: 'TIME_SHARING'",
            )
        count = pool.gpus_per_node or accelerator.autopilot_counts[0]
        if count not in accelerator.autopilot_counts:
            self.problems.add(
                self.at(path, "gpus_per_node"),
                f"{count} is not offered for {accelerator.name} on Autopilot; allowed: "
                f"{listing(accelerator.autopilot_counts)}",
            )
        self._check_region_offers(accelerator, self.at(path, "accelerator"))
        minimum = accelerator.autopilot_min_versions.get(count)
        if minimum:
            self.version_gate(
                path, self.at(path, "gpus_per_node"), f"{count} x {accelerator.name} on Autopilot", minimum
            )
        # The Spot-then-on-demand fallback is a ComputeClass; it carries time-sharing and MIG in
        # each priority's gpu.gpuSharing, so shared and partitioned profiles fall back like the rest.
        fallback = pool.spot if pool.on_demand_fallback is None else pool.on_demand_fallback
        if fallback and (pool.sharing is not None or pool.mig_partition_size is not None):
            self.note(
                path,
                f"the on-demand fallback puts sharing/{self.key('mig_partition_size')} in a ComputeClass "
                "(gpu.gpuSharing), which needs GKE 1.35.2-gke.1485000 or later (version unverified); "
                f"{self.version_hint()}, or set {self.key('on_demand_fallback')}: false to select Spot "
                "nodes directly",
            )
        return resolved(
            pool,
            accelerator,
            count,
            on_demand_fallback=fallback,
            zones=list(accelerator.zones.get(self.region or "", ())) if self.region_ok else [],
            local_ssd_count=0,
        )

    def _standard_pool(self, pool: GpuPool, path: str, accelerator: Accelerator) -> GpuPool | None:
        if "on_demand_fallback" in pool.model_fields_set:
            self.problems.add(
                self.at(path, "on_demand_fallback"),
                "only allowed on Autopilot; on Standard, add a second pool without spot",
            )
        if pool.max_nodes is None:
            self.problems.add(
                self.at(path, "max_nodes"),
                "required on Standard: every GPU pool autoscales up to an explicit limit "
                f"(it bounds the bill and must fit your {accelerator.name} quota)",
            )
        elif pool.min_nodes > pool.max_nodes:
            self.problems.add(
                self.at(path, "min_nodes"),
                f"{pool.min_nodes} is greater than {self.key('max_nodes')} {pool.max_nodes}",
            )
        machine = self._machine(pool, path, accelerator)
        zones = self._zones(pool, path, accelerator)
        if machine is None:
            # The machine is reported; the pool's other keys are still judged, except what needs it.
            self._check_capacity_options(pool, path, None, zones)
            return None
        count = self._gpu_count(pool, path, accelerator, machine)
        self._check_sale(pool, path, accelerator, machine)
        if zones and pool.min_nodes and pool.max_nodes is not None and pool.min_nodes <= pool.max_nodes:
            # A pool starts with the same number of nodes in every zone (initial_node_count is per zone).
            per_zone = -(-pool.min_nodes // len(zones))
            if per_zone * len(zones) > pool.max_nodes:
                self.problems.add(
                    self.at(path, "min_nodes"),
                    f"{pool.min_nodes} over {len(zones)} zones starts {per_zone} node(s) per zone "
                    f"({per_zone * len(zones)} nodes), more than {self.key('max_nodes')} {pool.max_nodes}; "
                    f"raise {self.key('max_nodes')}, make {self.key('min_nodes')} a multiple of the zone "
                    "count, or list fewer zones",
                )
        self._check_capacity_options(pool, path, machine, zones)
        self._check_rack(pool, path, accelerator, machine, zones)
        self._check_second_network(pool, path, accelerator)
        self._check_gpudirect(pool, path, machine, zones)
        if pool.image_cache is not None:
            self.version_gate(
                path, self.at(path, "image_cache"), self.key("image_cache"), IMAGE_CACHE_MIN_VERSION
            )
        local_ssds = self._local_ssds(pool, path, machine)
        disk_type = self._disk_type(pool, path, machine)
        return resolved(
            pool,
            accelerator,
            count,
            machine_type=machine.name,
            zones=list(zones),
            local_ssd_count=local_ssds,
            disk_type=disk_type,
            flex_start=pool.flex_start or self.queued_flex_start(pool),
            numa_aligned=self._numa_aligned(pool, path, accelerator),
        )


def resolved(pool: GpuPool, accelerator: Accelerator, count: int, **derived: object) -> GpuPool:
    """The pool with its derived values filled in (the same type: one set of types for a pool)."""
    result = pool.model_copy(update={"accelerator": accelerator.name, "gpus_per_node": count, **derived})
    result._mig_partitions_per_gpu = accelerator.mig_partitions.get(pool.mig_partition_size or "", 1)
    return result


P = TypeVar("P", bound=GpuPool)


def validate_pool_args(
    component: str,
    name: str,
    model: type[P],
    args: Mapping[str, Any],
    check: Callable[[P], tuple[GpuPool | None, list[str], list[str]]],
    args_type: type,
) -> tuple[GpuPool, list[str]]:
    """A GPU pool component's boundary check: its args (the pool's `name` defaulting to the resource
    name) through `model`, then the catalog rules `check`. Returns the pool with every default
    resolved and the rules' notes; raises InvalidArgsError naming every bad arg."""
    notes: list[str] = []
    checked: list[GpuPool] = []

    def catalog_rules(spec: P) -> list[str]:
        pool, problems, found = check(spec)
        notes.extend(found)
        checked.extend([pool] if pool else [])
        return problems

    validate_named_args(component, name, model, args, rules=catalog_rules, by_name=True, args_type=args_type)
    (pool,) = checked
    # The resolved pool with the caller's Outputs where the check saw them unknown (its one form).
    return with_outputs(pool, args), notes


def check_standard_pool_args(spec: P, location: str) -> tuple[P | None, list[str], list[str]]:
    """The catalog rules for a Standard pool component's args (snake_case names) at `location`, a
    region or zone: (the pool with every default resolved, or None; problems; notes)."""
    catalog = load_catalog()
    zone = ZONE_PATTERN.fullmatch(location)
    region = zone.group(1) if zone else location if REGION_PATTERN.fullmatch(location) else None
    if region is None or region not in catalog.gcp_regions:
        return (
            None,
            [
                Problem(
                    "location",
                    f"{cut(location)} is not a Compute Engine region or zone (for example us-central1 or "
                    "us-central1-a)",
                )
            ],
            [],
        )
    rules = GpuPoolRules(catalog, PoolPlace(region, True, location), autopilot=False, camel_keys=False)
    pool = rules.check(spec)
    if rules.problems.items:
        return None, rules.problems.items, rules.warnings
    assert isinstance(pool, type(spec)), "the rules resolve the spec's own type"
    return pool, [], rules.warnings
