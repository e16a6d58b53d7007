"""The cluster's own rules, for the stack file and for the components' args alike.

GkeCluster checks its args with these functions, and the cluster's section rules (cluster/section.py)
check a stack file's `cluster` with the same ones: only the
names differ (camelCase under `gke-gpu:...`, or a component's snake_case args), so a stack file
gets the messages it always got and a program gets the same rules. Pure functions: no cloud SDK is imported
(the stack layer stays light).
"""

import re
from collections.abc import Collection

from ..core.catalog import MachineTypes, load_machine_types
from ..core.common import (
    DEFAULT_REGIONAL_ZONES,
    MAX_AUTHORIZED_NETWORKS_PUBLIC,
    ZONE_PATTERN,
    KeyNames,
    Problems,
    cut,
    listing,
)
from .boot_disks import disk_type_problem
from .model import GkeClusterSettings, SystemPoolConfig

# Custom machine types: <series>-custom-<vCPUs>-<memory MB>[-ext] (N1 also without the series), and
# E2's shared-core custom types e2-custom-{micro,small,medium}-<memory MB> (data/machine_types.yaml).
_CUSTOM = re.compile(r"(?:(?P<series>[a-z][a-z0-9]*)-)?custom-[1-9][0-9]*-[1-9][0-9]*(?:-ext)?")
_E2_SHARED_CUSTOM = re.compile(r"e2-custom-(?:micro|small|medium)-[1-9][0-9]*")
_CUSTOM_SYNTAX = "<series>-custom-<vCPUs>-<memory in MB>, -ext for extended memory (e.g. n2-custom-4-16384)"


def check_private_nodes(
    names: KeyNames, problems: Problems, *, private_nodes: bool, public_endpoint: bool
) -> None:
    """Public nodes need the public IP endpoint: a private one exists only with private nodes."""
    if not private_nodes and not public_endpoint:
        networks = names.key("master_authorized_networks" if names.camel else "authorized_networks")
        problems.add(
            names.at("private_nodes"),
            f"false needs {names.key('public_endpoint')}: true: a private IP endpoint only exists on a "
            "cluster with private nodes (the provider cannot validate the combination); keep "
            f"{names.key('private_nodes')}: true or set {names.key('public_endpoint')}: true with {networks}",
        )


def check_nodes(
    cluster: GkeClusterSettings,
    names: KeyNames,
    problems: Problems,
    *,
    autopilot_key: str | None,
    location: str,
    gpu_series: Collection[str],
) -> None:
    """Autopilot's limits on the nodes, and the system pool (None on Standard means the default one).
    `autopilot_key` says how the user chose Autopilot (`mode autopilot`, `autopilot: true`), None on
    Standard."""
    system_pool = cluster.system_pool
    if autopilot_key is not None:
        if "intranode_visibility" in cluster.model_fields_set:
            problems.add(
                names.at("intranode_visibility"),
                f"not allowed with {autopilot_key}: Autopilot clusters always have intranode visibility",
            )
        if system_pool is not None:
            problems.add(
                names.at("system_pool"),
                f"not allowed with {autopilot_key}: Autopilot manages the nodes for system Pods",
            )
        return
    pool = system_pool or SystemPoolConfig()
    if pool.min_nodes > pool.max_nodes:
        problems.add(
            names.at("system_pool.min_nodes"),
            f"{pool.min_nodes} is greater than {names.key('system_pool.max_nodes')} {pool.max_nodes}",
        )
    if pool.machine_type.split("-", 1)[0] in gpu_series:
        problems.add(
            names.at("system_pool.machine_type"),
            f"{cut(pool.machine_type)} is a GPU machine type; the system pool is for non-GPU system Pods "
            "(e.g. e2-standard-4)",
        )
    else:
        problem = machine_type_problem(pool.machine_type, load_machine_types())
        if problem:
            problems.add(names.at("system_pool.machine_type"), problem)
        else:
            disk_problem = disk_type_problem(pool.machine_type, pool.disk_type)
            if disk_problem:
                problems.add(names.at("system_pool.disk_type"), disk_problem)
    zones = 1 if ZONE_PATTERN.fullmatch(location) else DEFAULT_REGIONAL_ZONES
    if pool.max_nodes < zones:
        problems.add(
            names.at("system_pool.max_nodes"),
            f"{pool.max_nodes} is too small: the system pool of a regional cluster starts with one node in "
            f"each of its {zones} zones; allowed: {zones} or more (or a zonal cluster)",
        )


def machine_type_problem(name: str, table: MachineTypes) -> str | None:
    """Why `name` is not a machine type of the table's Compute Engine series, or None: a listed
    predefined shape, any shape of a series the table does not list shapes for, or a custom type's
    syntax on a series that has custom types (the vCPU/memory ratio is left to Compute Engine)."""
    custom_series = sorted(s.name for s in table.series.values() if s.custom)
    custom = _CUSTOM.fullmatch(name)
    if custom or _E2_SHARED_CUSTOM.fullmatch(name):
        series_name = (custom.group("series") or "n1") if custom else "e2"
        series = table.series.get(series_name)
        if series is not None and series.custom:
            return None
        return (
            f"{cut(name)} is not a Compute Engine machine type: {series_name} has no custom machine types; "
            f"custom types exist for {listing(custom_series)}"
        )
    if name.startswith("custom-") or "-custom-" in name:
        return f"{cut(name)} is not a custom machine type; expected {_CUSTOM_SYNTAX}"
    series_name = name.split("-", 1)[0]
    series = table.series.get(series_name)
    if series is None:
        import difflib

        close = difflib.get_close_matches(name, table.names(), n=1)
        hint = f"did you mean {cut(close[0])}?" if close else f"known series: {listing(sorted(table.series))}"
        return f"{cut(name)} is not a Compute Engine machine type: unknown series {cut(series_name)}; {hint}"
    if series.shapes is None or name in series.shapes:
        return None
    shapes = series.listed()
    import difflib

    close = difflib.get_close_matches(name, shapes, n=1)
    hint = f"did you mean {cut(close[0])}? " if close else ""
    custom_hint = f", or a custom type {series_name}-custom-<vCPUs>-<memory in MB>" if series.custom else ""
    return (
        f"{cut(name)} is not a Compute Engine machine type: {series_name} has no such shape; {hint}"
        f"allowed: {listing(shapes)}{custom_hint}"
    )


def check_public_endpoint_networks(count: int, key: str, problems: Problems) -> None:
    """GKE's limit on authorized networks with a public endpoint (a private one allows more)."""
    if count > MAX_AUTHORIZED_NETWORKS_PUBLIC:
        problems.add(
            key,
            f"has {count} entries; GKE allows at most {MAX_AUTHORIZED_NETWORKS_PUBLIC} with a public "
            "endpoint",
        )
