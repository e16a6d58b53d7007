"""The stack file's network section (`gke-gpu:network`): checked by the network's own rules
(network/rules.py, shared with GkeNetwork) and resolved; what only a stack file has: an existing VPC,
room in the ranges for every node the pools can grow to, and the proxy-only subnet an Inference
Gateway needs (the stack's VPC: `network.proxyOnlyCidr`, defaulted; an existing VPC:
`network.existing.proxyOnlyCidr`, required)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from pydantic.alias_generators import to_camel

from ..cluster.model import ClusterConfig
from ..core.common import (
    MIN_SUBNET_PREFIX,
    NAMESPACE,
    POD_RANGE_PREFIX_PER_NODE,
    PRIVATE_RANGES,
    KeyNames,
    cut,
)
from ..core.section import SectionContext
from .model import DEFAULT_PROXY_ONLY_CIDR, MAX_PROXY_ONLY_PREFIX, NetworkConfig
from .rules import check_proxy_only_range, check_ranges

PROXY_ONLY_SUBNET = (
    "gcloud compute networks subnets create <name> --purpose=REGIONAL_MANAGED_PROXY --role=ACTIVE "
    "--region=<gcp:region> --network=<vpc> --range=<cidr>"
)


def check_no_network(network: NetworkConfig | None, ctx: SectionContext) -> None:
    """An existing cluster: the program declares no network for it."""
    if network is not None:
        ctx.problems.add(
            ctx.key("network"),
            "not allowed with cluster.mode existing: no network is declared for an existing cluster",
        )


def check_network(network: NetworkConfig | None, ctx: SectionContext) -> NetworkConfig:
    """The network section, or its defaults: an existing VPC takes none of the ranges this program
    creates; the stack's VPC's ranges by the network's own rules."""
    net = network or NetworkConfig()
    if net.existing is not None:
        cidr_keys = {"subnet_cidr", "pods_cidr", "services_cidr"} & net.model_fields_set
        for key in sorted(cidr_keys):
            ctx.problems.add(
                ctx.key(f"network.{to_camel(key)}"),
                "not allowed with network.existing: the existing subnet's ranges are used",
            )
        if "flow_log_sampling" in net.model_fields_set:
            ctx.problems.add(
                ctx.key("network.flowLogSampling"),
                "not allowed with network.existing: flow logs are a setting of the existing subnet",
            )
        return net
    names = KeyNames(ctx.key("network"), camel=True)
    ranges = [(key, getattr(net, key)) for key in ("subnet_cidr", "pods_cidr", "services_cidr")]
    for key, value in check_ranges(ranges, names, ctx.problems).items():
        if value and not any(value.subnet_of(r) for r in PRIVATE_RANGES):
            ctx.notes.append(
                f"{names.at(key)}: {value} is outside RFC 1918 and 100.64.0.0/10; GKE accepts "
                "privately used public ranges, but make sure nothing else routes them"
            )
    return net


def check_address_capacity(
    network: NetworkConfig, cluster: ClusterConfig, pool_max_nodes: Sequence[int | None], ctx: SectionContext
) -> None:
    """The subnet must hold an address, and the Pod range a /24, for every node the pools can grow
    to (the system pool's and each GPU pool's `maxNodes`), plus a surge node."""
    if network.existing is not None or cluster.system_pool is None:
        return  # an existing subnet's ranges are not known here
    try:
        subnet = ipaddress.IPv4Network(network.subnet_cidr)
        pods = ipaddress.IPv4Network(network.pods_cidr)
    except ValueError:
        return  # a malformed range is reported where it is read; capacity needs both
    nodes = cluster.system_pool.max_nodes + sum(n or 0 for n in pool_max_nodes) + 1
    # Compute Engine reserves four addresses of every primary range.
    usable = subnet.num_addresses - 4
    if subnet.prefixlen <= MIN_SUBNET_PREFIX and usable < nodes:
        ctx.problems.add(
            ctx.key("network.subnetCidr"),
            f"{subnet} has {usable} node addresses, but the pools can grow to {nodes} nodes (system "
            "and GPU maxNodes, plus one upgrade surge node); use a "
            f"/{32 - (nodes + 3).bit_length()} or larger",
        )
    if pods.prefixlen > POD_RANGE_PREFIX_PER_NODE:
        return  # already reported
    capacity = 2 ** (POD_RANGE_PREFIX_PER_NODE - pods.prefixlen)
    if capacity < nodes:
        ctx.problems.add(
            ctx.key("network.podsCidr"),
            f"{pods} holds Pod addresses for {capacity} node(s), but the pools can grow to {nodes} "
            "(system and GPU maxNodes, plus one upgrade surge node; each node takes a /24); use a "
            f"/{POD_RANGE_PREFIX_PER_NODE - (nodes - 1).bit_length()} or larger",
        )


def note_cloud_nat(network: NetworkConfig, *, private_nodes: bool, ctx: SectionContext) -> None:
    """Private nodes on an existing subnet reach the images' registries only through its Cloud NAT."""
    if network.existing is not None and private_nodes:
        ctx.notes.append(
            f"{ctx.key('network.existing')}: private nodes have no external IP; the samples and the "
            "DCGM exporter pull from nvcr.io and docker.io, so the subnet needs Cloud NAT"
        )


def check_gateway_subnet(network: NetworkConfig, users: Sequence[str], ctx: SectionContext) -> NetworkConfig:
    """The proxy-only subnet's range: resolved (the stack's VPC: network.proxyOnlyCidr or its
    default) or required (an existing VPC: network.existing.proxyOnlyCidr) when a service has a
    gateway (`users`: those services' keys, `serving[0]`); refused when none has one, since it would
    be ignored. Returns the network with the range resolved."""
    # Keyed under gke-gpu: as every serving rule (a fleet's workers serve nothing).
    top = f"{NAMESPACE}:network"
    existing = network.existing
    top_set = "proxy_only_cidr" in network.model_fields_set
    if existing is not None and top_set:
        ctx.problems.add(
            f"{top}.proxyOnlyCidr",
            "not allowed with network.existing: the program creates no subnet in a VPC it does not "
            "manage; give the existing proxy-only subnet's range as network.existing.proxyOnlyCidr",
        )
    given = existing.proxy_only_cidr if existing is not None else network.proxy_only_cidr
    if not users:
        # A serving entry that failed its own checks may be the one with the gateway: not judged.
        if given is not None and not ctx.broken.serving():
            where = "network.existing.proxyOnlyCidr" if existing is not None else "network.proxyOnlyCidr"
            ctx.problems.add(
                f"{NAMESPACE}:{where}",
                f"{cut(given)} would be ignored: no service has gateway: true; remove it or set a "
                "service's gateway: true",
            )
        return network
    if existing is not None:
        key = f"{top}.existing.proxyOnlyCidr"
        if existing.proxy_only_cidr is None:
            ctx.problems.add(
                key,
                f"required with gateway: true ({', '.join(users)}): the range of the existing VPC's "
                f"proxy-only subnet in {ctx.region or 'gcp:region'}, which the gateway's load balancer "
                "needs and its NetworkPolicies admit; the program creates none in a VPC it does not "
                f"manage (create one: {PROXY_ONLY_SUBNET})",
            )
        else:
            check_proxy_only_range(
                existing.proxy_only_cidr, key, [], ctx.problems, most_prefix=MAX_PROXY_ONLY_PREFIX
            )
        return network
    cidr = network.proxy_only_cidr or DEFAULT_PROXY_ONLY_CIDR
    key = f"{top}.proxyOnlyCidr" + ("" if top_set else f" (default {DEFAULT_PROXY_ONLY_CIDR})")
    # Not the cluster's ranges, nor GPUDirect's: a node routes those out of other interfaces.
    others = [
        (f"network.{name}", value)
        for name, value in (
            ("subnetCidr", network.subnet_cidr),
            ("podsCidr", network.pods_cidr),
            ("servicesCidr", network.services_cidr),
            ("gpudirectCidr", network.gpudirect_cidr),
        )
        if isinstance(value, str)
    ]
    check_proxy_only_range(str(cidr), key, others, ctx.problems, most_prefix=MAX_PROXY_ONLY_PREFIX)
    return network.model_copy(update={"proxy_only_cidr": cidr})
