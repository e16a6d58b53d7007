"""GKE versions as the stack file and GkeCluster's args write them, and how they compare with a
version gate (a feature's first GKE version, such as flex-start's 1.32.2-gke.1652000).

A version is `1.<minor>`, `1.<minor>.<patch>` or `1.<minor>.<patch>-gke.<build>`: the forms GKE's
API takes for a cluster's version (`min_master_version`, sent as `initialClusterVersion` at creation
and `desiredMasterVersion` after). A prefix names the whole minor or patch, of which GKE picks one
build: it is below a gate only when every build it can name is.
"""

from __future__ import annotations

import re

from .model import GKE_VERSION

_VERSION = re.compile(GKE_VERSION)
VERSION_MEANING = "a GKE version: 1.<minor>, 1.<minor>.<patch> or 1.<minor>.<patch>-gke.<build>"


def parse(version: str) -> tuple[int, ...]:
    """The numbers of a version, as many as it names: (minor,), (minor, patch) or (minor, patch,
    build). Raises ValueError for anything else."""
    match = _VERSION.match(version)
    if not match:
        raise ValueError(f"{version!r} is not {VERSION_MEANING}")
    numbers = [match.group(1), match.group(3), match.group(5)]
    return tuple(int(n) for n in numbers if n is not None)


def below(version: str, gate: str) -> bool:
    """True when every GKE build `version` can name is older than `gate` (a full version); False
    when some build it names is the gate or newer (a prefix of the gate's own patch or minor is not
    below it: GKE may pick a newer build)."""
    named, needed = parse(version), parse(gate)
    return named < needed[: len(named)]


def satisfies(version: str, gate: str) -> bool:
    """True when every build `version` can name is the gate or newer."""
    named, needed = parse(version), parse(gate)
    # A prefix stands for its oldest build: 1.33 for 1.33.0-gke.0.
    return named + (0,) * (3 - len(named)) >= needed
