"""A VPC built for a VPC-native GKE cluster with private nodes."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_gcp import compute

from .package import component_options, component_type

PODS_RANGE_NAME = "pods"
SERVICES_RANGE_NAME = "services"


@dataclass(frozen=True, kw_only=True)
class GkeNetworkArgs:
    project: str
    region: str
    # Prefix of the GCP resource names (the cluster name): `<prefix>-vpc`, `<prefix>-nodes`, ...
    name_prefix: str
    subnet_cidr: str
    pods_cidr: str
    services_cidr: str
    # Private nodes have no external IP: Cloud NAT gives them egress (image pulls from outside Google).
    cloud_nat: bool = True
    # VPC flow logs on the subnet: the fraction of flows logged (0 < x <= 1); 0 or None: off.
    flow_log_sampling: float | None = 0.5


class GkeNetwork(pulumi.ComponentResource):
    """Custom-mode VPC, one subnet with Pod and Service secondary ranges, and Cloud NAT.

    Private Google Access is on, so private nodes reach Google APIs (Artifact Registry, Cloud
    Logging/Monitoring) without NAT. VPC flow logs on the subnet (nodes, Pods and Services) go to
    Cloud Logging, sampled at ``flow_log_sampling``; changing or turning them off is an in-place
    update of the subnet. No firewall rules are declared: GKE creates the ones it needs
    (control plane to nodes, Pod-to-Pod) and everything else stays denied by the VPC's implied
    ingress-deny rule.

    Hazard: changing a CIDR replaces the subnet, which GKE refuses while a cluster uses it. Pick
    ranges once; add ranges rather than resizing.
    """

    network_name: pulumi.Output[str]
    network_self_link: pulumi.Output[str]
    subnetwork_name: pulumi.Output[str]
    subnetwork_self_link: pulumi.Output[str]
    pods_range_name: str
    services_range_name: str

    def __init__(self, name: str, args: GkeNetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(component_type("GkeNetwork"), name, None, component_options("GkeNetwork", opts))
        child = pulumi.ResourceOptions(parent=self)

        self.network = compute.Network(
            f"{name}-vpc",
            name=f"{args.name_prefix}-vpc",
            project=args.project,
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            description="VPC for a GPU GKE cluster, managed by the gke-gpu Pulumi program",
            opts=child,
        )
        self.subnetwork = compute.Subnetwork(
            f"{name}-nodes",
            name=f"{args.name_prefix}-nodes",
            project=args.project,
            region=args.region,
            network=self.network.id,
            ip_cidr_range=args.subnet_cidr,
            private_ip_google_access=True,
            secondary_ip_ranges=[
                compute.SubnetworkSecondaryIpRangeArgs(
                    range_name=PODS_RANGE_NAME, ip_cidr_range=args.pods_cidr
                ),
                compute.SubnetworkSecondaryIpRangeArgs(
                    range_name=SERVICES_RANGE_NAME, ip_cidr_range=args.services_cidr
                ),
            ],
            log_config=flow_log_config(args.flow_log_sampling),
            opts=child,
        )
        if args.cloud_nat:
            self.router = compute.Router(
                f"{name}-router",
                name=f"{args.name_prefix}-router",
                project=args.project,
                region=args.region,
                network=self.network.id,
                opts=child,
            )
            self.nat = compute.RouterNat(
                f"{name}-nat",
                name=f"{args.name_prefix}-nat",
                project=args.project,
                region=args.region,
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
        self.pods_range_name = PODS_RANGE_NAME
        self.services_range_name = SERVICES_RANGE_NAME
        self.register_outputs(
            {
                "networkName": self.network_name,
                "subnetworkName": self.subnetwork_name,
                "podsRangeName": self.pods_range_name,
                "servicesRangeName": self.services_range_name,
            }
        )


def flow_log_config(sampling: float | None) -> compute.SubnetworkLogConfigArgs | None:
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
