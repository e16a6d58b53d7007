"""What a stack-file section's rules read besides the section itself: `SectionContext`.

Each domain checks its own section (`<domain>/section.py`: `check_<section>(section, context, ...)`);
the stack layer loads the file and calls them in order (stack/config.py), each seeing only what passed
the one before. `Broken` records what failed its own checks, so that no rule judges a value that is
already reported (every independent problem, and no follow-on one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .catalog import Catalog
from .common import Problems, cut, listing

T = TypeVar("T")


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

    def serving(self) -> bool:
        """The serving section, or one of its entries, failed its own checks."""
        return any(s == "serving" or s.startswith("serving[") for s in self.sections)


@dataclass
class SectionContext:
    """The rules' view of the stack file around a section: where its keys start (`gke-gpu:` in a stack
    file, `gke-gpu:fleet.workers[1].` for a fleet worker's sections), the GCP context, what failed its
    own checks, and where every problem and note goes."""

    root: str
    project: str | None
    region: str | None
    stack: str
    catalog: Catalog
    broken: Broken
    problems: Problems = field(default_factory=Problems)
    notes: list[str] = field(default_factory=list)
    # The config keys the engine holds as secrets (None: not known to the caller, e.g. a test that
    # hands parse_settings a dict; the plain-text credential check then does not run).
    secret_keys: frozenset[str] | None = None
    # True once gcp:region is a known Compute Engine region: zone rules run only then.
    region_known: bool = False
    # An existing cluster whose flavor is missing (reported): flavor-dependent rules are skipped.
    flavor_unknown: bool = False

    def key(self, path: str) -> str:
        """A stack-file key under the root: `key("network.subnetCidr")`."""
        return f"{self.root}{path}"

    def unknown_pool(self, key: str, name: str, pools: Mapping[str, Any]) -> bool:
        """True when `name` is not a resolved GPU pool of the stack; reported under `key` only when
        every pool is known (a pool that failed its own checks is not named twice)."""
        if name in pools:
            return False
        if not self.broken.any_pool():
            self.problems.add(key, f"{cut(name)} is not a GPU pool of this stack; pools: {listing(pools)}")
        return True


def indexed(items: Sequence[T], indexes: Sequence[int]) -> list[tuple[int, T]]:
    """The shape-valid entries of a list section with their index in the stack file (for the keys)."""
    return list(zip(indexes, items, strict=True))
