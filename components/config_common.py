"""Constants, patterns and helpers shared by the stack-config layers (schema, settings, rules)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from typing import Any

import pulumi

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
)

GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
MAX_SHARED_CLIENTS = 48  # GKE's documented upper bound for clients per physical GPU.
WORKLOAD_NAMES = ("nvidia-smi", "cuda-vector-add", "pytorch-smoke", "sharing-demo")

K8S_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
REGION_PATTERN = re.compile(r"^[a-z]+-[a-z]+\d+$")
ZONE_PATTERN = re.compile(r"^([a-z]+-[a-z]+\d+)-[a-z]$")
LABEL_VALUE_PATTERN = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
RESERVATION_PATTERN = re.compile(
    r"^(projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]*[a-z0-9])?$"
)
CHANNEL_PATTERN = re.compile(r"^projects/[^/]+/notificationChannels/[^/]+$")
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
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid stack configuration ({len(self.problems)} problem(s)):\n{lines}")


class Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{path}: {message}")


def listing(values: Iterable[Any]) -> str:
    values = list(values)
    return ", ".join(str(v) for v in values) if values else "(none)"


def network_of(text: str, path: str, problems: Problems) -> ipaddress.IPv4Network | None:
    try:
        return ipaddress.IPv4Network(text, strict=True)
    except ValueError as exc:
        problems.add(path, f"{text!r} is not an IPv4 CIDR block ({exc})")
        return None


def valid_label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return bool(name) and len(name) <= 63 and bool(LABEL_VALUE_PATTERN.fullmatch(name))
