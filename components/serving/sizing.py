"""How much of a GPU node a model server's Pod takes, where its Cloud Storage FUSE file cache goes and
how large it is, and whether its pool has room to surge a replica in a rollout: pure functions of the
pool and the service, for the stack layer (which composes) and its rules (which refuse).

Sources and what is UNVERIFIED: docs/serving-research.md, "Objects (serving-objects)"."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal, NamedTuple

from ..core.catalog import MachineType, load_catalog
from ..gpu.pool import LOCAL_SSD_GIB, GpuPool
from .model import ServingConfig
from .model_catalog import weights_bytes

GIB = 1024**3
# Compute Engine sizes disks in GB (10^9 bytes); a Local SSD is 375 GB, 349 GiB (gpu.pool.LOCAL_SSD_GIB).
GB_PER_GIB = GIB / 10**9
# What GKE keeps of a node's ephemeral storage from the Pods (GKE "Plan for node sizes", ephemeral
# storage reservations): an eviction threshold of 10%, and min(50%, 6 GiB + 35%, 100 GiB) for the
# system. The page's example node (a 100 GB boot disk) shows 47,060,071,478 bytes allocatable, which
# this gives within 5%; that the same rule holds for Local SSD-backed storage is UNVERIFIED. A Pod's
# requests stay 10% under its share of what is left (the node's DaemonSets ask for some too).
EVICTION_SHARE = 0.10
EPHEMERAL_SLACK = 0.9
# Where the stack does not say how large the weights are: the largest cache the node's disk holds
# (Local SSD or boot disk, never memory), at most 1 TiB (a 405B model in 16 bits is ~810 GB); the
# render says the size was not known.
MAX_UNKNOWN_CACHE_GIB = 1024
# Room above the weights in the cache's volume: Cloud Storage FUSE needs the cache's max size at least
# the files' total and its volume larger than that (gcs-fuse-csi-driver docs/troubleshooting.md, "File
# cache"; the max size is server_parts.file_cache_max_mb, 1 GiB below the volume).
CACHE_HEADROOM = 1.1
CACHE_SLACK_GIB = 1
# Of a node's memory, a Pod's GPU share: the vLLM container takes 55%, GKE and the node's DaemonSets
# about 15%; what is left may hold a cache in memory (tmpfs). Memory only with room to spare: the
# weights' cache in at most half of what is left.
CONTAINER_MEMORY_SHARE = 0.55
MEMORY_CACHE_SHARE = 0.15
# Of a node's ephemeral storage (the boot disk, or the Local SSDs that hold it), a Pod's GPU share:
# the container's scratch (home, caches) takes a quarter; the image (~10 GB compressed, its unpacked
# size UNVERIFIED), the node's logs and the OS another quarter; the file cache at most half.
CONTAINER_DISK_SHARE = 0.25
DISK_CACHE_SHARE = 0.5


def download_disk_gib(ephemeral_gib: int) -> int:
    """The disk a replica may write on its node (a Hugging Face model's download, caches): a quarter of
    the node's ephemeral storage (GpuPool.node_ephemeral_storage_gib: its Local SSDs where the pool puts
    ephemeral storage on them, else its boot disk), at least 20 GiB (the image and the node need the
    rest)."""
    return max(20, ephemeral_gib // 4)


def allocatable_ephemeral_gib(capacity_gib: float) -> float:
    """A node's ephemeral storage the Pods may request, of `capacity_gib`: less GKE's eviction threshold
    and its system reservation (EVICTION_SHARE, above)."""
    reserved = min(0.5 * capacity_gib, 6 + 0.35 * capacity_gib, 100)
    return capacity_gib - reserved - EVICTION_SHARE * capacity_gib


def node_share(pool: GpuPool, gpus: int) -> tuple[MachineType, float] | None:
    """The pool's machine type and the share of a node `gpus` of its GPUs are; None where the machine
    is not known here (an Autopilot profile's default)."""
    accelerator = load_catalog().accelerator(pool.accelerator)
    machine = accelerator.machine_type(pool.machine_type or "") if accelerator else None
    if machine is None or not pool.gpus_per_node:
        return None
    return machine, gpus / pool.gpus_per_node


def container_size(pool: GpuPool, gpus: int) -> dict[str, int]:
    """CPU, memory, /dev/shm and disk of a replica taking `gpus` of a node: half the node's CPU and 55%
    of its memory in the GPUs' proportion (what a GPU node's allocatable leaves after GKE's
    reservations and the node's DaemonSets; at least 1 core and 4 GiB); shm a quarter of the memory,
    at most 16; disk a quarter of the replica's share of the node's ephemeral storage (the image and the
    node need the rest). Without a
    machine type (an Autopilot profile's default), 4 cores and 24 GiB, which Autopilot raises to its
    minimums."""
    node = node_share(pool, gpus)
    if node is None:
        return {
            "cpu": 4,
            "memory_gib": 24,
            "shm_gib": 4,
            "disk_gib": download_disk_gib(pool.node_ephemeral_storage_gib),
        }
    machine, share = node
    # The disk is an ephemeral-storage request: in the replica's GPU share of the node, so that the
    # node's replicas fit it together (a quarter of the whole node each kept 8 one-GPU replicas of an
    # A3 node to 3).
    disk = download_disk_gib(int(pool.node_ephemeral_storage_gib * share))
    cpu = max(1, int(machine.vcpus * share * 0.5))
    memory = max(4, int(machine.memory_gb * share * CONTAINER_MEMORY_SHARE))
    return {"cpu": cpu, "memory_gib": memory, "shm_gib": max(1, min(16, memory // 4)), "disk_gib": disk}


Medium = Literal["memory", "disk"]


class WeightsCache(NamedTuple):
    """A Pod's file cache: its volume's size, in memory or on the node's ephemeral storage (the boot
    disk, or the Local SSDs where the pool puts it), and what the render says of it. `size_gib` 0:
    no cache. `problem`: the weights do not fit the largest cache the node can hold (both sizes)."""

    size_gib: int
    medium: Medium
    where: str
    note: str = ""
    problem: str = ""


def file_cache_max_mb(size_gib: int) -> int:
    """Cloud Storage FUSE's file-cache:max-size-mb for a cache volume of `size_gib`: 1 GiB (an eighth of
    a small one) below it, so the cache evicts before its volume is full (the driver's docs: the volume
    larger than the cache)."""
    return size_gib * 1024 - min(1024, size_gib * 128)


def cache_gib_for(weights_bytes: int) -> int:
    """The cache's volume for weights of `weights_bytes`: 10% above them, plus 1 GiB."""
    return math.ceil(weights_bytes / GIB * CACHE_HEADROOM) + CACHE_SLACK_GIB


def weights_cache(pool: GpuPool, gpus: int, weights_bytes: int | None) -> WeightsCache:
    """The file cache of a Pod taking `gpus` of a node, sized to the weights it caches (each Pod of a
    multi-node replica may read every file of the model: UNVERIFIED whether vLLM's loader reads only
    its ranks' shards): on the Local SSDs that hold the node's ephemeral storage where the pool has
    them; else in memory where the weights fit with room to spare (twice over in the memory left
    beside the container); else on the boot disk. Weights larger than the cache the node can hold are
    refused (`problem`, both sizes). `weights_bytes` None: as large as the disk holds (at most
    MAX_UNKNOWN_CACHE_GIB), said in the note. No cache on a node whose size is not known here."""
    node = node_share(pool, gpus)
    if node is None:
        unknown = "no file cache: the node's size is not known here (an Autopilot profile)"
        return WeightsCache(0, "memory", "none", unknown)
    machine, share = node
    if pool.local_ssd_count:
        capacity = pool.local_ssd_count * LOCAL_SSD_GIB
        where = f"the node's Local SSD ({pool.local_ssd_count} x 375 GB)"
    else:
        capacity = int(pool.disk_size_gb / GB_PER_GIB)
        where = f"the node's boot disk ({pool.disk_size_gb} GB, the pool has no Local SSD)"
    # The cache and the container's own disk (container_size) are both requests on the node's
    # allocatable ephemeral storage: the cache gets what the container leaves of the Pod's share.
    pod_allocatable = allocatable_ephemeral_gib(capacity) * share * EPHEMERAL_SLACK
    left = int(pod_allocatable) - container_size(pool, gpus)["disk_gib"]
    room = max(0, min(int(capacity * share * DISK_CACHE_SHARE), left))
    if weights_bytes is None:
        size = min(room, MAX_UNKNOWN_CACHE_GIB)
        return WeightsCache(
            size, "disk", where, "the model's size is not known here: as large as the disk holds"
        )
    need = cache_gib_for(weights_bytes)
    note = f"sized for {weights_bytes / GIB:.1f} GiB of weights"
    memory_room = int(machine.memory_gb * share * MEMORY_CACHE_SHARE)
    if not pool.local_ssd_count and 2 * need <= memory_room:
        return WeightsCache(need, "memory", "memory", note)
    if need <= room:
        return WeightsCache(need, "disk", where, note)
    problem = (
        f"the model's weights ({weights_bytes / GIB:.1f} GiB, a {need} GiB file cache with its headroom) "
        f"are larger than the {room} GiB file cache a Pod of pool {pool.name} can hold on {where}; give "
        "the pool Local SSDs (localSsdCount) or a larger boot disk (diskSizeGb), or read the weights from "
        "a Hyperdisk ML volume (weights.via hyperdiskMl)"
    )
    return WeightsCache(room, "disk", where, note, problem)


def surge_services(pool: GpuPool, services: Iterable[tuple[str, int, int]]) -> set[str]:
    """Which of the pool's services (name, most replicas, GPUs a replica) get a surge replica in a
    rollout: in order, each whose GPUs still fit the pool at its largest (maxNodes) once every
    service runs its most replicas and the ones before it surge. A pool without maxNodes (an Autopilot
    profile) sets no bound here: every service surges, and a rollout waits for the capacity."""
    services = list(services)
    if pool.max_nodes is None or not pool.gpus_per_node:
        return {name for name, _, _ in services}
    free = pool.max_nodes * pool.schedulable_gpus_per_node - sum(r * g for _, r, g in services)
    surging: set[str] = set()
    for name, _, gpus in services:
        if gpus <= free:
            surging.add(name)
            free -= gpus
    return surging


def describe_cache(cache: WeightsCache) -> str:
    """The render's words for a Pod's file cache: where, how large, its max size, and why."""
    if not cache.size_gib:
        return cache.note
    where = "in memory" if cache.medium == "memory" else f"on {cache.where}"
    return (
        f"file cache {cache.size_gib} GiB {where} (file-cache:max-size-mb "
        f"{file_cache_max_mb(cache.size_gib)}), {cache.note}"
    )


def describe_rollout(
    pool: GpuPool, gpus: int, min_replicas: int, surge: bool, replicas_key: str = "replicas.min"
) -> str:
    """The render's words for what a rollout of a service costs (`replicas_key`: the key that sets its
    fewest replicas)."""
    if surge:
        return (
            f"a surge replica ({gpus} GPU(s)) starts and serves before an old one stops (maxSurge 1, "
            "maxUnavailable 0): no outage; it waits for the pool to add a node"
        )
    room = f"pool {pool.name}'s maxNodes {pool.max_nodes} leaves no room for a surge replica"
    if min_replicas >= 2:
        return f"one replica at a time (maxSurge 0, maxUnavailable 1: {room}); the others keep serving"
    return (
        f"takes the service down: its one replica stops before the new one starts (up to 45 minutes: a "
        f"node, the image, the weights), as {room}; raise maxNodes by {gpus} GPU(s)' worth of nodes, or "
        f"run {replicas_key} 2"
    )


def weights_bytes_of(service: ServingConfig) -> int | None:
    """The size of a service's weights where it is known: the model catalogue's entry, or the figures
    `modelInfo` states (model_catalog.weights_bytes). None for a model known to neither: the cache is
    then as large as the node's disk holds, and the render says so."""
    return weights_bytes(service)
