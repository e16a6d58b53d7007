"""What failed its own checks, so that rules reading it are skipped (no follow-on problems)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Broken:
    """Sections and items whose values did not pass their own checks."""

    # Top-level keys (camelCase) whose whole value is unusable, e.g. {"monitoring"}.
    sections: set[str] = field(default_factory=set)
    # Names of GPU pools that failed a check (shape or meaning): workloads on them are not judged.
    pools: set[str] = field(default_factory=set)
    # gpuPools entries that failed their shape check and have no usable name.
    unnamed_pools: int = 0
    # Keys of gke-gpu:cluster that failed their shape check while `mode` was valid: the rest of the
    # cluster section is still judged, and the rules reading these keys are skipped.
    cluster_keys: set[str] = field(default_factory=set)
    # For the shape-valid pools and workloads kept in the config: their index in the stack file.
    pool_indexes: list[int] = field(default_factory=list)
    workload_indexes: list[int] = field(default_factory=list)
    serving_indexes: list[int] = field(default_factory=list)

    def any_pool(self) -> bool:
        """Some pool is unusable, or the whole section is (malformed, or misspelt: then the pools
        the user meant are unknown, not absent)."""
        return bool(self.pools) or self.unnamed_pools > 0 or "gpuPools" in self.sections
