"""Constrained types for the pydantic models that check the components' args (core/validation.py).

The stack file's section models (each domain's model.py, gpu/pool.py) share their patterns and
limits through the same constants (core/common.py), so a value the stack file accepts is one the
components accept too. Where a pattern has no entry in ``PATTERN_MEANINGS`` (the stack file's error
wording), ``matching`` names what is expected in the error itself.
"""

import re
from enum import Enum, StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from .common import (
    DNS_SUBDOMAIN,
    K8S_NAME,
    LABEL_VALUE_PATTERN,
    PROJECT_PATTERN,
    REGION_PATTERN,
    valid_label_key,
)
from .validation import ArgsModel, Deferrable


# The kind of cluster the GPU nodes are in (a stack file's existing `cluster.flavor`), and so how
# DcgmExporter reaches their GPUs (its `flavor`): one set of values for both.
class DcgmFlavor(StrEnum):
    """How the exporter reaches the GPUs."""

    GKE = "gke"
    """GKE's driver from the host path, privileged (GKE has no NVIDIA container runtime)."""
    GENERIC = "generic"
    """The NVIDIA container toolkit injects the GPUs; root with SYS_ADMIN, not privileged."""


def enum_values(enum: type[Enum]) -> Any:
    """`Literal[...]` of an Enum's values: a checked field holds the plain value ('dns'), never the
    member, whether the caller passed the member, its value or (through the provider) either."""
    return Literal[tuple(member.value for member in enum)]


def matching(pattern: "re.Pattern[str] | str", meaning: str, *, max_length: int) -> Any:
    """A string type that must match `pattern` in full; the error says `meaning`."""
    compiled = re.compile(pattern) if isinstance(pattern, str) else pattern

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise PydanticCustomError("string_pattern", "expected {meaning}", {"meaning": meaning})
        return value

    return Annotated[str, Field(max_length=max_length), AfterValidator(check)]


def _label_key(value: str) -> str:
    if not valid_label_key(value):
        raise PydanticCustomError(
            "label_key", "expected a Kubernetes label key such as nvidia.com/gpu.present or gpus"
        )
    return value


ProjectId = matching(
    PROJECT_PATTERN, "a GCP project ID (6-30 lowercase letters, digits, hyphens)", max_length=30
)
RegionName = matching(REGION_PATTERN, "a GCP region such as us-central1", max_length=40)
# A GCP region (regional cluster) or zone (zonal cluster).
LocationName = matching(
    r"[a-z]+-[a-z]+[0-9]+(-[a-z])?",
    "a GCP region or zone such as us-central1 or us-central1-a",
    max_length=40,
)
# GKE cluster names: at most 40 characters (the config's rule for `cluster.name`).
ClusterName = matching(
    K8S_NAME,
    "a GKE cluster name: lowercase letters, digits and hyphens, starting with a letter",
    max_length=40,
)
# A Kubernetes object name that is a DNS label (RuntimeClass, Namespace).
# A Compute Engine resource name (VPC, subnet): RFC 1035, at most 63 characters.
ResourceName = matching(
    K8S_NAME, "a Compute Engine name: lowercase letters, digits and hyphens", max_length=63
)


class NodeNetworkSpec(ArgsModel):
    """An extra NIC's VPC and subnet names (core.nodes.NodeNetwork), each may be an Output."""

    network: Deferrable[ResourceName]  # type: ignore[valid-type]
    subnetwork: Deferrable[ResourceName]  # type: ignore[valid-type]


# A list of extra NICs, or one Output of the whole list (GpuDirectNetworks' node_networks).
NodeNetworks = Deferrable[Annotated[list[NodeNetworkSpec], Field(min_length=1, max_length=16)]]
K8sName = matching(K8S_NAME, "lowercase letters, digits and hyphens, starting with a letter", max_length=63)
NodeName = matching(DNS_SUBDOMAIN, "a Kubernetes node name (a DNS subdomain)", max_length=253)
DeviceClassName = matching(DNS_SUBDOMAIN, "a DeviceClass name (a DNS subdomain)", max_length=253)
LabelKey = Annotated[str, Field(max_length=317), AfterValidator(_label_key)]
LabelValue = matching(
    LABEL_VALUE_PATTERN,
    "a Kubernetes label value: at most 63 letters, digits, '-', '_' and '.', starting and ending "
    "with a letter or digit",
    max_length=63,
)
