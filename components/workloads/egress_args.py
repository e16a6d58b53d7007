"""A team's egress entry, as GpuBatchQueues takes it (team_namespaces.py declares the policy)."""

from typing import NotRequired, TypedDict


class TeamEgress(TypedDict):
    """More egress for a team's Pods: a range, less some of it, on some ports."""

    cidr: str
    """An IPv4 CIDR block the team's Pods may reach, such as 0.0.0.0/0 or 10.30.0.0/16."""
    excluding: NotRequired[list[str]]
    """Blocks inside `cidr` that stay closed (e.g. the private ranges). Defaults to none."""
    ports: NotRequired[list[int]]
    """The ports opened (1-65535). Defaults to every port."""
    protocol: NotRequired[str]
    """TCP, UDP or SCTP. Defaults to TCP."""
