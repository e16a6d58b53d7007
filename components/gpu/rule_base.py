"""State shared by the GPU pool rules: the catalog, where the pool runs, and the problems found.

The same rules check a stack file's `gpuPools` entry and `GpuNodePool`'s args. Only the names differ:
the stack file's keys are camelCase under `gke-gpu:gpuPools[i]`, a component's args are snake_case
at the top (`gpus_per_node`), so every path and every key named in a message goes through `at` and
`key`.
"""

from ..core.catalog import Accelerator, Catalog
from ..core.common import KeyNames, Problems, cut, listing


class PoolRuleBase:
    def __init__(
        self,
        catalog: Catalog,
        *,
        autopilot: bool,
        region: str | None,
        region_known: bool,
        cluster_location: str | None,
        release_channel: str | None,
        camel_keys: bool,
    ) -> None:
        self.catalog = catalog
        self.autopilot = autopilot
        self.region = region
        # True once the region is a known Compute Engine region: zone rules run only then.
        self.region_ok = region_known
        self.cluster_location = cluster_location or ""
        self.release_channel = release_channel
        self.camel_keys = camel_keys
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

    def version_hint(self) -> str:
        """Where to check the cluster's GKE version, for the version-gated notes."""
        channel = f" on the {self.release_channel} channel" if self.release_channel else ""
        return f"check the cluster's version{channel}"

    def _check_region_offers(self, accelerator: Accelerator, path: str) -> None:
        region = self.region or ""
        if self.region_ok and region in self.catalog.regions and region not in accelerator.zones:
            self.problems.add(
                path,
                f"{cut(accelerator.name)} is not offered in region {region}; regions with it: "
                f"{listing(sorted(accelerator.zones))} ({accelerator.zone_data})",
            )
