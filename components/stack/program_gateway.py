"""The stack's Inference Gateway for a service with `gateway: true` (imported only by stacks that have
one): an InferenceGateway in the service's namespace, and how to reach it (stack output
`serving.<name>.gateway`)."""

from __future__ import annotations

from typing import Any

import pulumi

from ..serving.gateway import EPP_CHART, EPP_VERSION, GATEWAY_CLASS, InferenceGateway, epp_name
from ..serving.model import ServingConfig
from .declare import declare
from .program_serving import nodes_per_replica
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
    service: ServingConfig,
    provider: pulumi.ProviderResource,
    depends_on: list[pulumi.Resource],
) -> dict[str, Any]:
    """Declare the service's gateway (after the service and the VPC); return its summary."""
    namespace = service.namespace
    cidr = proxy_only_cidr(settings)
    pool = next(p for p in settings.gpu_pools if p.name == service.pool)
    declare(
        InferenceGateway,
        f"gateway-{service.name}",
        {
            "service": service.name,
            "proxy_only_cidr": cidr,
            # A replica over several nodes is a LeaderWorkerSet: the pool takes its leaders only.
            **({"leaders_only": True} if nodes_per_replica(service, pool) > 1 else {}),
        },
        opts=pulumi.ResourceOptions(providers={"kubernetes": provider}, depends_on=depends_on),
    )
    address = (
        f"kubectl get gateway -n {namespace} {service.name} -o jsonpath='{{.status.addresses[0].value}}'"
    )
    request = f'{{"model": "{service.name}", "prompt": "The capital of France is", "max_tokens": 16}}'
    return {
        "name": service.name,
        "class": f"{GATEWAY_CLASS} (regional internal Application Load Balancer: reachable from the VPC "
        f"in {settings.region})",
        "inferencePool": service.name,
        "endpointPicker": f"{epp_name(service.name)} ({EPP_CHART} {EPP_VERSION})",
        "proxyOnlyCidr": cidr,
        "commands": {
            "status": f"kubectl get gateway,httproute,inferencepool -n {namespace}",
            "address": address,
            "ask": f"ADDRESS=$({address}); curl -s http://$ADDRESS/v1/completions -H "
            f"'Content-Type: application/json' -d '{request}'  # from a VM or Pod in the VPC",
        },
    }
