"""The network section: a VPC built for GKE, or an existing one (the stack file's `gke-gpu:network`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..core.model import (
    NETWORK_REF,
    SUBNETWORK_REF,
    Cidr,
    GceName,
    StackModel,
    example,
)
from ..core.validation import Deferrable

# The proxy-only subnet an internal Gateway needs, when the stack creates the VPC and a service has a
# gateway: next to the default node range 10.10.0.0/20. GCP's minimum is 64 addresses (a /26); a /23
# is Google's example and recommended size (docs/serving.md, "The Inference Gateway").
DEFAULT_PROXY_ONLY_CIDR = "10.10.16.0/23"
MAX_PROXY_ONLY_PREFIX = 26


class ExistingNetworkConfig(StackModel):
    model_config = example(
        network="my-vpc", subnetwork="my-subnet", podsRangeName="pods", servicesRangeName="services"
    )

    network: Annotated[str, Field(max_length=200, pattern=NETWORK_REF)]
    subnetwork: Annotated[str, Field(max_length=250, pattern=SUBNETWORK_REF)]
    pods_range_name: GceName
    services_range_name: GceName
    # The range of the VPC's active proxy-only subnet (REGIONAL_MANAGED_PROXY) in gcp:region: the
    # program creates none in a VPC it does not manage, and a gateway's NetworkPolicies admit it.
    proxy_only_cidr: Cidr | None = None


class VpcSettings(StackModel):
    """The VPC's address ranges and flow logs: one model for the stack file's `network` section
    (camelCase keys, NetworkConfig) and GkeNetwork's args (snake_case names), so each range's type
    and default are written once. A range may be an Output in the args (Deferrable)."""

    subnet_cidr: Deferrable[Cidr] = "10.10.0.0/20"
    pods_cidr: Deferrable[Cidr] = "10.16.0.0/14"
    services_cidr: Deferrable[Cidr] = "10.20.0.0/20"
    # VPC flow logs on the subnet, sampled: 0 turns them off.
    flow_log_sampling: float = Field(0.5, ge=0, le=1)
    # A proxy-only subnet (REGIONAL_MANAGED_PROXY) for the region's Envoy-based load balancers, which
    # an internal Gateway needs; none unless set (a stack file gets DEFAULT_PROXY_ONLY_CIDR when a
    # service has gateway: true).
    proxy_only_cidr: Deferrable[Cidr] | None = None


class NetworkConfig(VpcSettings):
    """The stack file's `gke-gpu:network`: the VPC's settings, or an existing VPC, and GPUDirect's
    range."""

    model_config = example(subnetCidr="10.10.0.0/20", podsCidr="10.16.0.0/14", servicesCidr="10.20.0.0/20")

    existing: ExistingNetworkConfig | None = None
    # The range the GPUDirect NICs' subnets are carved from (gpudirect/flavors.py); resolved to
    # 192.168.0.0/16 when a pool has gpudirect: true.
    gpudirect_cidr: Cidr | None = None
