"""The stack's Inference Gateway for a service with `gateway: true` (imported only by stacks that have
one): an InferenceGateway in the service's namespace, as the service's plan gives it (serving/plan.py),
and how to reach it (stack output `serving.<name>.gateway`)."""

from __future__ import annotations

from typing import Any

import pulumi

from ..serving.gateway import InferenceGateway
from ..serving.plan import ServicePlan
from .declare import declare
from .settings import Settings


def proxy_only_cidr(settings: Settings) -> str:
    """The range of the VPC's proxy-only subnet: the one the stack creates, or the existing VPC's."""
    network = settings.network
    assert network is not None, "a gateway's rules resolve the network"
    cidr = network.existing.proxy_only_cidr if network.existing else network.proxy_only_cidr
    assert isinstance(cidr, str), "the gateway's rules resolve or require the proxy-only range"
    return cidr


def gateway(
    settings: Settings,
    plan: ServicePlan,
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
) -> dict[str, Any]:
    """Declare the service's gateway (after the service and the VPC); return its summary."""
    cidr = proxy_only_cidr(settings)
    declare(
        InferenceGateway,
        f"gateway-{plan.service.name}",
        plan.gateway_args(cidr),
        opts=pulumi.ResourceOptions(providers={"kubernetes": provider}, depends_on=depends_on),
        section="serving",
    )
    return plan.gateway_summary(settings.region, cidr)
