"""The network's own rules, for the stack file and for GkeNetwork's args alike: the node, Pod and
Service ranges, and a proxy-only subnet's range. GkeNetwork checks its args with these functions, and
the network's section rules (network/section.py) check a stack file's `network` with the same ones, only
the names differ (camelCase under `gke-gpu:network`, or snake_case args)."""

import ipaddress
from collections.abc import Sequence

from ..core.common import MIN_SUBNET_PREFIX, POD_RANGE_PREFIX_PER_NODE, KeyNames, Problems, network_of


def check_ranges(
    ranges: Sequence[tuple[str, str]], names: KeyNames, problems: Problems
) -> dict[str, ipaddress.IPv4Network | None]:
    """The node, Pod and Service ranges (`(snake_key, cidr)` pairs): each a network address, no two
    overlapping, the subnet at least a /29 and the Pod range a /24 or larger. Returns them parsed."""
    parsed = {key: network_of(value, names.at(key), problems) for key, value in ranges}
    items = list(parsed.items())
    for i, (key_a, net_a) in enumerate(items):
        for key_b, net_b in items[i + 1 :]:
            if net_a and net_b and net_a.overlaps(net_b):
                problems.add(
                    names.at(key_b),
                    f"{net_b} overlaps {names.at(key_a)} {net_a}; the node, Pod and Service ranges must "
                    "not overlap",
                )
    subnet, pods = parsed.get("subnet_cidr"), parsed.get("pods_cidr")
    if subnet and subnet.prefixlen > MIN_SUBNET_PREFIX:
        problems.add(
            names.at("subnet_cidr"),
            f"{subnet} is too small; a Compute Engine subnet is at least a /{MIN_SUBNET_PREFIX}",
        )
    if pods and pods.prefixlen > POD_RANGE_PREFIX_PER_NODE:
        problems.add(
            names.at("pods_cidr"),
            f"{pods} is too small; GKE gives each node a /24 of Pod addresses, so use /24 or larger",
        )
    return parsed


def check_proxy_only_range(
    cidr: str, key: str, others: Sequence[tuple[str, str]], problems: Problems, *, most_prefix: int
) -> None:
    """A proxy-only subnet's range (`key` names it): a network address of at least 2**(32 -
    most_prefix) addresses that overlaps none of `others` ((key, cidr) pairs: the VPC's other ranges;
    one that does not parse was reported where it is read)."""
    net = network_of(cidr, key, problems)
    if net is None:
        return
    if net.prefixlen > most_prefix:
        problems.add(
            key,
            f"{net} is too small; a proxy-only subnet has at least {2 ** (32 - most_prefix)} addresses "
            f"(/{most_prefix} or larger; Google recommends a /23)",
        )
    for other_key, other in others:
        try:
            other_net = ipaddress.IPv4Network(other, strict=True)
        except ValueError:
            continue
        if net.overlaps(other_net):
            problems.add(
                key, f"{net} overlaps {other_key} {other_net}; the proxy-only subnet needs a range of its own"
            )
