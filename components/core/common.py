"""Constants, patterns and helpers shared by the stack-config layers (schema, settings, rules)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from typing import Any

import pulumi
from pydantic.alias_generators import to_camel

from .credentials import redact

NAMESPACE = "gke-gpu"
# Config keys of the gke-gpu namespace; anything else under `gke-gpu:` is an error.
TOP_LEVEL_KEYS = (
    "network",
    "cluster",
    "gpuPools",
    "monitoring",
    "workloads",
    "devicePlugin",
    "gpuNodes",
    "batch",
    "serving",
    "fleet",
    "images",
)

# The extended resource a Pod requests for a GPU (a whole one, a MIG partition or a share).
GPU_RESOURCE = "nvidia.com/gpu"
# GKE taints GPU nodes with the resource's name (ExtendedResourceToleration tolerates it so).
GPU_TAINT_KEY = GPU_RESOURCE
GPU_TAINT_VALUE = "present"
# GKE's first version that creates node pools for a custom ComputeClass on a Standard cluster without
# cluster-wide node auto-provisioning (GKE "About custom ComputeClasses", nodePoolAutoCreation): a
# capacity ladder's (gpu/ladder_rules.py) and a Hyperdisk ML transfer's (serving/rules.py).
COMPUTE_CLASS_POOLS_MIN_VERSION = "1.33.3-gke.1136000"
# GKE's node label naming a node's node pool (also a user label of the node's Cloud Monitoring metrics).
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
MAX_SHARED_CLIENTS = 48  # GKE's documented upper bound for clients per physical GPU.

K8S_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
REGION_PATTERN = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
PROJECT_PATTERN = re.compile(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")
ZONE_PATTERN = re.compile(r"^([a-z]+-[a-z]+[0-9]+)-[a-z]$")
LABEL_VALUE_PATTERN = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# A reservation, optionally shared from another project, optionally one of its blocks.
RESERVATION_PATTERN = re.compile(
    r"^(projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
    r"(/reservationBlocks/[a-z]([-a-z0-9]{0,61}[a-z0-9])?)?$"
)
# RFC 1918, plus RFC 6598 shared space, which GKE supports for Pod and Service ranges.
PRIVATE_RANGES = tuple(
    ipaddress.IPv4Network(r) for r in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)
# GKE's default of 110 Pods per Standard node takes a /24 of the Pod range per node.
POD_RANGE_PREFIX_PER_NODE = 24
# Zones a regional cluster's node pools use when node_locations is left out.
DEFAULT_REGIONAL_ZONES = 3


class ConfigError(pulumi.RunError):
    """Invalid stack configuration. Pulumi prints the message without a Python stack trace."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = [redact(p) for p in problems]
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid stack configuration ({len(self.problems)} problem(s)):\n{lines}")


class KeyNames:
    """Keys as the user wrote them: the stack file's camelCase under a prefix (`gke-gpu:cluster`), or
    a component's snake_case args (no prefix)."""

    def __init__(self, prefix: str = "", *, camel: bool) -> None:
        self.prefix = prefix
        self.camel = camel

    def key(self, name: str) -> str:
        return ".".join(to_camel(part) for part in name.split(".")) if self.camel else name

    def at(self, name: str) -> str:
        return f"{self.prefix}.{self.key(name)}" if self.prefix else self.key(name)


class Problem(str):
    """One problem line, `<path>: <reason>`, that keeps its two parts: where a component's args are
    refused, they become the SDK's `InputPropertyErrorDetails(property_path, reason)` as they are,
    never split back out of the line (a path or a key may itself hold ": ").

    `text` is the line when it names the path otherwise than `<path>: ` (the defaulted `name`)."""

    path: str
    reason: str

    def __new__(cls, path: str, reason: str, text: str | None = None) -> Problem:
        path, reason = redact(path), redact(reason)
        problem = super().__new__(cls, f"{path}: {reason}" if text is None else redact(text))
        problem.path = path
        problem.reason = reason
        return problem

    def __getnewargs__(self) -> tuple[str, str, str]:  # type: ignore[override]
        return self.path, self.reason, str(self)


class Problems:
    def __init__(self) -> None:
        # Problem lines (a list of str: every rule, and ConfigError, reads them as lines).
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(Problem(path, message))


def listing(values: Iterable[Any], most: int = 50) -> str:
    """Allowed values for a message: at most `most` of them, each cut short."""
    values = list(values)
    if not values:
        return "(none)"
    shown = [v if isinstance(v, str) and len(v) <= 80 else cut(v) for v in values[:most]]
    more = f", ... ({len(values) - most} more)" if len(values) > most else ""
    return ", ".join(str(v) for v in shown) + more


def network_of(text: str, path: str, problems: Problems) -> ipaddress.IPv4Network | None:
    try:
        return ipaddress.IPv4Network(text, strict=True)
    except ValueError as exc:
        problems.add(path, f"{cut(text)} is not an IPv4 CIDR block ({exc})")
        return None


def valid_label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return bool(name) and len(name) <= 63 and bool(LABEL_VALUE_PATTERN.fullmatch(name))


# How much of a long value `cut` reads for credentials: what it shows, and a PEM key that starts there.
_REDACTED = 16384


def cut(value: Any, limit: int = 80) -> str:
    """`repr` of a value for a message, cut to about `limit` characters (a 1 MB value stays short).
    true, false and null are shown as the stack file writes them; a credential as its kind and length."""
    if isinstance(value, str):
        value = redact(value[:_REDACTED]) + value[_REDACTED:]  # only the start is shown
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    text = repr(value) if not isinstance(value, str) or len(value) <= limit else repr(value[:limit])
    if isinstance(value, str) and len(value) > limit:
        return f"{text[:-1]}…{text[-1]} ({len(value)} characters)"
    return text if len(text) <= limit + 2 else f"{text[:limit]}… ({len(text)} characters)"


# Documented limits (GKE "Quotas and limits", Compute Engine and Cloud Monitoring limits pages).
MAX_NODES_PER_POOL = 1000  # GKE: nodes per node pool zone; a pool's total here never exceeds it per zone
MAX_POOLS = 100
MAX_BOOT_DISK_GB = 65536  # Persistent Disk / Hyperdisk boot disks up to 64 TiB
MAX_AUTHORIZED_NETWORKS_PUBLIC = 50  # GKE: authorized networks with a public endpoint
MAX_AUTHORIZED_NETWORKS_PRIVATE = 100  # GKE: authorized networks with the public endpoint off
MAX_CHANNELS_PER_POLICY = 16  # Cloud Monitoring: notification channels per alerting policy
MAX_TIME_SLICING_REPLICAS = 1024
MIN_SUBNET_PREFIX = 29
# Kubeconfigs larger than this are not parsed offline for the context check (PyYAML is slow).
KUBECONFIG_CHECK_LIMIT = 256 * 1024  # Compute Engine: the smallest IPv4 subnet range is a /29
