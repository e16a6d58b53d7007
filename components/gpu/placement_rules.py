"""GPU pool rules for where the nodes come from: zones, reservations, Spot, queued provisioning,
compact placement."""

from __future__ import annotations

from ..core.catalog import Accelerator, MachineType
from ..core.common import RESERVATION_PATTERN, ZONE_PATTERN, cut, listing
from ..core.gke_version import below, satisfies
from .pool import GpuPool
from .pool_args import CapacityStep
from .rule_base import PoolRuleBase

# GKE's first version with flex-start for GPU node pools (GKE "About flex-start" / DWS docs, via
# ../shared/reference/gke-gpu-scale-out.md); a node runs at most 7 days.
FLEX_START_MIN_VERSION = "1.32.2-gke.1652000"
MAX_RUN_SECONDS = 7 * 86400
# Machines whose flex-start nodes may be compact-placed (cluster-toolkit's flex-start rules).
FLEX_COMPACT = ("a3-ultragpu-", "a4-highgpu-")


class PlacementRules(PoolRuleBase):
    def _zones(self, pool: GpuPool, path: str, accelerator: Accelerator) -> tuple[str, ...]:
        region = self.region or ""
        if not self.region_ok:
            # gcp:region is missing or unknown (reported once, there): check only the zones' form.
            for j, zone in enumerate(pool.zones or ()):
                if not ZONE_PATTERN.fullmatch(zone):
                    self.problems.add(
                        f"{self.at(path, 'zones')}[{j}]",
                        f"{cut(zone)} is not a zone name (e.g. us-central1-a)",
                    )
            return tuple(pool.zones or ())
        offered = accelerator.zones.get(region)
        known_region = region in self.catalog.regions
        location = self.cluster_location
        cluster_zone = location if ZONE_PATTERN.fullmatch(location) else None
        if pool.zones is None:
            if known_region and not offered:
                self._check_region_offers(accelerator, self.at(path, "accelerator"))
                return ()
            if not known_region and cluster_zone:
                self.warnings.append(
                    f"{self.at(path, 'zones')}: region {region} is not in the accelerator catalog, so the "
                    "cluster's "
                    f"zone {cluster_zone} could not be checked for {accelerator.name}"
                )
                return (cluster_zone,)
            if not known_region:
                self.problems.add(
                    self.at(path, "zones"),
                    f"required: the catalog has no zone data for region {region}, so it cannot pick "
                    f"zones with {accelerator.name}; catalog regions: "
                    f"{listing(self.catalog.regions)}",
                )
                return ()
            assert offered is not None
            if cluster_zone:
                if cluster_zone not in offered:
                    self.problems.add(
                        self.at(path, "zones"),
                        f"required: the cluster's zone {cluster_zone} does not offer "
                        f"{accelerator.name}; zones of {region} that do: {listing(offered)} "
                        f"({accelerator.zone_data})",
                    )
                    return ()
                return (cluster_zone,)
            if pool.compact_placement:
                self.problems.add(
                    self.at(path, "zones"),
                    f"required with {self.key('compact_placement')}: compact placement needs exactly one "
                    "zone; "
                    f"zones with {accelerator.name}: {listing(offered)}",
                )
            return tuple(offered)
        if not pool.zones:
            self.problems.add(self.at(path, "zones"), "must not be empty; leave it out to use the catalog")
        if len(set(pool.zones)) != len(pool.zones):
            self.problems.add(self.at(path, "zones"), f"{pool.zones} lists a zone twice")
        for j, zone in enumerate(pool.zones):
            match = ZONE_PATTERN.fullmatch(zone)
            if not match or match.group(1) != region:
                self.problems.add(
                    f"{self.at(path, 'zones')}[{j}]",
                    f"{cut(zone)} is not a zone of region {region}; allowed: "
                    f"{listing(offered or [f'{region}-<a..f>'])}",
                )
            elif known_region and zone not in (offered or ()):
                self.problems.add(
                    f"{self.at(path, 'zones')}[{j}]",
                    f"{cut(zone)} does not offer {accelerator.name}; zones of {region} that do: "
                    f"{listing(offered or ())} ({accelerator.zone_data})",
                )
        if not known_region and pool.zones:
            self.warnings.append(
                f"{self.at(path, 'zones')}: region {region} is not in the accelerator catalog, so "
                f"{listing(pool.zones)} could not be checked for {accelerator.name}"
            )
        return tuple(pool.zones)

    def _check_capacity_options(
        self, pool: GpuPool, path: str, machine: MachineType | None, zones: tuple[str, ...]
    ) -> None:
        res = pool.reservation
        if res.type == "SPECIFIC":
            if not res.name:
                self.problems.add(
                    self.at(path, "reservation.name"),
                    f"required with {self.key('reservation.type')} SPECIFIC (the reservation's name, or "
                    "projects/<project>/reservations/<name> for a shared one)",
                )
            elif not RESERVATION_PATTERN.fullmatch(res.name):
                self.problems.add(
                    self.at(path, "reservation.name"),
                    f"{cut(res.name)} is not a reservation: <name>, <name>/reservationBlocks/<block>, or "
                    "projects/<project>/reservations/<name>[/reservationBlocks/<block>]",
                )
        elif res.name is not None:
            self.problems.add(
                self.at(path, "reservation.name"),
                f"only allowed with {self.key('reservation.type')} SPECIFIC (type is {res.type})",
            )
        if res.type == "SPECIFIC" and res.name and len(zones) > 1:
            # GKE (and cluster-toolkit) accept several zones when each holds a reservation of that name.
            self.warnings.append(
                f"{self.at(path, 'reservation.name')}: {res.name} is consumed in {len(zones)} zones "
                f"({listing(zones)}); each of them must hold a reservation of that name"
            )
        if pool.spot and res.type != "NONE":
            self.problems.add(
                self.at(path, "spot"),
                f"true is not allowed with {self.key('reservation.type')} {res.type}: Spot VMs do not "
                f"consume reservations; use spot: false or {self.key('reservation.type')} NONE",
            )
        if pool.queued_provisioning:
            if pool.spot:
                self.problems.add(
                    self.at(path, "spot"),
                    f"true is not allowed with {self.key('queued_provisioning')}: queued provisioning "
                    "obtains on-demand capacity through ProvisioningRequests",
                )
            if res.type != "NONE":
                self.problems.add(
                    self.at(path, "reservation.type"),
                    f"{cut(res.type)} is not allowed with {self.key('queued_provisioning')}; allowed: 'NONE'",
                )
            if pool.min_nodes != 0:
                self.problems.add(
                    self.at(path, "min_nodes"),
                    f"{pool.min_nodes} is not allowed with {self.key('queued_provisioning')}; allowed: 0 "
                    "(nodes exist only while a ProvisioningRequest holds them)",
                )
            if pool.compact_placement:
                self.problems.add(
                    self.at(path, "compact_placement"),
                    f"true is not allowed with {self.key('queued_provisioning')} (GKE refuses compact "
                    "placement for queued GPU pools)",
                )
            if machine is not None and not machine.queued_provisioning:
                self.problems.add(
                    self.at(path, "queued_provisioning"),
                    f"true is not allowed: {machine.name} is not offered through queued provisioning",
                )
        self._check_flex_start(pool, path, machine)
        self._check_placement(pool, path)
        if pool.compact_placement:
            if machine is not None and machine.series == "n1":
                self.problems.add(
                    self.at(path, "compact_placement"),
                    "true is not allowed on N1 machine types (compact placement needs A2, A3, A4, G2 or G4)",
                )
            if pool.zones is not None and len(zones) != 1:
                self.problems.add(
                    self.at(path, "zones"),
                    f"{list(zones)} has {len(zones)} zones; {self.key('compact_placement')} needs exactly "
                    "one",
                )

    def _check_placement(self, pool: GpuPool, path: str) -> None:
        """What places the nodes close together: a reservation block or a compact placement policy,
        never both (cluster-toolkit's A3 Ultra and A4 blueprints consume a block with no placement
        policy); the render notes which."""
        block = pool.reservation.block
        if block and pool.compact_placement:
            self.problems.add(
                self.at(path, "compact_placement"),
                f"true is not allowed with {self.key('reservation.name')} {cut(pool.reservation.name)}: a "
                "reservation block already holds its VMs close together, and a compact placement policy "
                f"on top of it may not fit the block's capacity; use the block alone (drop "
                f"{self.key('compact_placement')}) or the whole reservation with compact placement",
            )
        elif block:
            self.note(
                path,
                f"placement: the reservation block {block} (its VMs sit close together; no compact placement "
                "policy)",
            )
        elif pool.compact_placement:
            caution = (
                " (the reservation must not carry a placement policy of its own)"
                if pool.reservation.type != "NONE"
                else ""
            )
            self.note(path, f"placement: a compact placement policy{caution}")

    def queued_flex_start(self, pool: GpuPool) -> bool:
        """Whether a pool's flex-start VMs come from its queued provisioning: GKE's ProvisioningRequest
        page creates queued-provisioning pools with --flex-start and --enable-queued-provisioning, so
        a queued pool gets flex-start unless `flex_start: false` keeps GKE's older queued provisioning
        (GKE before FLEX_START_MIN_VERSION) or its GPU has no flex-start VMs."""
        if not pool.queued_provisioning or "flex_start" in pool.model_fields_set:
            return False
        accelerator = self.catalog.accelerator(pool.accelerator)
        return accelerator is None or accelerator.flex_start

    def _check_flex_start(self, pool: GpuPool, path: str, machine: MachineType | None) -> None:
        """DWS flex-start: its own way to get capacity, so not with Spot or a reservation (GKE
        requires NO_RESERVATION and no Spot); a run limit of at most 7 days. With queued provisioning
        it is how GKE documents queued provisioning today (queued_flex_start)."""
        if pool.queued_provisioning and not pool.flex_start and not self.queued_flex_start(pool):
            self.note(
                path,
                f"{self.key('queued_provisioning')} without {self.key('flex_start')} is GKE's older queued "
                "provisioning (GKE's ProvisioningRequest page now creates such pools with --flex-start, "
                f"GKE {FLEX_START_MIN_VERSION} or later); keep it only on an older cluster",
            )
        if pool.queued_provisioning and (pool.flex_start or self.queued_flex_start(pool)):
            version = self.cluster_version
            if version is not None and below(version, FLEX_START_MIN_VERSION):
                self.problems.add(
                    self.at(path, "flex_start"),
                    f"queued provisioning on flex-start VMs needs GKE {FLEX_START_MIN_VERSION} or later, but "
                    f"{self.version_key} is {cut(version)}; set {self.key('flex_start')}: "
                    "false for GKE's older queued provisioning, or raise the version",
                )
            elif version is None or not satisfies(version, FLEX_START_MIN_VERSION):
                self.note(
                    path,
                    f"{self.key('queued_provisioning')} uses flex-start VMs (GKE's ProvisioningRequest page: "
                    "--flex-start with --enable-queued-provisioning), which needs GKE "
                    f"{FLEX_START_MIN_VERSION} or later; {self.version_hint()}, or set "
                    f"{self.key('flex_start')}: false on an older one",
                )
        if not (pool.flex_start or self.queued_flex_start(pool)):
            ladder_flex = CapacityStep.FLEX_START in (pool.capacity_ladder or ())
            if pool.max_run_duration is not None and not ladder_flex:
                self.problems.add(
                    self.at(path, "max_run_duration"),
                    f"only allowed with {self.key('flex_start')}: true or a {self.key('capacity_ladder')} "
                    "with flexStart (it limits how long a flex-start node runs)",
                )
            return
        flex = self.key("flex_start")
        accelerator = self.catalog.accelerator(pool.accelerator)
        if accelerator is not None and not accelerator.flex_start:
            self.problems.add(
                self.at(path, "flex_start"),
                f"true is not allowed: {accelerator.name} machine types are not offered as flex-start VMs",
            )
        if pool.queued_provisioning:
            # Spot, a reservation, minimum nodes and compact placement: queued provisioning's rules
            # (_check_capacity_options) refuse them already, each reported once.
            self._check_run_limit(pool, path)
            return
        if pool.spot:
            self.problems.add(
                self.at(path, "spot"),
                f"true is not allowed with {flex}: flex-start obtains on-demand capacity for a limited "
                "time; use one or the other",
            )
        if pool.min_nodes:
            self.problems.add(
                self.at(path, "min_nodes"),
                f"{pool.min_nodes} is not allowed with {flex}; allowed: 0 (flex-start pools have no "
                "static size: nodes come when Pods ask for them)",
            )
        if pool.compact_placement and machine is not None and not machine.name.startswith(FLEX_COMPACT):
            self.problems.add(
                self.at(path, "compact_placement"),
                f"true is not allowed with {flex} on {machine.name}: flex-start takes compact placement "
                "on A3 Ultra and A4 machines only",
            )
        if pool.reservation.type != "NONE":
            self.problems.add(
                self.at(path, "reservation.type"),
                f"{cut(pool.reservation.type)} is not allowed with {flex}: flex-start nodes consume no "
                "reservation; allowed: 'NONE'",
            )
        self._check_run_limit(pool, path)
        self.version_gate(path, self.at(path, "flex_start"), flex, FLEX_START_MIN_VERSION)

    def _check_run_limit(self, pool: GpuPool, path: str) -> None:
        seconds = pool.max_run_seconds
        if seconds is not None and seconds > MAX_RUN_SECONDS:
            self.problems.add(
                self.at(path, "max_run_duration"),
                f"{cut(pool.max_run_duration)} is longer than flex-start's limit of 7 days (7d)",
            )
