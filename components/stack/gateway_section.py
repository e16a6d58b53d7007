"""Pass 2 rules for the Inference Gateway (`gke-gpu:serving[i].gateway`) and what it needs of the
network: a proxy-only subnet in the cluster's region, created in the stack's VPC
(`network.proxyOnlyCidr`, defaulted) or named for an existing VPC (`network.existing.proxyOnlyCidr`)."""

from __future__ import annotations

from ..cluster.rules import check_proxy_only_range
from ..core.common import NAMESPACE, cut
from ..network.model import DEFAULT_PROXY_ONLY_CIDR, MAX_PROXY_ONLY_PREFIX, NetworkConfig
from .schema import RuleBase

NETWORK = f"{NAMESPACE}:network"
PROXY_ONLY_SUBNET = (
    "gcloud compute networks subnets create <name> --purpose=REGIONAL_MANAGED_PROXY --role=ACTIVE "
    "--region=<gcp:region> --network=<vpc> --range=<cidr>"
)


class GatewayRules(RuleBase):
    def _gateways(self, network: NetworkConfig) -> NetworkConfig:
        """The proxy-only subnet's range: resolved (the stack's VPC: network.proxyOnlyCidr or its
        default) or required (an existing VPC: network.existing.proxyOnlyCidr) when a service has a
        gateway; refused when none has one, since it would be ignored. Returns the network with the
        range resolved."""
        existing = network.existing
        top_set = "proxy_only_cidr" in network.model_fields_set
        if existing is not None and top_set:
            self.problems.add(
                f"{NETWORK}.proxyOnlyCidr",
                "not allowed with network.existing: the program creates no subnet in a VPC it does not "
                "manage; give the existing proxy-only subnet's range as network.existing.proxyOnlyCidr",
            )
        given = existing.proxy_only_cidr if existing is not None else network.proxy_only_cidr
        users = [f"serving[{i}]" for i, s in self.indexed_services() if s.gateway]
        if not users:
            # A serving entry that failed its own checks may be the one with the gateway: not judged.
            if given is not None and not any(s.startswith("serving") for s in self.broken.sections):
                where = "network.existing.proxyOnlyCidr" if existing is not None else "network.proxyOnlyCidr"
                self.problems.add(
                    f"{NAMESPACE}:{where}",
                    f"{cut(given)} would be ignored: no service has gateway: true; remove it or set a "
                    "service's gateway: true",
                )
            return network
        if existing is not None:
            key = f"{NETWORK}.existing.proxyOnlyCidr"
            if existing.proxy_only_cidr is None:
                self.problems.add(
                    key,
                    f"required with gateway: true ({', '.join(users)}): the range of the existing VPC's "
                    f"proxy-only subnet in {self.region or 'gcp:region'}, which the gateway's load balancer "
                    "needs and its NetworkPolicies admit; the program creates none in a VPC it does not "
                    f"manage (create one: {PROXY_ONLY_SUBNET})",
                )
            else:
                check_proxy_only_range(
                    existing.proxy_only_cidr, key, [], self.problems, most_prefix=MAX_PROXY_ONLY_PREFIX
                )
            return network
        cidr = network.proxy_only_cidr or DEFAULT_PROXY_ONLY_CIDR
        key = f"{NETWORK}.proxyOnlyCidr" + ("" if top_set else f" (default {DEFAULT_PROXY_ONLY_CIDR})")
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
        check_proxy_only_range(str(cidr), key, others, self.problems, most_prefix=MAX_PROXY_ONLY_PREFIX)
        return network.model_copy(update={"proxy_only_cidr": cidr})
