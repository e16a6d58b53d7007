"""State shared by the GPU pool rules: the catalog, where the pool runs, and the problems found.

The same rules check a stack file's `gpuPools` entry and `GpuNodePool`'s args. Only the names differ:
the stack file's keys are camelCase under `gke-gpu:gpuPools[i]`, a component's args are snake_case
at the top (`gpus_per_node`), so every path and every key named in a message goes through `at` and
`key`.
"""

from typing import NamedTuple

from ..core.catalog import Accelerator, Catalog
from ..core.common import NAMESPACE, KeyNames, Problems, cut, listing
from ..core.gke_version import below, satisfies


class PoolPlace(NamedTuple):
    """Where the pools go: the cluster's region (`region_known` once it is a known Compute Engine
    region: zone rules run only then) and location, its release channel, and its minimum version
    (version gates become checks against it) with the key that sets it (a fleet worker's own cluster
    section, for one)."""

    region: str | None
    region_known: bool
    cluster_location: str | None
    release_channel: str | None = None
    cluster_version: str | None = None
    version_key: str = f"{NAMESPACE}:cluster.minimumVersion"


class PoolRuleBase:
    def __init__(self, catalog: Catalog, place: PoolPlace, *, autopilot: bool, camel_keys: bool) -> None:
        self.catalog = catalog
        self.autopilot = autopilot
        self.region = place.region
        self.region_ok = place.region_known
        self.cluster_location = place.cluster_location or ""
        self.release_channel = place.release_channel
        self.camel_keys = camel_keys
        self.cluster_version = place.cluster_version
        self.version_key = place.version_key
        self.problems = Problems()
        self.warnings: list[str] = []

    def key(self, name: str) -> str:
        """A key as the user wrote it: `sharing.max_clients_per_gpu` or `sharing.maxClientsPerGpu`."""
        return KeyNames(camel=self.camel_keys).key(name)

    def at(self, path: str, name: str) -> str:
        """The path of key `name` inside the pool at `path` (empty for a component's args)."""
        return KeyNames(path, camel=self.camel_keys).at(name)

    def note(self, path: str, text: str) -> None:
        self.warnings.append(f"note: {path}: {text}" if path else f"note: {text}")

    def version_gate(self, path: str, key: str, what: str, minimum: str) -> None:
        """`what` (at `key`) needs GKE `minimum`. Without the cluster's minimum version: a note to
        check it. With one: a problem when every version it names is older; nothing when every one
        is the gate or newer; the note when a prefix (1.33) leaves it open."""
        version = self.cluster_version
        if version is not None and below(version, minimum):
            self.problems.add(
                key,
                f"{what} needs GKE {minimum} or later, but {self.version_key} is "
                f"{cut(version)}; raise it to {minimum} or later, or remove {key.rsplit('.', 1)[-1]}",
            )
        elif version is None or not satisfies(version, minimum):
            self.note(path, f"{what} needs GKE {minimum} or later; {self.version_hint()}")

    def version_hint(self) -> str:
        """Where to check the cluster's GKE version, for the version-gated notes."""
        channel = f" on the {self.release_channel} channel" if self.release_channel else ""
        pinned = f" (minimumVersion {self.cluster_version})" if self.cluster_version else ""
        return f"check the cluster's version{channel}{pinned}"

    def _check_region_offers(self, accelerator: Accelerator, path: str) -> None:
        region = self.region or ""
        if self.region_ok and region in self.catalog.regions and region not in accelerator.zones:
            self.problems.add(
                path,
                f"{cut(accelerator.name)} is not offered in region {region}; regions with it: "
                f"{listing(sorted(accelerator.zones))} ({accelerator.zone_data})",
            )
