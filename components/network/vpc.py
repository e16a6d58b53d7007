"""A VPC built for a VPC-native GKE cluster with private nodes."""

from typing import Any, NotRequired, TypedDict

import pulumi
from pulumi_gcp import compute

from ..core.arg_types import ProjectId, RegionName, matching
from ..core.common import K8S_NAME, KeyNames, Problems
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.validation import ArgsModel, Deferrable
from .model import MAX_PROXY_ONLY_PREFIX, VpcSettings
from .rules import check_proxy_only_range, check_ranges

PODS_RANGE_NAME = "pods"
SERVICES_RANGE_NAME = "services"
# The longest suffix a resource name gets (`<prefix>-router`): the prefix leaves room for it in 63
# (the proxy-only subnet's `-proxy` is shorter).
MAX_NAME_PREFIX = 63 - len("-router")


class GkeNetworkArgs(TypedDict):
    """The VPC's project, region, name and address ranges."""

    project: pulumi.Input[str]
    """The GCP project of the VPC."""
    region: pulumi.Input[str]
    """The region of the subnet, the router and Cloud NAT, e.g. us-central1."""
    name_prefix: str
    """Prefix of the GCP resource names (the cluster's name): `<prefix>-vpc`, `<prefix>-nodes`,
    `<prefix>-router`, `<prefix>-nat`. Lowercase letters, digits and hyphens, at most 56 characters."""
    subnet_cidr: NotRequired[pulumi.Input[str]]
    """The subnet's primary range, the nodes' addresses (a /29 or larger). Defaults to 10.10.0.0/20."""
    pods_cidr: NotRequired[pulumi.Input[str]]
    """The Pods' secondary range (a /24 or larger: GKE gives each node a /24). Defaults to
    10.16.0.0/14."""
    services_cidr: NotRequired[pulumi.Input[str]]
    """The Services' secondary range. Defaults to 10.20.0.0/20."""
    cloud_nat: NotRequired[bool]
    """Cloud NAT for the subnet: egress for private nodes, which have no external IP (image pulls from
    outside Google). Defaults to true."""
    flow_log_sampling: NotRequired[float]
    """VPC flow logs on the subnet: the fraction of flows logged, 0 to 1; 0 turns them off. Defaults
    to 0.5."""
    proxy_only_cidr: NotRequired[pulumi.Input[str]]
    """A proxy-only subnet `<prefix>-proxy` (purpose REGIONAL_MANAGED_PROXY, role ACTIVE) with this
    range, for the region's Envoy-based load balancers, such as an internal Gateway (`gke-l7-rilb`,
    InferenceGateway): at least a /26, Google recommends a /23; clear of the other ranges. A VPC has
    one active per region. Defaults to none."""


class _GkeNetworkPlace(ArgsModel):
    project: Deferrable[ProjectId]
    region: Deferrable[RegionName]
    name_prefix: matching(  # type: ignore[valid-type]
        K8S_NAME,
        "lowercase letters, digits and hyphens, starting with a letter (a cluster name)",
        max_length=MAX_NAME_PREFIX,
    )


class _GkeNetworkSpec(VpcSettings, _GkeNetworkPlace):
    """GkeNetwork's args as checked: where the VPC goes, then the settings a stack file's network
    section has too (one model, read here by snake_case name)."""

    cloud_nat: bool = True


def _network_rules(spec: _GkeNetworkSpec) -> list[str]:
    """The ranges' own rules, the same a stack file's network section gets (network/rules.py); the
    stack file's capacity check (every node of every pool) is the section's (network/section.py)."""
    problems = Problems()
    ranges = [
        (key, value)
        for key in ("subnet_cidr", "pods_cidr", "services_cidr")
        if isinstance(value := getattr(spec, key), str)
    ]
    check_ranges(ranges, KeyNames(camel=False), problems)
    if isinstance(spec.proxy_only_cidr, str):
        check_proxy_only_range(
            spec.proxy_only_cidr, "proxy_only_cidr", ranges, problems, most_prefix=MAX_PROXY_ONLY_PREFIX
        )
    return problems.items


class GkeNetwork(GkeGpuComponent[_GkeNetworkSpec]):
    """Custom-mode VPC, one subnet with Pod and Service secondary ranges, and Cloud NAT.

    Private Google Access is on, so private nodes reach Google APIs (Artifact Registry, Cloud
    Logging/Monitoring) without NAT. VPC flow logs on the subnet (nodes, Pods and Services) go to
    Cloud Logging, sampled at ``flow_log_sampling``; changing or turning them off is an in-place
    update of the subnet. No firewall rules are declared: GKE creates the ones it needs
    (control plane to nodes, Pod-to-Pod) and everything else stays denied by the VPC's implied
    ingress-deny rule.

    With ``proxy_only_cidr``, a proxy-only subnet in the region for Envoy-based load balancers (an
    internal Gateway): their proxies take their addresses from it and reach the backends from it. No
    flow logs there: GCP does not log proxy-only subnets.

    Hazard: changing a CIDR replaces the subnet, which GKE refuses while a cluster uses it. Pick
    ranges once; add ranges rather than resizing.
    """

    network_name: pulumi.Output[str]
    """The VPC's name."""
    network_self_link: pulumi.Output[str]
    """The VPC's self link (the cluster's `network`)."""
    subnetwork_name: pulumi.Output[str]
    """The subnet's name."""
    subnetwork_self_link: pulumi.Output[str]
    """The subnet's self link (the cluster's `subnetwork`)."""
    pods_range_name: pulumi.Output[str]
    """The name of the subnet's secondary range for Pods."""
    services_range_name: pulumi.Output[str]
    """The name of the subnet's secondary range for Services."""

    _args_model = _GkeNetworkSpec
    _args_by_name = True
    _args_rules = staticmethod(_network_rules)

    def __init__(
        self,
        name: str,
        /,
        args: GkeNetworkArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        child = pulumi.ResourceOptions(parent=self)
        project = spec.project
        region = spec.region
        prefix = spec.name_prefix

        self.network = compute.Network(
            f"{name}-vpc",
            name=f"{prefix}-vpc",
            project=project,
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            description="VPC for a GPU GKE cluster, managed by the gke-gpu Pulumi program",
            opts=child,
        )
        self.subnetwork = compute.Subnetwork(
            f"{name}-nodes",
            name=f"{prefix}-nodes",
            project=project,
            region=region,
            network=self.network.id,
            ip_cidr_range=spec.subnet_cidr,
            private_ip_google_access=True,
            secondary_ip_ranges=[
                compute.SubnetworkSecondaryIpRangeArgs(
                    range_name=PODS_RANGE_NAME, ip_cidr_range=spec.pods_cidr
                ),
                compute.SubnetworkSecondaryIpRangeArgs(
                    range_name=SERVICES_RANGE_NAME,
                    ip_cidr_range=spec.services_cidr,
                ),
            ],
            log_config=flow_log_config(spec.flow_log_sampling),
            opts=child,
        )
        self.proxy_only_subnetwork: compute.Subnetwork | None = None
        if spec.proxy_only_cidr is not None:
            # HAZARD: pick the range once. Load balancers move to another proxy-only subnet only through
            # a BACKUP subnet promoted to ACTIVE (`role`), which this component does not do.
            self.proxy_only_subnetwork = compute.Subnetwork(
                f"{name}-proxy-only",
                name=f"{prefix}-proxy",
                project=project,
                region=region,
                network=self.network.id,
                ip_cidr_range=spec.proxy_only_cidr,
                purpose="REGIONAL_MANAGED_PROXY",
                role="ACTIVE",
                opts=child,
            )
        if spec.cloud_nat:
            self.router = compute.Router(
                f"{name}-router",
                name=f"{prefix}-router",
                project=project,
                region=region,
                network=self.network.id,
                opts=child,
            )
            self.nat = compute.RouterNat(
                f"{name}-nat",
                name=f"{prefix}-nat",
                project=project,
                region=region,
                router=self.router.name,
                nat_ip_allocate_option="AUTO_ONLY",
                # Only this subnet (nodes and Pods), not every subnet a shared VPC may grow.
                source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
                subnetworks=[
                    compute.RouterNatSubnetworkArgs(
                        name=self.subnetwork.id,
                        source_ip_ranges_to_nats=["ALL_IP_RANGES"],
                    )
                ],
                log_config=compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
                opts=child,
            )

        self.network_name = self.network.name
        self.network_self_link = self.network.self_link
        self.subnetwork_name = self.subnetwork.name
        self.subnetwork_self_link = self.subnetwork.self_link
        self.pods_range_name = pulumi.Output.from_input(PODS_RANGE_NAME)
        self.services_range_name = pulumi.Output.from_input(SERVICES_RANGE_NAME)
        self.register_outputs(
            {
                "networkName": self.network_name,
                "networkSelfLink": self.network_self_link,
                "subnetworkName": self.subnetwork_name,
                "subnetworkSelfLink": self.subnetwork_self_link,
                "podsRangeName": self.pods_range_name,
                "servicesRangeName": self.services_range_name,
            }
        )


def flow_log_config(sampling: float | None) -> "compute.SubnetworkLogConfigArgs | None":
    """VPC flow logs for a subnet, or None (no log_config block: the provider turns them off).

    The aggregation interval and metadata are GCP's defaults, written out: one record per
    connection every 5 seconds, with the VM, GKE and location annotations that make a record
    useful in an investigation."""
    if not sampling:
        return None
    return compute.SubnetworkLogConfigArgs(
        aggregation_interval="INTERVAL_5_SEC",
        flow_sampling=sampling,
        metadata="INCLUDE_ALL_METADATA",
    )
