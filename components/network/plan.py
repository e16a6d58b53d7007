"""The network's plan: the stack's network section, resolved, turned into GkeNetwork's args (the VPC the
stack creates for its cluster), or, on an existing VPC, the names the cluster takes (cluster/plan.py
NetworkRefs). Pure: stack/program_cluster.py declares the plan."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..cluster.plan import NetworkRefs
from .model import NetworkConfig

if TYPE_CHECKING:
    from .vpc import GkeNetworkArgs


def vpc_args(
    network: NetworkConfig, *, project: str, region: str, name_prefix: str, cloud_nat: bool
) -> GkeNetworkArgs | None:
    """GkeNetwork's args for the VPC the stack creates (None on an existing VPC); `cloud_nat`: the
    cluster's nodes are private, and reach the internet through the VPC's Cloud NAT."""
    if network.existing:
        return None
    assert network.subnet_cidr
    args: GkeNetworkArgs = {
        "project": project,
        "region": region,
        "name_prefix": name_prefix,
        "subnet_cidr": network.subnet_cidr,
        "pods_cidr": network.pods_cidr or "",
        "services_cidr": network.services_cidr or "",
        "cloud_nat": cloud_nat,
        "flow_log_sampling": network.flow_log_sampling or 0,
    }
    # Resolved only when a service has a gateway: no proxy-only subnet otherwise.
    if network.proxy_only_cidr:
        args["proxy_only_cidr"] = network.proxy_only_cidr
    return args


def existing_refs(network: NetworkConfig) -> NetworkRefs:
    """An existing VPC's names, where the cluster goes."""
    existing = network.existing
    assert existing is not None
    return NetworkRefs(
        existing.network, existing.subnetwork, existing.pods_range_name, existing.services_range_name
    )
